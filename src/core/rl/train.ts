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
import type { Problem, Task, Verdict } from '../tasks/types';
import { ADVANTAGE_DEFAULTS, type AdvantageConfig, type ContextCredit, computeAdvantages } from './advantage';
import { type PolicyLossConfig, POLICY_LOSS_DEFAULTS, type RlSequence, aggregationWeights, packRl, policyGradients, referenceLogprobs } from './grpo';
import type { AdamW } from './optim';
import { REWARD_DEFAULTS, type RewardBreakdown, type RewardConfig, episodeReward } from './reward';

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

export interface TrainerDeps<O> {
  policy: Policy;
  /** Frozen reference weights for the KL term (null when β = 0). */
  reference: GPTParams | null;
  optimizer: AdamW;
  /** The task; its options come from `GrpoConfig.taskOptions`. */
  task: Task<O>;
  encode: (t: string) => number[];
  rewardFn?: RewardFn;
  /**
   * Where rollouts run, already holding the policy's current weights (e.g. a pool of rollout
   * workers). Default: a decoder over `policy` in this thread, made and freed by the step.
   */
  decoder?: ContextDecoder;
}

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

export async function grpoStep<O>(deps: TrainerDeps<O>, cfg: GrpoConfig, step: number, policyVersion = step): Promise<{ metrics: StepMetrics; episodes: ScoredEpisode[] }> {
  const t0 = Date.now();
  const { policy, task, encode } = deps;
  const rng = Rng.stream(cfg.seed, 'grpo-step', step);
  const opts = task.validateOptions(cfg.taskOptions);
  const local = deps.decoder === undefined ? new PolicyDecoder(policy, cfg.batch * cfg.group * 2) : null;
  const decoder = deps.decoder ?? (local as PolicyDecoder);
  const scheduler = new RolloutScheduler(decoder, cfg.rollout, { policyVersion, encode });
  const groups: number[][] = [];
  /** The problem of each episode, by the index addEpisode gave it. */
  const problems: Problem[] = [];
  for (let b = 0; b < cfg.batch; b++) {
    const problem = task.generate(rng, opts, `train-${step}-${b}`);
    const members: number[] = [];
    for (let g = 0; g < cfg.group; g++) {
      const i = scheduler.addEpisode(task, problem, rng.fork());
      problems[i] = problem;
      members.push(i);
    }
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
  const verdicts = traces.map((t, i) => task.verify(problems[i], t.answer));
  const breakdowns = traces.map((t, i) => rewardFn(t, verdicts[i]));
  const rewards = breakdowns.map((r) => r.reward);
  const { credits, stats } = computeAdvantages(traces, rewards, groups, cfg.advantage);
  const seqs: RlSequence[] = [];
  traces.forEach((t, i) =>
    t.contexts.forEach((ctx, j) => {
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
