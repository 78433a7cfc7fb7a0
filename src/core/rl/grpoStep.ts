/**
 * One GRPO training step: sample B prompts, run G episodes of each through the batched
 * rollout engine, score them, compute advantages (group baseline, clone credit, gating),
 * and update the shared weights on every root and clone path at once.
 *
 * PPO as the reference runs it: the rollout batch is split into mini-batches of
 * whole prompt groups (`miniBatch` prompts each), one optimizer update per mini-batch, for
 * `innerEpochs` passes, each pass reshuffling the prompts with Rng.stream(seed,
 * 'grpo-minibatch', step, epoch). π_old stays the behaviour policy of the rollout, so from
 * the second update on ρ ≠ 1 and the clip acts. Aggregation weights are per mini-batch:
 * one mini-batch of the whole batch is exactly the full-batch update.
 *
 * Dynamic sampling (DAPO, optional): a group whose rewards are all equal has zero advantage
 * everywhere. Sample ⌈factor · groups still missing⌉ prompts a round, keep the groups whose
 * rewards differ, stop once B are kept (the surplus is dropped) or after `maxRounds`, and
 * train on what was kept. Round 0 draws from the step's own stream, later rounds from
 * Rng.stream(seed, 'grpo-resample', step, round): the prompts are a function of (seed,
 * step); only how many rounds run depends on the policy.
 */
import { drawProblem } from '../eval/splits';
import type { PolicyModel, Scorer } from '../policyModel';
import type { Violation } from '../protocol/violations';
import { summarize } from '../eval/evaluate';
import { Rng } from '../rng';
import type { EpisodeLimits, RolloutConfig } from '../rollout/config';
import { type ContextDecoder, RolloutScheduler } from '../rollout/scheduler';
import type { EpisodeTrace } from '../rollout/trace';
import type { AnyTask } from '../tasks';
import type { Problem, Task, Verdict } from '../tasks/types';
import { type AdvantageConfig, type ContextCredit, computeAdvantages } from './advantage';
import * as tf from '@tensorflow/tfjs';
import {
  NO_TOKENS,
  type PolicyLossConfig,
  type ReferenceShare,
  type RemotePolicyGradients,
  type RlSequence,
  type TokenSums,
  addSums,
  aggregationWeights,
  packRlPlan,
  policyGradients,
  tokenMeans,
  withReferenceLogprobs,
} from './ppoLoss';
import type { AdamW } from '../optim/adamw';
import { type TaskMixEntry, pickMixEntry, rootGeneratedTokens } from '../sft/sft';
import { type RewardBreakdown, type RewardConfig, episodeReward } from './reward';

export interface DynamicSamplingConfig {
  /** Each round samples ⌈factor · groups still missing⌉ prompts (≥ 1). */
  factor: number;
  /** Sampling rounds at most, the first included (≥ 1); then the step trains on what it kept. */
  maxRounds: number;
}

export interface GrpoConfig {
  task: string;
  taskOptions: Record<string, unknown>;
  /**
   * A mix's limits by task name (absent for one task): each task's episodes roll out under
   * `rollout` with these fields replaced (runConfigTargets.grpoConfigOf).
   */
  taskRollout?: Record<string, Partial<EpisodeLimits>>;
  steps: number;
  /** Episodes per prompt (G). */
  group: number;
  /** Prompts per step (B). */
  batch: number;
  /** Prompts per mini-batch, one optimizer update each; null: the whole batch (one update per epoch). */
  miniBatch: number | null;
  lr: number;
  /** Steps over which the learning rate rises linearly to `lr` (absent or 0: none). */
  lrWarmup?: number;
  weightDecay: number;
  gradClip: number;
  /** Passes over each rollout batch (each reshuffles the mini-batches). */
  innerEpochs: number;
  microTokens: number;
  /** DAPO dynamic sampling; null: off (zero-variance groups stay in the batch with weight 0). */
  dynamicSampling: DynamicSamplingConfig | null;
  seed: number;
  loss: PolicyLossConfig;
  advantage: AdvantageConfig;
  reward: RewardConfig;
  /** Steps trained without the reward's token cost before it starts (a two-stage run: first learn to solve, then to be brief); 0: from the first step. */
  tokenRateAfter: number;
  /** The optimizer restarts (moments and step from zero) at step `tokenRateAfter`; needs `tokenRateAfter` > 0. */
  restartOptimizer: boolean;
  rollout: RolloutConfig;
}

/** Largest padded batch (rows × length) of one forward in the updates (not a run setting: it changes speed, not results). */
export const GRPO_MICRO_TOKENS = 4096;

/** The reward a step (0-based) trains under: the token cost is off for the first `tokenRateAfter` steps. */
export function rewardAt(cfg: Pick<GrpoConfig, 'reward' | 'tokenRateAfter'>, step: number): RewardConfig {
  return step < cfg.tokenRateAfter ? { ...cfg.reward, tokenRate: 0 } : cfg.reward;
}

/**
 * Whether the optimizer restarts before step `step` (0-based): the first step under the token
 * cost, when `restartOptimizer` asks for it (never when there is no cost to switch on). A run resumed from a save at that step restarts it
 * there too (that save holds the moments of before the switch); one resumed later has the
 * restarted moments in its save.
 */
export function restartsOptimizerAt(cfg: Pick<GrpoConfig, 'tokenRateAfter' | 'restartOptimizer' | 'reward'>, step: number): boolean {
  return cfg.restartOptimizer && cfg.reward.tokenRate > 0 && cfg.tokenRateAfter > 0 && step === cfg.tokenRateAfter;
}

/** Scores an episode; the default is the SELFCEST reward. Swappable for toy objectives. */
export type RewardFn = (trace: EpisodeTrace, verdict: Verdict) => RewardBreakdown;

export interface StepMetrics {
  step: number;
  /** Episode means over every sampled episode (with dynamic sampling: dropped groups included). */
  meanReward: number;
  accuracy: number;
  meanRootTokens: number;
  meanCloneTokens: number;
  meanCriticalPathTokens: number;
  meanTotalTokens: number;
  clonesPerEpisode: number;
  delegationRate: number;
  violations: Record<Violation, number>;
  gateRate: number;
  /**
   * Share of the step's policy-gradient mass (Σ |A|·tokens, advantages as if ungated) in the
   * contexts the gate catches: what gating removes (with gating off, what it would remove).
   */
  gatedMassShare: number;
  /** Mean advantage the gated clones would have had ungated (the bias gating removes); NaN when the gate caught no clone. */
  gatedCloneAdvantage: number;
  /** Share of the sampled groups whose rewards were all equal (before any filtering). */
  zeroVarianceFraction: number;
  /** Prompt groups rolled out in this step (B, or more with dynamic sampling). */
  groupsSampled: number;
  /** Sampled groups left out of the batch by dynamic sampling (zero variance, or surplus). */
  groupsDropped: number;
  /** Mean loss of the step's updates. */
  loss: number;
  /** KL_k3 to the reference; this and the token means below: over the trained tokens of every update of the step. */
  kl: number;
  /** Share of tokens where the PPO clip binds. */
  clipFraction: number;
  /** Share of tokens with A < 0 where the dual clip binds (0 when it is off). */
  dualClipFraction: number;
  /** KL(behaviour ‖ current) ≈ (ρ − 1) − log ρ: how far the updates moved from the rollout policy. */
  approxKl: number;
  /** Entropy of the current policy on the trained tokens (nats). */
  entropy: number;
  /**
   * Share of the trained tokens with A > 0 whose behaviour probability is at least 1 / (1 + ε_high):
   * ρ = π / π_old ≤ 1 / π_old cannot pass 1 + ε_high there, so the upper clip cannot bind on them
   * however far an update moves (a nearly deterministic policy has most tokens there).
   */
  clipOutOfReach: number;
  /** Mean global gradient norm of the updates (before clipping). */
  gradNorm: number;
  /** Optimizer updates applied (mini-batches with trained tokens × epochs, less skipped ones). */
  updates: number;
  /** Updates skipped for a non-finite loss or gradient in this step. */
  nonFiniteSkips: number;
  /** Tokens of the batch trained on (counted once, whatever the epochs). */
  trainedTokens: number;
  rolloutTokensPerSec: number;
  wallSec: number;
}

/**
 * The limits a prompt's episodes run under: the task's (a mix's), and, for a root that knows its
 * limit (rollout.rootLimitMin), a limit drawn for the prompt from [rootLimitMin, its rootMaxTokens]
 * by its own stream, so runs without it draw the same problems as before. A share
 * rollout.rootLimitStraddle of the prompts draws instead from [rootLimitMin, chain − 1], where
 * `chain` (called only then) is the root tokens of the problem's monolithic chain: the chain does
 * not fit, and delegation is what can pay. A problem whose chain fits under rootLimitMin draws
 * from the whole range.
 */
export function promptLimits(
  cfg: Pick<GrpoConfig, 'rollout' | 'taskRollout' | 'seed'>,
  task: string,
  step: number,
  prompt: number,
  chain?: () => number,
): Partial<EpisodeLimits> | undefined {
  const own = cfg.taskRollout?.[task];
  const min = cfg.rollout.rootLimitMin;
  if (min === undefined) return own;
  const max = own?.rootMaxTokens ?? cfg.rollout.rootMaxTokens;
  const lo = Math.min(min, max);
  const rng = Rng.stream(cfg.seed, 'grpo-root-limit', step, prompt);
  const straddle = cfg.rollout.rootLimitStraddle ?? 0;
  // The share is decided by its own draw after the plain one, so a run without it draws as before.
  const plain = rng.int(lo, max);
  if (straddle > 0 && chain !== undefined && rng.next() < straddle) {
    const hi = Math.min(max, chain() - 1);
    if (hi >= lo) return { ...own, rootMaxTokens: Rng.stream(cfg.seed, 'grpo-root-limit-straddle', step, prompt).int(lo, hi) };
  }
  return { ...own, rootMaxTokens: plain };
}

export interface TrainerDeps<O> {
  /** The policy: what decodes the rollouts (in its protocol) and what the update trains (policyModel.ts). */
  model: PolicyModel;
  /** The frozen reference's scores for the KL term (null when β = 0). */
  reference: Scorer | null;
  optimizer: AdamW;
  /** The task; its options come from `GrpoConfig.taskOptions`. Not read when `mix` is given. */
  task?: Task<O>;
  /**
   * A task mix (each entry with its validated options and weight): each prompt's task is drawn
   * by the weights, and its episodes roll out under `GrpoConfig.taskRollout[task]`.
   */
  mix?: readonly TaskMixEntry[];
  encode: (t: string) => number[];
  rewardFn?: RewardFn;
  /**
   * Where rollouts run, already holding the policy's current weights (e.g. a pool of rollout
   * workers). Default: a decoder over `policy` in this thread, made and freed by the step.
   */
  decoder?: ContextDecoder;
  /** Hears how far the step is: episodes finished of those sampled so far, then updates applied of those planned. */
  onProgress?: (p: StepProgress) => void;
  /**
   * Data-parallel gradients (gradient workers): this thread and the remotes take each update's
   * micro-batches from one queue, after `sync` has brought the workers onto the weights the
   * update starts from. Absent or no remotes: every gradient is computed here.
   */
  gradients?: GradientShare;
}

/** Gradient workers as the trainer sees them (runtime/gradient/gradPool.ts); they take shares of the reference pass too. */
export interface GradientShare extends ReferenceShare {
  /** Brings every worker onto `params` as they are now (called before each update that shares). */
  sync(params: ReadonlyMap<string, tf.Tensor>): Promise<void>;
  remotes: readonly RemotePolicyGradients[];
}

/** Where a step is (TrainerDeps.onProgress). With dynamic sampling the rollout total grows by round. */
export type StepProgress = { phase: 'rollouts'; done: number; total: number } | { phase: 'update'; done: number; total: number };

/**
 * One episode of a step as the trainer scored it: the problem it was generated for, its trace
 * (as the rollout left it), the verdict on its answer, its reward and each context's credit
 * (`credits[j]` for `trace.contexts[j]`). `scoredTrace` (rollout/trace.ts) makes the JSONL record.
 */
export interface ScoredEpisode {
  problem: Problem;
  trace: EpisodeTrace;
  verdict: Verdict;
  reward: RewardBreakdown;
  credits: ContextCredit[];
}

/** Every episode a step sampled, scored, with its prompt groups and those that form the batch. */
interface SampledBatch {
  problems: Problem[];
  traces: EpisodeTrace[];
  verdicts: Verdict[];
  breakdowns: RewardBreakdown[];
  /** Per prompt, the indices of its episodes. */
  groups: number[][];
  /** The groups trained on (indices into `groups`, in sampling order). */
  batch: number[];
}

/** The same test computeAdvantages skips a group by: do its rewards differ at all? */
const rewardsDiffer = (rewards: readonly number[]): boolean => rewards.some((r) => r !== rewards[0]);

function checkStepConfig(cfg: GrpoConfig): void {
  if (cfg.miniBatch !== null && !(Number.isInteger(cfg.miniBatch) && cfg.miniBatch >= 1))
    throw new Error(`miniBatch must be a positive integer, or null (got ${cfg.miniBatch})`);
  const ds = cfg.dynamicSampling;
  if (ds && !(ds.factor >= 1 && Number.isFinite(ds.factor))) throw new Error(`dynamicSampling.factor must be a number ≥ 1 (got ${ds.factor})`);
  if (ds && !(Number.isInteger(ds.maxRounds) && ds.maxRounds >= 1))
    throw new Error(`dynamicSampling.maxRounds must be a positive integer (got ${ds.maxRounds})`);
}

/** The step's tasks: the mix, or the one task with `cfg.taskOptions`. */
function mixOf<O>(deps: TrainerDeps<O>, cfg: GrpoConfig): readonly TaskMixEntry[] {
  if (deps.mix) {
    if (deps.mix.length === 0) throw new Error('grpo: the task mix is empty');
    return deps.mix;
  }
  if (!deps.task) throw new Error('grpo: the trainer needs a task or a task mix');
  const task = deps.task as unknown as AnyTask;
  return [{ task, opts: task.validateOptions(cfg.taskOptions) }];
}

/** Roll out and score the step's prompts: one round, or the rounds of dynamic sampling. */
async function sampleBatch<O>(deps: TrainerDeps<O>, cfg: GrpoConfig, step: number, policyVersion: number): Promise<SampledBatch> {
  const { model, encode } = deps;
  const ds = cfg.dynamicSampling;
  const mix = mixOf(deps, cfg);
  const reward = rewardAt(cfg, step);
  const rewardFn: RewardFn = deps.rewardFn ?? ((trace, verdict) => episodeReward(trace, verdict, reward));
  const roundPrompts = (missing: number) => (ds ? Math.ceil(ds.factor * missing) : missing);
  // Room for a round's contexts up front (the cache grows past it when clones need more); 4096 is the decoder's largest start.
  const local = deps.decoder === undefined ? model.decoder(Math.min(4096, roundPrompts(cfg.batch) * cfg.group * 2)) : null;
  const decoder = deps.decoder ?? (local as ContextDecoder);
  const protocol = model.protocol(cfg.rollout);
  const out: SampledBatch = { problems: [], traces: [], verdicts: [], breakdowns: [], groups: [], batch: [] };
  try {
    for (let round = 0; round < (ds?.maxRounds ?? 1) && out.batch.length < cfg.batch; round++) {
      const rng = round === 0 ? Rng.stream(cfg.seed, 'grpo-step', step) : Rng.stream(cfg.seed, 'grpo-resample', step, round);
      const scheduler = new RolloutScheduler(decoder, cfg.rollout, { policyVersion, encode, protocol });
      const firstGroup = out.groups.length;
      const offset = out.traces.length;
      const problems: Problem[] = [];
      const tasks: AnyTask[] = [];
      const groups: number[][] = [];
      const prompts = roundPrompts(cfg.batch - out.batch.length);
      for (let b = 0; b < prompts; b++) {
        // One task draws nothing for the choice, so its problems are those of a plain run.
        const { task, opts } = mix.length === 1 ? mix[0] : mix[pickMixEntry(mix, rng)];
        // Prompt ids number the step's prompts across rounds: train-<step>-<index>.
        const problem = drawProblem(task, rng, opts, `train-${step}-${firstGroup + b}`, 'train');
        const members: number[] = [];
        const limits = promptLimits(cfg, task.name, step, firstGroup + b, () =>
          rootGeneratedTokens(task.teacherMono(problem, Rng.stream(cfg.seed, 'grpo-root-limit-chain', step, firstGroup + b)), encode),
        );
        for (let g = 0; g < cfg.group; g++) {
          const i = scheduler.addEpisode(task, problem, rng.fork(), limits);
          problems[i] = problem;
          tasks[i] = task;
          members.push(offset + i);
        }
        groups.push(members);
      }
      const before = out.traces.length;
      const traces = await scheduler.run(
        deps.onProgress && ((finished, episodes) => deps.onProgress?.({ phase: 'rollouts', done: before + finished, total: before + episodes })),
      );
      traces.forEach((t, i) => {
        const verdict = tasks[i].verify(problems[i], t.answer);
        out.problems.push(problems[i]);
        out.traces.push(t);
        out.verdicts.push(verdict);
        out.breakdowns.push(rewardFn(t, verdict));
      });
      for (const members of groups) {
        const k = out.groups.push(members) - 1;
        const keep = !ds || rewardsDiffer(members.map((i) => out.breakdowns[i].reward));
        if (keep && out.batch.length < cfg.batch) out.batch.push(k);
      }
    }
  } finally {
    local?.dispose();
  }
  return out;
}

/** Each context of an episode as a sequence for the update, with its credit. */
export function episodeSequences(trace: EpisodeTrace, credits: readonly ContextCredit[]): RlSequence[] {
  return trace.contexts.map((ctx, j) => {
    const actions: number[] = [];
    const old: number[] = [];
    let k = 0;
    for (let p = 1; p < ctx.tokens.length; p++) {
      const isAction = ctx.writers[p] === 'g';
      actions.push(isAction ? 1 : 0);
      old.push(isAction ? ctx.logprobs[k++] : 0);
    }
    return { tokens: ctx.tokens, actions, oldLogprobs: old, advantage: credits[j].advantage, weight: credits[j].weight };
  });
}

interface UpdateStats {
  loss: number;
  sums: TokenSums;
  gradNorm: number;
  updates: number;
  nonFiniteSkips: number;
}

/**
 * The summed policy gradients of one update's sequences: here, or with the gradient workers
 * (`deps.gradients`) taking micro-batches from one queue, added in micro-batch order. Null when
 * nothing trains.
 */
async function updateGradients<O>(
  deps: TrainerDeps<O>,
  cfg: GrpoConfig,
  seqs: readonly RlSequence[],
): Promise<{ grads: Map<string, tf.Tensor>; loss: number; sums: TokenSums } | null> {
  const { model } = deps;
  const weights = aggregationWeights(seqs, cfg.loss.aggregation);
  const remotes = deps.gradients?.remotes ?? [];
  const { batches, plan } = packRlPlan(seqs, weights, remotes.length + 1, cfg.microTokens);
  if (batches.length === 0) return null;
  if (remotes.length > 0) {
    if (model.replica === undefined)
      throw new Error('grpo: gradient workers rebuild a model from its trained weights, and LoRA adapters are not the whole model');
    await (deps.gradients as GradientShare).sync(model.params);
  }
  const r = await policyGradients(model, batches, cfg.loss, { plan, remotes, patience: deps.gradients?.patience });
  return { grads: r.grads, loss: r.loss, sums: r.sums };
}

/**
 * The PPO updates of one rollout batch (`groups[k]`: the sequences of prompt k): for each
 * epoch, the prompts shuffled into mini-batches of `miniBatch`, one optimizer update each.
 * A mini-batch's prompts keep their rollout order, so a single mini-batch of the whole batch
 * packs and sums exactly as the full-batch update.
 */
async function ppoUpdates<O>(deps: TrainerDeps<O>, cfg: GrpoConfig, step: number, groups: readonly RlSequence[][]): Promise<UpdateStats> {
  const withRef = await withReferenceLogprobs(deps.reference, groups.flat(), cfg.loss, cfg.microTokens, deps.gradients);
  let at = 0;
  const seqsOf = groups.map((g) => withRef.slice(at, (at += g.length)));
  const size = Math.min(cfg.miniBatch ?? groups.length, groups.length);
  let sums = NO_TOKENS;
  let lossSum = 0;
  let normSum = 0;
  let attempts = 0;
  let losses = 0;
  let updates = 0;
  let nonFiniteSkips = 0;
  const planned = size === 0 ? 0 : cfg.innerEpochs * Math.ceil(groups.length / size);
  let tried = 0;
  for (let epoch = 0; epoch < cfg.innerEpochs && size > 0; epoch++) {
    const order = Rng.stream(cfg.seed, 'grpo-minibatch', step, epoch).shuffle(groups.map((_, k) => k));
    for (let first = 0; first < order.length; first += size) {
      const members = order.slice(first, first + size).sort((a, b) => a - b);
      const seqs = members.flatMap((k) => seqsOf[k]);
      const r = await updateGradients(deps, cfg, seqs);
      if (r === null) {
        deps.onProgress?.({ phase: 'update', done: ++tried, total: planned });
        continue; // nothing trained in these groups (all skipped or gated)
      }
      sums = addSums(sums, r.sums);
      lossSum += r.loss;
      losses++;
      if (!Number.isFinite(r.loss)) {
        nonFiniteSkips++;
      } else {
        const s = await deps.optimizer.apply(r.grads, lrAt(cfg, step));
        normSum += s.gradNorm;
        attempts++;
        if (s.applied) updates++;
        else nonFiniteSkips++;
      }
      r.grads.forEach((g: tf.Tensor) => g.dispose());
      deps.onProgress?.({ phase: 'update', done: ++tried, total: planned });
    }
  }
  return { loss: losses === 0 ? 0 : lossSum / losses, sums, gradNorm: attempts === 0 ? 0 : normSum / attempts, updates, nonFiniteSkips };
}

/** Trained tokens with A > 0 and π_old ≥ 1 / (1 + ε_high) (StepMetrics.clipOutOfReach), counted. */
export function clipOutOfReach(seqs: readonly RlSequence[], clipHigh: number): number {
  const floor = -Math.log1p(clipHigh);
  let n = 0;
  for (const s of seqs) {
    if (!(s.weight > 0 && s.advantage > 0)) continue;
    s.actions.forEach((a, i) => {
      if (a === 1 && s.oldLogprobs[i] >= floor) n++;
    });
  }
  return n;
}

/** The learning rate of a GRPO step (0-based): linear warm-up over the first `lrWarmup` steps, then `lr`. */
export function lrAt(cfg: Pick<GrpoConfig, 'lr' | 'lrWarmup'>, step: number): number {
  const w = cfg.lrWarmup ?? 0;
  return w > 0 && step < w ? (cfg.lr * (step + 1)) / w : cfg.lr;
}

export async function grpoStep<O>(
  deps: TrainerDeps<O>,
  cfg: GrpoConfig,
  step: number,
  policyVersion = step,
): Promise<{ metrics: StepMetrics; episodes: ScoredEpisode[] }> {
  const t0 = Date.now();
  checkStepConfig(cfg);
  const { problems, traces, verdicts, breakdowns, groups, batch } = await sampleBatch(deps, cfg, step, policyVersion);
  const rolloutSec = (Date.now() - t0) / 1000;

  const rewards = breakdowns.map((r) => r.reward);
  const { credits, stats } = computeAdvantages(traces, rewards, groups, cfg.advantage);
  // A group left out of the batch trained nothing: its effective credit is zero.
  const inBatch = new Set(batch);
  groups.forEach((g, k) => {
    if (!inBatch.has(k)) for (const i of g) credits[i] = credits[i].map((c) => ({ ...c, advantage: 0, weight: 0 }));
  });
  const groupSeqs = batch.map((k) => groups[k].flatMap((i) => episodeSequences(traces[i], credits[i])));
  const trainedTokens = groupSeqs.flat().reduce((n, s) => n + (s.weight > 0 ? s.actions.reduce((a, b) => a + b, 0) : 0), 0);
  const outOfReach = clipOutOfReach(groupSeqs.flat(), cfg.loss.clipHigh);
  const u = await ppoUpdates(deps, cfg, step, groupSeqs);
  const means = tokenMeans(u.sums);

  const n = traces.length;
  const summary = summarize(traces);
  return {
    episodes: traces.map((trace, i) => ({ problem: problems[i], trace, verdict: verdicts[i], reward: breakdowns[i], credits: credits[i] })),
    metrics: {
      step: step + 1,
      meanReward: rewards.reduce((a, b) => a + b, 0) / n,
      accuracy: summary.accuracy,
      meanRootTokens: summary.meanRootTokens,
      meanCloneTokens: summary.meanTokens - summary.meanRootTokens,
      meanCriticalPathTokens: summary.meanCriticalPathTokens,
      meanTotalTokens: summary.meanTokens,
      clonesPerEpisode: summary.meanClones,
      delegationRate: summary.delegationRate,
      violations: summary.violations,
      gateRate: stats.contexts === 0 ? 0 : stats.gatedContexts / stats.contexts,
      gatedMassShare: stats.gradientMass === 0 ? 0 : stats.gatedMass / stats.gradientMass,
      gatedCloneAdvantage: stats.gatedClones === 0 ? NaN : stats.gatedCloneAdvantage / stats.gatedClones,
      zeroVarianceFraction: stats.groups === 0 ? 0 : stats.zeroVarianceGroups / stats.groups,
      groupsSampled: groups.length,
      groupsDropped: groups.length - batch.length,
      loss: u.loss,
      kl: means.kl,
      clipFraction: means.clipFraction,
      dualClipFraction: means.dualClipFraction,
      approxKl: means.approxKl,
      entropy: means.entropy,
      clipOutOfReach: trainedTokens === 0 ? 0 : outOfReach / trainedTokens,
      gradNorm: u.gradNorm,
      updates: u.updates,
      nonFiniteSkips: u.nonFiniteSkips,
      trainedTokens,
      rolloutTokensPerSec: (summary.meanTokens * n) / Math.max(1e-3, rolloutSec),
      wallSec: (Date.now() - t0) / 1000,
    },
  };
}
