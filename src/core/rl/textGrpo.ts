/**
 * GRPO for a real language model under the reference's text protocol (rollout/textEpisode.ts),
 * training LoRA adapters with the base weights frozen, or every weight (full fine-tuning). It is
 * the toy model's method with text episodes in place of token episodes, through the same
 * definitions:
 *
 *   reward       episodeReward (reward.ts) of the episode's tokens, rounds and clone budgets
 *   credit       computeAdvantages (advantage.ts): group baseline, clone credit, gating
 *   sequences    one per context, the model's own tokens ('g') trained, prompts and tool
 *                responses ('p', 'i') masked out
 *   loss         surrogateLoss (ppoLoss.ts): clip, dual clip, KL to the base model, aggregation
 *   update       AdamW over the trained weights, `innerEpochs` passes of `miniBatch`-prompt updates
 *
 * The behaviour log-probs are those of the policy before the step's first update (a forward over
 * each sequence, as verl recomputes them); the KL reference is the starting model: with LoRA the
 * base model (the adapters off), as with LoRA in verl, else a frozen copy of the first weights.
 */
import * as tf from '@tensorflow/tfjs';
import { type DecoderConfig, type DecoderParams, decoderTargetScores, samplingChooser } from '../model/decoder';
import type { AdamW } from '../optim/adamw';
import { emptyViolationCounts } from '../protocol/violations';
import { Rng } from '../rng';
import { drawProblem } from '../eval/splits';
import { type TextEpisode, runTextEpisodeGroup } from '../rollout/textEpisode';
import { type TextModel, type TextPolicy, addPolicyGrads } from '../policyModel';
import type { TextLimits } from '../rollout/textLimits';
import { textTokenCounts } from '../rollout/textTrace';
import type { ContextCredit, RewardBreakdown } from '../rollout/trace';
import type { Problem, Task } from '../tasks/types';
import type { TaskName } from '../tasks';
import { textPrompts } from '../protocol/prompts';
import { computeAdvantages } from './advantage';
import { type GrpoConfig, lrAt, rewardAt } from './grpoStep';
import {
  DIAGNOSTICS,
  NO_TOKENS,
  type PackedBatch,
  type RlSequence,
  type TokenSums,
  addSums,
  aggregationWeights,
  packRl,
  surrogateLoss,
  tokenMeans,
} from './ppoLoss';
import { episodeReward } from './reward';

export interface TextGrpoConfig {
  /** The run's GRPO settings (runConfigTargets.grpoConfigOf): group, batch, lr, loss, credit, reward. */
  grpo: GrpoConfig;
  /** The text protocol's limits (the run's root limit, clones and rounds, and each clone's budget). */
  limits: TextLimits;
}

/** One scored episode of a step. */
export interface ScoredTextEpisode {
  problem: Problem;
  episode: TextEpisode;
  correct: boolean;
  reward: RewardBreakdown;
  credits: ContextCredit[];
}

export interface TextStepMetrics {
  step: number;
  meanReward: number;
  accuracy: number;
  meanRootTokens: number;
  meanCloneTokens: number;
  meanTotalTokens: number;
  clonesPerEpisode: number;
  delegationRate: number;
  toolCallsRepaired: number;
  violations: Record<string, number>;
  gateRate: number;
  zeroVarianceFraction: number;
  loss: number;
  kl: number;
  clipFraction: number;
  approxKl: number;
  entropy: number;
  /** Mean global gradient norm of the applied updates (before clipping). */
  gradNorm: number;
  /** Optimizer updates applied. */
  updates: number;
  /** Updates skipped for a non-finite loss or gradient. */
  nonFiniteSkips: number;
  trainedTokens: number;
  wallSec: number;
}

/**
 * What one step did to its first prompt's group (the slow-motion view): each episode's reward and
 * each context's credit, and for every token the model wrote its log-probability before the
 * step's updates (the behaviour policy's) and after them.
 */
export interface TextStepAnatomy {
  prompt: string;
  truth: string;
  episodes: {
    correct: boolean;
    answer: string | null;
    reward: RewardBreakdown;
    contexts: {
      role: 'root' | 'clone';
      objective: string | null;
      credit: ContextCredit;
      violation: string | null;
      /** The context's tokens from its first one the model wrote: each token's text, writer and (the model's) log-probs. */
      tokens: { piece: string; writer: string; before: number | null; after: number | null }[];
    }[];
  }[];
}

/** A context as one sequence of the update: positions predicting the model's own tokens train. */
export function textSequence(ctx: TextEpisode['contexts'][number], credit: ContextCredit): RlSequence {
  // Up to the model's last token: what follows (a tool response that ended the episode) trains nothing
  // and may not even fit the model's window.
  const end = ctx.writers.lastIndexOf('g') + 1;
  const tokens = ctx.tokens.slice(0, Math.max(end, 1));
  const actions: number[] = [];
  for (let p = 1; p < tokens.length; p++) actions.push(ctx.writers[p] === 'g' ? 1 : 0);
  return { tokens, actions, oldLogprobs: actions.map(() => 0), advantage: credit.advantage, weight: credit.weight };
}

/** The target scores of a model's weights (with `adapters`, if any) at the loss's temperature. */
function scoresOf(params: DecoderParams, config: DecoderConfig, temperature: number, adapters?: TextModel['adapters']) {
  return (inputs: tf.Tensor2D, targets: tf.Tensor2D) => decoderTargetScores(params, config, inputs, targets, temperature, adapters);
}

/**
 * Per-position log-probs of the sequences' own tokens (0 elsewhere), without gradients, for the
 * sequences `include` names (by default those that train; the rest read 0).
 */
async function sequenceLogprobs(
  seqs: readonly RlSequence[],
  score: ReturnType<typeof scoresOf>,
  include: (s: RlSequence, k: number) => boolean = (s) => s.weight > 0,
): Promise<number[][]> {
  const out: number[][] = [];
  for (const [k, s] of seqs.entries()) {
    const n = s.tokens.length - 1;
    if (!include(s, k) || n <= 0) {
      out.push(s.actions.map(() => 0));
      continue;
    }
    const lp = tf.tidy(() => score(tf.tensor2d([s.tokens.slice(0, -1)], [1, n], 'int32'), tf.tensor2d([s.tokens.slice(1)], [1, n], 'int32')).logp);
    const v = await lp.data();
    lp.dispose();
    out.push(s.actions.map((a, i) => (a ? v[i] : 0)));
  }
  return out;
}

/** The training problems of step `step` (0-based): B problems of the training split (none held out), each from its own stream of the run's seed. */
export function textStepProblems<O>(task: Task<O>, opts: O, seed: number, step: number, batch: number): Problem[] {
  return Array.from({ length: batch }, (_, i) => drawProblem(task, Rng.stream(seed, 'text-grpo-prompt', step, i), opts, `train-${step}-${i}`, 'train'));
}

/**
 * One GRPO step (0-based `step`): G sampled episodes of each of the step's problems, their rewards
 * and credit, and the updates of the adapters.
 */
export async function textGrpoStep<O>(
  policy: TextPolicy,
  optimizer: AdamW,
  task: Task<O>,
  opts: O,
  cfg: TextGrpoConfig,
  step: number,
  /** Episodes rolled out of the step's B × G, as they finish. */
  onEpisode?: (done: number, total: number) => void,
): Promise<{ metrics: TextStepMetrics; episodes: ScoredTextEpisode[]; anatomy: TextStepAnatomy }> {
  const started = Date.now();
  const { model } = policy;
  const { grpo } = cfg;
  const temperature = grpo.loss.temperature;
  const vocab = model.config.vocabSize;
  const problems = textStepProblems(task, opts, grpo.seed, step, grpo.batch);
  const episodes: { problem: Problem; episode: TextEpisode; correct: boolean; verdict: { value: number | null; truthValue: number | null } }[] = [];
  for (const [i, problem] of problems.entries()) {
    // The group's G episodes, each sampling from its own stream; their first root turns decoded as one batch.
    const options = Array.from({ length: grpo.group }, (_, g) => {
      const rng = Rng.stream(grpo.seed, 'text-grpo-episode', step, i, g);
      return { context: problem.context ?? {}, choose: samplingChooser(vocab, temperature, rng) };
    });
    for (const episode of await runTextEpisodeGroup(model, textPrompts(model.tokenizer.prompts).root(task.name as TaskName, problem), cfg.limits, options)) {
      const verdict = task.verify(problem, episode.answer);
      episodes.push({ problem, episode, correct: verdict.correct, verdict });
    }
    onEpisode?.(episodes.length, problems.length * grpo.group);
  }
  const reward = rewardAt(grpo, step);
  const counts = episodes.map((e) => textTokenCounts(e.episode.contexts, e.episode.rounds));
  const rewards = episodes.map((e, i) =>
    episodeReward({ correct: e.correct, rounds: e.episode.rounds, tokens: counts[i], contexts: e.episode.contexts }, e.verdict, reward),
  );
  const groups = problems.map((_, i) => Array.from({ length: grpo.group }, (_, g) => i * grpo.group + g));
  const { credits, stats } = computeAdvantages(
    episodes.map((e) => ({ contexts: e.episode.contexts })),
    rewards.map((r) => r.reward),
    groups,
    grpo.advantage,
  );

  // Sequences, by prompt, with the behaviour and (β > 0) reference log-probs.
  const byPrompt = groups.map((g) => g.flatMap((i) => episodes[i].episode.contexts.map((ctx, j) => textSequence(ctx, credits[i][j]))));
  const all = byPrompt.flat();
  // Also the first group's when it trains nothing: the slow-motion view shows them (`all` starts with that group).
  const firstGroup = byPrompt[0] ?? [];
  const old = await sequenceLogprobs(all, scoresOf(model.params, model.config, temperature, model.adapters), (s, k) => s.weight > 0 || k < firstGroup.length);
  all.forEach((s, k) => (s.oldLogprobs = old[k]));
  const before = old.slice(0, firstGroup.length);
  if (grpo.loss.beta > 0) {
    const ref = await sequenceLogprobs(all, scoresOf(policy.reference, model.config, temperature));
    all.forEach((s, k) => (s.refLogprobs = ref[k]));
  }

  // innerEpochs passes; each over mini-batches of miniBatch prompts (one update each), reshuffled per pass.
  const perUpdate = grpo.miniBatch ?? grpo.batch;
  const vars = [...policy.trainable.values()];
  const score = scoresOf(model.params, model.config, temperature, model.adapters);
  let sums: TokenSums = { ...NO_TOKENS };
  let lossSum = 0;
  let gradNormSum = 0;
  let attempts = 0;
  let updates = 0;
  const order = problems.map((_, i) => i);
  for (let epoch = 0; epoch < grpo.innerEpochs; epoch++) {
    Rng.stream(grpo.seed, 'text-grpo-shuffle', step, epoch).shuffle(order);
    for (let start = 0; start < order.length; start += perUpdate) {
      const seqs = order.slice(start, start + perUpdate).flatMap((i) => byPrompt[i]);
      const weights = aggregationWeights(seqs, grpo.loss.aggregation);
      const batches: PackedBatch[] = packRl(seqs, weights, grpo.microTokens);
      if (batches.length === 0) continue;
      const grads = new Map<string, tf.Tensor>();
      let updateLoss = 0;
      for (const b of batches) {
        const diag: tf.Scalar[] = [];
        const g = tf.variableGrads(() => {
          const r = surrogateLoss(score, b, grpo.loss);
          r.diagnostics.forEach((t) => diag.push(tf.keep(t)));
          return r.loss;
        }, vars);
        updateLoss += (await g.value.data())[0];
        const d = await Promise.all(diag.map((t) => t.data()));
        const part: TokenSums = { ...NO_TOKENS, tokens: b.weights.reduce((n, w) => n + (w > 0 ? 1 : 0), 0) };
        DIAGNOSTICS.forEach((k, j) => (part[k] = d[j][0]));
        sums = addSums(sums, part);
        g.value.dispose();
        diag.forEach((t) => t.dispose());
        addPolicyGrads(grads, policy, g.grads);
      }
      const applied = await optimizer.apply(grads, lrAt(grpo, step));
      grads.forEach((t) => t.dispose());
      attempts++;
      lossSum += updateLoss;
      // A non-finite gradient skips the update (AdamW.apply): counted, and kept out of the norm's mean.
      if (applied.applied) {
        updates++;
        gradNormSum += applied.gradNorm;
      }
    }
  }

  // The first group's tokens after the updates.
  const after = await sequenceLogprobs(firstGroup, scoresOf(model.params, model.config, temperature, model.adapters), () => true);
  let k = 0;
  const anatomy: TextStepAnatomy = {
    prompt: problems[0]?.prompt ?? '',
    truth: problems[0]?.truth ?? '',
    episodes: (groups[0] ?? []).map((i) => ({
      correct: episodes[i].correct,
      answer: episodes[i].episode.answer,
      reward: rewards[i],
      contexts: episodes[i].episode.contexts.map((ctx, j) => {
        const q = firstGroup[k];
        const a = after[k];
        const b = before[k++];
        const start = Math.max(0, ctx.writers.indexOf('g'));
        // Pieces of the whole sequence (each decoded after the token before it), from the first generated one.
        const pieces = model.tokenizer.pieces(q.tokens).slice(start);
        const tokens = pieces.map((piece, o) => {
          const pos = start + o;
          // Position pos is predicted by row pos − 1 of the sequence's log-probs.
          const own = pos > 0 && q.actions[pos - 1] === 1;
          return { piece, writer: ctx.writers[pos], before: own ? b[pos - 1] : null, after: own ? a[pos - 1] : null };
        });
        return { role: ctx.role, objective: ctx.objective, credit: credits[i][j], violation: ctx.violation, tokens };
      }),
    })),
  };

  const n = episodes.length;
  const mean = (f: (e: (typeof episodes)[number], i: number) => number) => episodes.reduce((s, e, i) => s + f(e, i), 0) / n;
  const violations: Record<string, number> = emptyViolationCounts();
  for (const e of episodes) for (const v of e.episode.violations) violations[v.violation]++;
  const means = tokenMeans(sums);
  const scored = episodes.map((e, i): ScoredTextEpisode => ({
    problem: e.problem,
    episode: e.episode,
    correct: e.correct,
    reward: rewards[i],
    credits: credits[i],
  }));
  return {
    metrics: {
      step: step + 1,
      meanReward: mean((_, i) => rewards[i].reward),
      accuracy: mean((e) => (e.correct ? 1 : 0)),
      meanRootTokens: mean((_, i) => counts[i].root),
      meanCloneTokens: mean((_, i) => counts[i].clonesTotal),
      meanTotalTokens: mean((_, i) => counts[i].total),
      clonesPerEpisode: mean((e) => e.episode.contexts.length - 1),
      delegationRate: mean((e) => (e.episode.rounds > 0 ? 1 : 0)),
      toolCallsRepaired: episodes.reduce((s, e) => s + e.episode.repairedToolCalls, 0),
      violations,
      gateRate: stats.contexts > 0 ? stats.gatedContexts / stats.contexts : 0,
      zeroVarianceFraction: stats.groups > 0 ? stats.zeroVarianceGroups / stats.groups : 0,
      loss: attempts > 0 ? lossSum / attempts : 0,
      kl: means.kl,
      clipFraction: means.clipFraction,
      approxKl: means.approxKl,
      entropy: means.entropy,
      gradNorm: updates > 0 ? gradNormSum / updates : 0,
      updates,
      nonFiniteSkips: attempts - updates,
      trainedTokens: all.reduce((s, q) => s + (q.weight > 0 ? q.actions.reduce((a, b) => a + b, 0) : 0), 0),
      wallSec: (Date.now() - started) / 1000,
    },
    episodes: scored,
    anatomy,
  };
}
