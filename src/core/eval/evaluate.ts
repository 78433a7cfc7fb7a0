/**
 * Evaluation of a policy on held-out problems: accuracy and the token costs.
 * Problems come from a seed and a split of their own, so every method and checkpoint sees the
 * same set, and no training problem is in it.
 */
import { emptyViolationCounts, type Violation } from '../protocol/violations';
import { Rng } from '../rng';
import { type EvalSplit, drawProblem } from './splits';
import type { RolloutConfig } from '../rollout/config';
import { type ContextDecoder, RolloutScheduler } from '../rollout/scheduler';
import type { EpisodeTrace } from '../rollout/trace';
import type { Problem, Task } from '../tasks/types';
import { type RewardConfig, type RewardedEpisode, episodeReward } from '../rl/reward';

export interface EvalSummary {
  n: number;
  accuracy: number;
  /** Generated tokens per problem, root and all clones. */
  meanTokens: number;
  meanCriticalPathTokens: number;
  meanRootTokens: number;
  meanClones: number;
  /** Share of episodes whose root spawned at least once. */
  delegationRate: number;
  violations: Record<Violation, number>;
}

/**
 * A held-out problem set: `n` problems of `split` (splits.ts: the monitored set or the final
 * evaluation set, disjoint from each other and from every training problem) for a seed, ids
 * `<split>-<seed>-<i>`. The first n of a larger set are the same problems.
 */
export function heldOutProblems<O>(task: Task<O>, opts: O, n: number, seed: number, split: EvalSplit): Problem[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, (_, i) => drawProblem(task, rng, opts, `${split}-${seed}-${i}`, split));
}

/** Run every problem once (batched `batch` episodes at a time); sampling seeded per problem. */
export async function runProblems<O>(
  decoder: ContextDecoder,
  task: Task<O>,
  problems: readonly Problem[],
  cfg: RolloutConfig,
  seed: number,
  encode: (t: string) => number[],
  batch = 64,
  policyVersion = 0,
): Promise<EpisodeTrace[]> {
  const traces: EpisodeTrace[] = [];
  for (let start = 0; start < problems.length; start += batch) {
    const s = new RolloutScheduler(decoder, cfg, { policyVersion, encode });
    problems.slice(start, start + batch).forEach((p, i) => s.addEpisode(task, p, Rng.stream(seed, 'eval-episode', start + i)));
    traces.push(...(await s.run()));
  }
  return traces;
}

export function summarize(traces: readonly EpisodeTrace[]): EvalSummary {
  const n = traces.length;
  const violations = emptyViolationCounts();
  let correct = 0;
  let tokens = 0;
  let critical = 0;
  let root = 0;
  let clones = 0;
  let delegated = 0;
  for (const t of traces) {
    if (t.correct) correct++;
    tokens += t.tokens.total;
    critical += t.tokens.criticalPath;
    root += t.tokens.root;
    const c = t.contexts.length - 1;
    clones += c;
    if (c > 0) delegated++;
    for (const v of t.violations) violations[v.violation]++;
  }
  const mean = (x: number) => (n === 0 ? 0 : x / n);
  return {
    n,
    accuracy: mean(correct),
    meanTokens: mean(tokens),
    meanCriticalPathTokens: mean(critical),
    meanRootTokens: mean(root),
    meanClones: mean(clones),
    delegationRate: mean(delegated),
    violations,
  };
}

/** Mean SELFCEST reward (core/rl/reward.ts) of episodes run on `problems` in order (the training reward on held-out problems). */
export function meanReward<O>(
  task: Task<O>,
  problems: readonly Problem[],
  traces: readonly (RewardedEpisode & Pick<EpisodeTrace, 'answer'>)[],
  cfg: RewardConfig,
): number {
  if (traces.length !== problems.length) throw new Error(`meanReward: ${traces.length} episodes for ${problems.length} problems`);
  if (traces.length === 0) return 0;
  const total = traces.reduce((a, t, i) => a + episodeReward(t, task.verify(problems[i], t.answer), cfg).reward, 0);
  return total / traces.length;
}
