/**
 * Held-out evaluation of a real model under the text protocol: greedy episodes on the monitored
 * split's problems (splits.ts: disjoint from every training problem), from HELD_OUT_SEED.
 */
import { HELD_OUT_SEED } from './splits';
import { heldOutProblems } from './evaluate';
import { type TextEpisode, type TextModel, runTextEpisode } from '../rollout/textEpisode';
import { type TextLimits } from '../rollout/textLimits';
import type { Problem, Task } from '../tasks/types';
import type { TaskName } from '../tasks';
import { monoChat, rootChat } from '../verl/dataset';
import type { FrontierPoint } from './frontier';
import { wilsonInterval } from './stats';

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

/**
 * One accuracy–cost point of a real model: `method` (delegate: the spawn_clone tool offered;
 * mono: one message with the whole problem, no tool) at a root token limit, greedy, on
 * `problems`, with the Wilson interval and the costs a frontier compares (frontier.ts's
 * FrontierPoint, so the same tables, charts and Pareto sets read it).
 */
export async function textFrontierPoint<O>(
  model: TextModel,
  task: Task<O>,
  problems: readonly Problem[],
  method: 'delegate' | 'mono',
  limit: number,
  limits: Omit<TextLimits, 'rootMaxTokens'>,
  onEpisode?: (done: number, total: number) => void,
): Promise<FrontierPoint> {
  let correct = 0;
  let tokens = 0;
  let critical = 0;
  let root = 0;
  let rootContext = 0;
  let delegated = 0;
  for (const [i, problem] of problems.entries()) {
    const name = task.name as TaskName;
    const e = await runTextEpisode(
      model,
      method === 'delegate' ? rootChat(name, problem) : monoChat(name, problem),
      { ...limits, rootMaxTokens: limit },
      {
        context: problem.context ?? {},
        offerTool: method === 'delegate',
      },
    );
    if (task.verify(problem, e.answer).correct) correct++;
    const clones = e.contexts.slice(1);
    tokens += e.contexts.reduce((n, c) => n + c.generatedTokens, 0);
    const longest = Array.from({ length: e.rounds }, (_, r) => clones.filter((c) => c.round === r + 1).reduce((m, c) => Math.max(m, c.generatedTokens), 0));
    critical += e.contexts[0].generatedTokens + longest.reduce((a, b) => a + b, 0);
    root += e.contexts[0].generatedTokens;
    rootContext += e.contexts[0].tokens.length;
    if (e.rounds > 0) delegated++;
    onEpisode?.(i + 1, problems.length);
  }
  const n = problems.length;
  return {
    method,
    limit,
    n,
    accuracy: correct / n,
    interval: wilsonInterval(correct, n),
    meanTokens: tokens / n,
    meanCriticalPathTokens: critical / n,
    meanRootTokens: root / n,
    meanRootContextTokens: rootContext / n,
    delegationRate: delegated / n,
  };
}
