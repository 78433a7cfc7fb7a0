/**
 * The accuracy–cost frontier: delegation, monolithic, and self-consistency over
 * k monolithic samples (majority vote), each at a sweep of generation limits, on the same
 * problems and weights. Every point carries n and a Wilson interval; the Pareto set is taken
 * over all points of a comparison.
 */
import { Rng } from '../rng';
import type { RolloutConfig } from '../rollout/config';
import { checkField, fieldOf } from '../runConfig';
import { defaultRolloutConfig } from '../runConfigTargets';
import { type ContextDecoder, RolloutScheduler } from '../rollout/scheduler';
import type { EpisodeTrace, TokenCounts } from '../rollout/trace';
import type { Problem, Task } from '../tasks/types';
import { majorityVote, paretoSet, wilsonInterval } from './stats';
import { type RewardConfig, episodeReward } from '../rl/reward';

export type Method = 'delegate' | 'mono' | `sc${number}`;

export interface FrontierPoint {
  method: Method;
  /** The root's generation limit (tokens). */
  limit: number;
  n: number;
  accuracy: number;
  /** Generated tokens per problem: root + all clones (+ every sample for self-consistency). */
  meanTokens: number;
  /** Root + longest clone per round; for self-consistency the longest sample (they run side by side). */
  meanCriticalPathTokens: number;
  interval: [number, number];
  /** Tokens the root generates per problem (every sample's root for self-consistency). */
  meanRootTokens?: number;
  /**
   * The longest context one model call holds per problem: the root's prompt, its own tokens
   * and every injected clone answer (for self-consistency the longest sample). The measure of
   * a long-context task: the whole document in one monolithic prompt, or only chunk keys at
   * a delegating root.
   */
  meanRootContextTokens?: number;
  /** Share of problems whose root started at least one clone (any sample's, for self-consistency: 0). */
  delegationRate?: number;
  /** Mean episode reward over every episode (all samples), when the evaluation was given a reward config. */
  meanReward?: number;
  /** Optional label of the weights (e.g. "warmstart", "grpo", "step 20"). */
  checkpoint?: string;
  /** The GRPO step of the weights, for points evaluated during a training run. */
  step?: number;
  /** The task evaluated, for a training run's points (a mix evaluates each of its tasks). */
  task?: string;
}

export interface FrontierSpec {
  methods: Method[];
  limits: number[];
  /** Sampling temperature for self-consistency samples. */
  temperature: number;
  seed: number;
  /** Episodes run side by side per scheduler batch. */
  batch: number;
  /** Rollout settings under the method's own (budgets, clones per round, …); the task's defaults otherwise. */
  rollout?: Partial<RolloutConfig>;
}

export const FRONTIER_DEFAULTS: FrontierSpec = {
  methods: ['delegate', 'mono', 'sc1', 'sc2', 'sc4', 'sc8'],
  limits: [48, 96, 160, 224],
  temperature: 1,
  seed: 1,
  batch: 64,
};

export function samplesOf(m: Method): number {
  if (m === 'delegate' || m === 'mono') return 1;
  const k = Number(m.slice(2));
  if (!Number.isInteger(k) || k < 1 || k > 64) throw new Error(`method ${m}: self-consistency needs sc1 … sc64`);
  return k;
}

/** Checks a list of method names (delegate, mono, scK); throws naming the first bad one. */
export function validateMethods(methods: readonly string[]): Method[] {
  if (methods.length === 0) throw new Error('methods: give at least one of delegate, mono, scK');
  for (const m of methods) {
    if (m !== 'delegate' && m !== 'mono' && !/^sc\d+$/.test(m)) throw new Error(`methods: unknown method ${JSON.stringify(m)} (delegate, mono or scK)`);
    if (m.startsWith('sc')) samplesOf(m as Method);
  }
  return [...methods] as Method[];
}

/** Checks generation limits: each a root token limit in the table's range (rootMaxTokens). */
export function validateLimits(limits: readonly number[]): number[] {
  if (limits.length === 0) throw new Error('limits: give at least one root token limit');
  for (const l of limits) {
    const e = checkField(fieldOf('rootMaxTokens'), l, 'limits: each');
    if (e) throw new Error(e);
  }
  return [...limits];
}

/** Checks a problem count for an evaluation: an integer in [1, 2000]. */
export function validateProblemCount(n: unknown): number {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 2000) throw new Error(`n must be an integer in [1, 2000] (got ${JSON.stringify(n)})`);
  return n;
}

/** `m` at `limit`: the table's rollout for the task, with the comparison's own settings over it. */
function configFor(m: Method, limit: number, temperature: number, task: string, base: Partial<RolloutConfig>): RolloutConfig {
  if (m === 'delegate') return defaultRolloutConfig(task, { ...base, greedy: true, rootMaxTokens: limit });
  if (m === 'mono') return defaultRolloutConfig(task, { ...base, greedy: true, allowSpawn: false, rootMaxTokens: limit });
  return defaultRolloutConfig(task, { ...base, temperature, allowSpawn: false, rootMaxTokens: limit });
}

/** Run `k` episodes of every problem; traces grouped per problem. */
async function runSamples<O>(
  decoder: ContextDecoder,
  task: Task<O>,
  problems: readonly Problem[],
  k: number,
  cfg: RolloutConfig,
  seed: number,
  batch: number,
  encode: (t: string) => number[],
  onProgress?: (done: number, total: number) => void,
): Promise<EpisodeTrace[][]> {
  const jobs = problems.flatMap((p, i) => Array.from({ length: k }, (_, j) => ({ p, i, j })));
  const out: EpisodeTrace[][] = problems.map(() => []);
  for (let start = 0; start < jobs.length; start += batch) {
    const slice = jobs.slice(start, start + batch);
    const s = new RolloutScheduler(decoder, cfg, { policyVersion: 0, encode });
    slice.forEach(({ p, i, j }) => s.addEpisode(task, p, Rng.stream(seed, 'frontier-episode', i, j)));
    const traces = await s.run(onProgress && ((finished) => onProgress(start + finished, jobs.length)));
    slice.forEach(({ i }, n) => out[i].push(traces[n]));
  }
  return out;
}

/** One frontier point: `method` at `limit` on every problem. */
export async function frontierPoint<O>(
  decoder: ContextDecoder,
  task: Task<O>,
  problems: readonly Problem[],
  method: Method,
  limit: number,
  spec: Pick<FrontierSpec, 'temperature' | 'seed' | 'batch' | 'rollout'> & { reward?: RewardConfig },
  encode: (t: string) => number[],
  /** Episodes done of the point's total (problems × samples), as they finish. */
  onProgress?: (done: number, total: number) => void,
): Promise<FrontierPoint> {
  const k = samplesOf(method);
  const cfg = configFor(method, limit, spec.temperature, task.name, spec.rollout ?? {});
  const groups = await runSamples(decoder, task, problems, k, cfg, spec.seed, spec.batch, encode, onProgress);
  let reward = 0;
  let episodes = 0;
  if (spec.reward) {
    const r = spec.reward;
    groups.forEach((traces, i) => {
      for (const t of traces) reward += episodeReward(t, task.verify(problems[i], t.answer), r).reward;
      episodes += traces.length;
    });
  }
  return { ...pointOf(task, problems, method, limit, groups), ...(spec.reward ? { meanReward: episodes === 0 ? 0 : reward / episodes } : {}) };
}

/** What a point reads of an episode (an episode trace, or a real model's text episode). */
export interface PointEpisode {
  answer: string | null;
  /** The root first; each context's tokens, prompt included. */
  contexts: readonly { tokens: { readonly length: number } }[];
  tokens: Pick<TokenCounts, 'total' | 'criticalPath' | 'root'>;
}

/**
 * A point from the episodes of each problem (several for self-consistency, voted): accuracy with
 * its Wilson interval, and the costs per problem.
 */
export function pointOf<O>(
  task: Task<O>,
  problems: readonly Problem[],
  method: Method,
  limit: number,
  groups: readonly (readonly PointEpisode[])[],
): FrontierPoint {
  let correct = 0;
  let tokens = 0;
  let critical = 0;
  let root = 0;
  let rootContext = 0;
  let delegated = 0;
  groups.forEach((traces, i) => {
    if (traces.some((t) => t.contexts.length > 1)) delegated++;
    const answer = traces.length === 1 ? traces[0].answer : majorityVote(traces.map((t) => t.answer));
    if (task.verify(problems[i], answer).correct) correct++;
    tokens += traces.reduce((a, t) => a + t.tokens.total, 0);
    critical += Math.max(...traces.map((t) => t.tokens.criticalPath));
    root += traces.reduce((a, t) => a + t.tokens.root, 0);
    rootContext += Math.max(...traces.map((t) => t.contexts[0].tokens.length));
  });
  const n = problems.length;
  const mean = (x: number) => (n === 0 ? 0 : x / n);
  return {
    method,
    limit,
    n,
    accuracy: mean(correct),
    meanTokens: mean(tokens),
    meanCriticalPathTokens: mean(critical),
    interval: wilsonInterval(correct, n),
    meanRootTokens: mean(root),
    meanRootContextTokens: mean(rootContext),
    delegationRate: mean(delegated),
  };
}

/** Every method at every limit, and the Pareto set over them (by total or critical-path cost). */
export async function frontier<O>(
  decoder: ContextDecoder,
  task: Task<O>,
  problems: readonly Problem[],
  spec: FrontierSpec,
  encode: (t: string) => number[],
  onPoint?: (p: FrontierPoint) => void,
): Promise<{ points: FrontierPoint[]; pareto: number[] }> {
  const points: FrontierPoint[] = [];
  for (const method of spec.methods) {
    for (const limit of spec.limits) {
      const p = await frontierPoint(decoder, task, problems, method, limit, spec, encode);
      points.push(p);
      onPoint?.(p);
    }
  }
  return { points, pareto: paretoOf(points, 'total') };
}

export function paretoOf(points: readonly FrontierPoint[], cost: 'total' | 'critical'): number[] {
  return paretoSet(points.map((p) => ({ cost: cost === 'total' ? p.meanTokens : p.meanCriticalPathTokens, accuracy: p.accuracy })));
}

export function frontierCsv(points: readonly FrontierPoint[]): string {
  const head = 'checkpoint,method,limit,n,accuracy,interval_low,interval_high,mean_tokens,mean_critical_path_tokens,mean_root_tokens,mean_root_context_tokens';
  const rows = points.map((p) =>
    [
      p.checkpoint ?? '',
      p.method,
      p.limit,
      p.n,
      p.accuracy,
      p.interval[0],
      p.interval[1],
      p.meanTokens,
      p.meanCriticalPathTokens,
      p.meanRootTokens ?? '',
      p.meanRootContextTokens ?? '',
    ].join(','),
  );
  return [head, ...rows].join('\n') + '\n';
}
