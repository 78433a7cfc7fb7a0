/**
 * One GRPO training step: sample B prompts, run G episodes of each through the batched
 * rollout engine, score them, compute advantages (group baseline, clone credit, gating),
 * and update the shared weights on every root and clone path at once.
 */
import type * as tf from '@tensorflow/tfjs';
import type { GPTParams } from '../model/params';
import type { Policy } from '../policy';
import type { Violation } from '../protocol/violations';
import { summarize } from '../eval/evaluate';
import { Rng } from '../rng';
import { type RolloutConfig, validateRolloutConfig } from '../rollout/config';
import { PolicyDecoder } from '../rollout/policyDecoder';
import { type ContextDecoder, RolloutScheduler } from '../rollout/scheduler';
import type { EpisodeTrace } from '../rollout/trace';
import type { Task, Verdict } from '../tasks/types';
import { ADVANTAGE_DEFAULTS, type AdvantageConfig, computeAdvantages } from './advantage';
import { type PolicyLossConfig, POLICY_LOSS_DEFAULTS, type RlSequence, aggregationWeights, packRl, policyGradients, referenceLogprobs } from './grpo';
import type { AdamW } from './optim';
import { REWARD_DEFAULTS, type RewardBreakdown, type RewardConfig, episodeReward, validateRewardConfig } from './reward';

export interface GrpoConfig {
  task: string;
  taskOptions: Record<string, unknown>;
  steps: number;
  /** Episodes per prompt (G). */
  group: number;
  /** Prompts per step (B). */
  batch: number;
  lr: number;
  weightDecay: number;
  gradClip: number;
  innerEpochs: number;
  microTokens: number;
  seed: number;
  loss: PolicyLossConfig;
  advantage: AdvantageConfig;
  reward: RewardConfig;
  rollout: RolloutConfig;
}

export const GRPO_DEFAULTS: Omit<GrpoConfig, 'task' | 'steps' | 'seed'> = {
  taskOptions: {},
  group: 4,
  batch: 8,
  lr: 1e-4,
  weightDecay: 0,
  gradClip: 1,
  innerEpochs: 1,
  microTokens: 4096,
  loss: POLICY_LOSS_DEFAULTS,
  advantage: ADVANTAGE_DEFAULTS,
  reward: REWARD_DEFAULTS,
  rollout: { ...validateRolloutConfig({}), temperature: 1 },
};

export function validateGrpoConfig(c: GrpoConfig): GrpoConfig {
  const check = (field: string, ok: boolean, range: string, v: unknown) => {
    if (!ok) throw new Error(`train: ${field} must be ${range} (got ${JSON.stringify(v)})`);
  };
  const int = (v: number, lo: number, hi: number) => Number.isInteger(v) && v >= lo && v <= hi;
  check('steps', int(c.steps, 1, 1e7), 'an integer ≥ 1', c.steps);
  check('group', int(c.group, 2, 64), 'an integer in [2, 64]', c.group);
  check('batch', int(c.batch, 1, 1024), 'an integer in [1, 1024]', c.batch);
  check('lr', c.lr > 0 && c.lr < 1, 'in (0, 1)', c.lr);
  check('innerEpochs', int(c.innerEpochs, 1, 16), 'an integer in [1, 16]', c.innerEpochs);
  check('gradClip', c.gradClip >= 0, '≥ 0', c.gradClip);
  check('beta', c.loss.beta >= 0 && Number.isFinite(c.loss.beta), 'a finite number ≥ 0', c.loss.beta);
  check('clipLow', c.loss.clipLow > 0 && c.loss.clipLow < 1, 'in (0, 1)', c.loss.clipLow);
  check('clipHigh', c.loss.clipHigh > 0 && c.loss.clipHigh < 10, 'in (0, 10)', c.loss.clipHigh);
  check('credit', c.advantage.credit === 'ratio' || c.advantage.credit === 'broadcast', 'ratio or broadcast', c.advantage.credit);
  check('aggregation', c.loss.aggregation === 'token-mean' || c.loss.aggregation === 'sequence-mean', 'token-mean or sequence-mean', c.loss.aggregation);
  check('seed', Number.isInteger(c.seed), 'an integer', c.seed);
  validateRewardConfig(c.reward);
  validateRolloutConfig(c.rollout);
  if (c.rollout.greedy) throw new Error('train: rollouts must sample (greedy gives every group zero variance)');
  check('loss.temperature', c.loss.temperature === c.rollout.temperature, 'equal to the rollout temperature', c.loss.temperature);
  return c;
}

/** Scores an episode; the default is the SELFCEST reward. Swappable for toy objectives. */
export type RewardFn = (trace: EpisodeTrace, verdict: Verdict) => RewardBreakdown;

export interface StepMetrics {
  step: number;
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
  zeroVarianceFraction: number;
  loss: number;
  kl: number;
  clipFraction: number;
  gradNorm: number;
  /** Updates skipped for a non-finite loss or gradient in this step. */
  nonFiniteSkips: number;
  trainedTokens: number;
  rolloutTokensPerSec: number;
  wallSec: number;
}

export interface TrainerDeps {
  policy: Policy;
  /** Frozen reference weights for the KL term (null when β = 0). */
  reference: GPTParams | null;
  optimizer: AdamW;
  task: Task<never>;
  encode: (t: string) => number[];
  rewardFn?: RewardFn;
  /**
   * Where rollouts run, already holding the policy's current weights (e.g. a pool of rollout
   * workers). Default: a decoder over `policy` in this thread, made and freed by the step.
   */
  decoder?: ContextDecoder;
}

export async function grpoStep(deps: TrainerDeps, cfg: GrpoConfig, step: number, policyVersion = step): Promise<{ metrics: StepMetrics; traces: EpisodeTrace[] }> {
  const t0 = Date.now();
  const { policy, task, encode } = deps;
  const rng = Rng.stream(cfg.seed, 'grpo-step', step);
  const opts = task.validateOptions(cfg.taskOptions as never);
  const local = deps.decoder === undefined ? new PolicyDecoder(policy, cfg.batch * cfg.group * 2) : null;
  const decoder = deps.decoder ?? (local as PolicyDecoder);
  const scheduler = new RolloutScheduler(decoder, cfg.rollout, { policyVersion, encode });
  const groups: number[][] = [];
  for (let b = 0; b < cfg.batch; b++) {
    const problem = task.generate(rng, opts, `train-${step}-${b}`);
    const members: number[] = [];
    for (let g = 0; g < cfg.group; g++) members.push(scheduler.addEpisode(task, problem, rng.fork()));
    groups.push(members);
  }
  let traces: EpisodeTrace[];
  try {
    traces = await scheduler.run();
  } finally {
    local?.dispose();
  }
  const rolloutSec = (Date.now() - t0) / 1000;

  const rewardFn: RewardFn = deps.rewardFn ?? ((trace, verdict) => episodeReward(trace, verdict, cfg.reward));
  const rewards = traces.map((t) => {
    const r = rewardFn(t, task.verify(problemOf(t), t.answer));
    t.reward = r;
    return r.reward;
  });
  const { credits, stats } = computeAdvantages(traces, rewards, groups, cfg.advantage);
  const seqs: RlSequence[] = [];
  traces.forEach((t, i) =>
    t.contexts.forEach((ctx, j) => {
      ctx.credit = credits[i][j];
      const actions: number[] = [];
      const old: number[] = [];
      let k = 0;
      for (let p = 1; p < ctx.tokens.length; p++) {
        const isAction = ctx.writers[p] === 'g';
        actions.push(isAction ? 1 : 0);
        old.push(isAction ? ctx.logprobs[k++] : 0);
      }
      seqs.push({ tokens: ctx.tokens, actions, oldLogprobs: old, advantage: credits[i][j].advantage, weight: credits[i][j].weight });
    }),
  );

  let loss = 0;
  let kl = 0;
  let clipFraction = 0;
  let gradNorm = 0;
  let nonFiniteSkips = 0;
  let trainedTokens = 0;
  const weights = aggregationWeights(seqs, cfg.loss.aggregation);
  const batches = packRl(seqs, weights, cfg.microTokens);
  if (batches.length > 0) {
    const refs = referenceLogprobs(deps.reference, policy.config, batches, cfg.loss);
    for (let epoch = 0; epoch < cfg.innerEpochs; epoch++) {
      const r = await policyGradients(policy.params, policy.config, batches, refs, cfg.loss);
      if (epoch === 0) {
        loss = r.loss;
        kl = r.kl;
        clipFraction = r.clipFraction;
        trainedTokens = r.trainedTokens;
      }
      if (!Number.isFinite(r.loss)) {
        nonFiniteSkips++;
      } else {
        const s = await deps.optimizer.apply(r.grads, cfg.lr);
        if (!s.applied) nonFiniteSkips++;
        if (epoch === 0) gradNorm = s.gradNorm;
      }
      r.grads.forEach((g: tf.Tensor) => g.dispose());
    }
    refs.forEach((t) => t?.dispose());
  }

  const n = traces.length;
  const summary = summarize(traces);
  return {
    traces,
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
      zeroVarianceFraction: stats.groups === 0 ? 0 : stats.zeroVarianceGroups / stats.groups,
      loss,
      kl,
      clipFraction,
      gradNorm,
      nonFiniteSkips,
      trainedTokens,
      rolloutTokensPerSec: (summary.meanTokens * n) / Math.max(1e-3, rolloutSec),
      wallSec: (Date.now() - t0) / 1000,
    },
  };
}

/** The verifier needs the problem; a trace carries what it needs of it. */
function problemOf(t: EpisodeTrace) {
  return { task: t.task, id: t.problemId, prompt: t.prompt, truth: t.truth, meta: {} };
}
