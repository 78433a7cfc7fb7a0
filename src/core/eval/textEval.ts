/**
 * Held-out evaluation of a real model under the text protocol: greedy episodes on the monitored
 * split's problems (splits.ts: disjoint from every training problem), from HELD_OUT_SEED.
 */
import { HELD_OUT_SEED } from './splits';
import { heldOutProblems } from './evaluate';
import { type TextEpisode, type TextLimits, type TextModel, runTextEpisode } from '../rollout/textEpisode';
import type { Problem, Task } from '../tasks/types';
import type { TaskName } from '../tasks';
import { rootChat } from '../verl/dataset';

export interface TextEvalSummary {
  n: number;
  accuracy: number;
  delegationRate: number;
  /** Generated tokens per problem, root and every clone. */
  meanTokens: number;
  episodes: { problem: Problem; episode: TextEpisode; correct: boolean }[];
}

export async function evaluateText<O>(model: TextModel, task: Task<O>, opts: O, n: number, limits: TextLimits, seed = HELD_OUT_SEED): Promise<TextEvalSummary> {
  const episodes: TextEvalSummary['episodes'] = [];
  for (const problem of heldOutProblems(task, opts, n, seed, 'monitor')) {
    const episode = await runTextEpisode(model, rootChat(task.name as TaskName, problem), limits, { context: problem.context ?? {} });
    episodes.push({ problem, episode, correct: task.verify(problem, episode.answer).correct });
  }
  const mean = (f: (e: TextEvalSummary['episodes'][number]) => number) => episodes.reduce((s, e) => s + f(e), 0) / Math.max(1, n);
  return {
    n,
    accuracy: mean((e) => (e.correct ? 1 : 0)),
    delegationRate: mean((e) => (e.episode.rounds > 0 ? 1 : 0)),
    meanTokens: mean((e) => e.episode.contexts.reduce((s, c) => s + c.generatedTokens, 0)),
    episodes,
  };
}
