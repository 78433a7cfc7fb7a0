/**
 * Warm start: supervised training on the teacher's demonstrations (monolithic chains
 * of thought and delegations, root and clone contexts), loss only on the tokens the
 * model itself would generate.
 *
 * Each step draws its demonstrations from an Rng seeded by (seed, step), so a resumed
 * run sees exactly the data an uninterrupted one would.
 */
import * as tf from '@tensorflow/tfjs';
import { type GradItem, type GradItemAway, GradFold, accumulateGrads, releaseGradItem } from '../parallel/grads';
import type { ModelConfig } from '../model/config';
import { maskedTokenLoss } from '../model/gpt';
import type { GPTParams } from '../model/params';
import type { Scorer } from '../policyModel';
import { type ProtocolLimits, rootLimitText } from '../protocol/grammar';
import { drawProblem } from '../eval/splits';
import { Rng } from '../rng';
import type { AnyTaskOptions, DemoContext, Demonstration, Task, TaskEntry, TeacherStyle } from '../tasks';
import { BUDGET_BUCKETS } from '../tokenizer/vocab';
import { AdamW, cosineLr } from '../optim/adamw';
import { type Claims, type Patience, computeQueue } from '../parallel/shares';
import { type PaddedBatch, type TrainSequence, demoSequence, groupPlan, padBatch } from '../parallel/sequences';

export interface SftConfig {
  task: string;
  taskOptions: Record<string, unknown>;
  steps: number;
  /** Tokens (prompt + generated) drawn per step. */
  batchTokens: number;
  /** Largest padded batch (rows × length) run through the model at once. */
  microTokens: number;
  lr: number;
  warmup: number;
  minLrFrac: number;
  weightDecay: number;
  gradClip: number;
  /** Share of problems demonstrated as a delegation (the rest monolithic). */
  delegateFraction: number;
  /** The spawn limits the teacher's delegations keep to (budgets, clones per round, rounds). */
  limits: ProtocolLimits;
  /** Which teacher writes the delegations: `expert` (a strategy) or `naive` (none; TeacherStyle). */
  teacher: TeacherStyle;
  /**
   * A root that knows its limit (RolloutConfig.rootLimitMin): each demonstration's limit is drawn
   * from [min, max], written in its root prompt, and kept to (rootLimitDemo). Absent: no limit.
   */
  rootLimits?: { min: number; max: number };
  /**
   * Share of clone demonstrations that break the protocol (sloppyClone): the clone forgets its
   * answer block and rambles past every budget. A warm start whose clones break the protocol
   * often, the setting where rollout gating matters. Absent or 0: none.
   */
  sloppyClones?: number;
  /** Label smoothing ε of the cross-entropy (maskedTokenLoss); absent or 0: none. */
  labelSmoothing?: number;
  seed: number;
}

/** The warm start's values that are not run settings: the cosine schedule's floor, AdamW's decay and the gradient clip. */
export const SFT_FIXED: Pick<SftConfig, 'minLrFrac' | 'weightDecay' | 'gradClip'> = { minLrFrac: 0.1, weightDecay: 0.01, gradClip: 1 };

/** The demonstrations of one step, as training sequences. */
export function sftSequences<O>(
  task: Task<O>,
  opts: O,
  cfg: SftConfig,
  step: number,
  encode: (t: string) => number[],
  maxPositions = Infinity,
): TrainSequence[] {
  return sftMixSequences([{ task, opts }], cfg, step, encode, maxPositions);
}

/** A task and its options in a warm-start mix. */
export interface TaskMixEntry<O = AnyTaskOptions> extends TaskEntry<O> {
  /** Relative share of the mix's problems (default 1). */
  weight?: number;
}

/** Index of the mix entry for the next problem: uniform when the weights are equal. */
export function pickMixEntry<O>(mix: readonly TaskMixEntry<O>[], rng: Rng): number {
  const w = mix.map((m) => m.weight ?? 1);
  // Equal weights draw exactly as an unweighted mix did, so older runs resume on the same data.
  if (w.every((x) => x === w[0])) return rng.int(0, mix.length - 1);
  let u = rng.next() * w.reduce((a, b) => a + b, 0);
  for (let i = 0; i < w.length - 1; i++) if ((u -= w[i]) < 0) return i;
  return w.length - 1;
}

/**
 * The demonstrations of one step drawn from several tasks, each problem's task at random by
 * the mix's weights. A one-task mix draws nothing for the choice, so its data equal the
 * plain task's.
 */
/**
 * A demonstration with a context longer than `maxPositions` (the model's window) is left out
 * whole and the next problem drawn: the monolithic demonstration of a context that does not
 * fit one window (multihop's long-context setting) cannot be trained, and is what delegation is
 * there to avoid. Data of settings where everything fits are unchanged.
 */
export function sftMixSequences<O>(
  mix: readonly TaskMixEntry<O>[],
  cfg: SftConfig,
  step: number,
  encode: (t: string) => number[],
  maxPositions = Infinity,
  /** A demonstration's sequences in the model's protocol (default the token protocol's); null: it is left out, as one too long. */
  sequencesOf: (demo: Demonstration) => TrainSequence[] | null = (demo) => demo.contexts.map((ctx) => demoSequence(ctx, encode)),
  /** The tokens a demonstration's root writes in the model's protocol, what a drawn root limit counts (default the token protocol's). */
  rootTokensOf: (demo: Demonstration) => number = (demo) => rootGeneratedTokens(demo, encode),
): TrainSequence[] {
  if (mix.length === 0) throw new Error('sft: the task mix is empty');
  for (const m of mix) {
    const w = m.weight ?? 1;
    if (!(Number.isFinite(w) && w > 0)) throw new Error(`sft: the weight of ${m.task.name} in the mix must be a positive number (got ${w})`);
  }
  const rng = Rng.stream(cfg.seed, 'sft-data', step);
  const seqs: TrainSequence[] = [];
  let tokens = 0;
  let n = 0;
  let tooLong = 0;
  while (tokens < cfg.batchTokens) {
    const { task, opts } = mix.length === 1 ? mix[0] : mix[pickMixEntry(mix, rng)];
    const problem = drawProblem(task, rng, opts, `sft-${step}-${n++}`, 'train');
    let demo: Demonstration | null =
      (rng.bool(cfg.delegateFraction) && task.teacherDelegate(problem, rng, cfg.limits, cfg.teacher)) || task.teacherMono(problem, rng);
    if (cfg.rootLimits) {
      // Its own stream: runs without a limit draw the same data as before.
      const limitRng = Rng.stream(cfg.seed, 'sft-root-limit', step, n);
      demo = rootLimitDemo(
        demo,
        limitRng.int(cfg.rootLimits.min, cfg.rootLimits.max),
        () => task.teacherDelegate(problem, limitRng, cfg.limits, cfg.teacher),
        () => task.teacherMono(problem, limitRng),
        rootTokensOf,
      );
      if (demo === null) continue;
    }
    if (cfg.sloppyClones) {
      // Its own stream: runs without it draw the same data as before.
      const sloppyRng = Rng.stream(cfg.seed, 'sft-sloppy-clones', step, n);
      const p = cfg.sloppyClones;
      demo = { ...demo, contexts: demo.contexts.map((c) => (c.role === 'clone' && sloppyRng.bool(p) ? sloppyClone(c, encode) : c)) };
    }
    const demoSeqs = sequencesOf(demo);
    if (demoSeqs === null || demoSeqs.some((q) => q.tokens.length > maxPositions)) {
      if (++tooLong > 1000 && seqs.length === 0) {
        throw new Error(
          `sft: no demonstration of ${mix.map((m) => m.task.name).join(', ')} fits the model's ${maxPositions} positions and the episode's lengths (1000 drawn); use fewer chunks or assignments, or more delegation demos`,
        );
      }
      continue;
    }
    for (const q of demoSeqs) {
      seqs.push(q);
      tokens += q.tokens.length;
    }
  }
  return seqs;
}

/** The generated tokens a sloppy clone writes: past the largest budget bucket, so any budget cuts it. */
export const SLOPPY_CLONE_TOKENS = Math.max(...BUDGET_BUCKETS) + 8;

/**
 * A clone demonstration that breaks the protocol: its last generated segment loses the answer
 * block (`<ans>…<eos>`) and instead repeats its last `=value` step until it has written
 * SLOPPY_CLONE_TOKENS tokens, without an end. A clone taught this runs out its budget with no
 * answer: clone_over_budget, which both gate modes catch.
 */
export function sloppyClone(ctx: DemoContext, encode: (t: string) => number[]): DemoContext {
  const last = ctx.segments.length - 1;
  const seg = ctx.segments[last];
  if (seg?.kind !== 'generated') return ctx;
  const cut = seg.text.indexOf('<ans>');
  const chain = cut < 0 ? seg.text : seg.text.slice(0, cut);
  const step = chain.match(/=[^=]*$/)?.[0] ?? '=';
  let text = chain;
  const before = ctx.segments
    .slice(0, last)
    .filter((s) => s.kind === 'generated')
    .reduce((k, s) => k + encode(s.text).length, 0);
  while (before + encode(text).length < SLOPPY_CLONE_TOKENS) text += step;
  return { ...ctx, segments: [...ctx.segments.slice(0, last), { text, kind: 'generated' }] };
}

/** Tokens the root of a demonstration generates (its generated segments). */
export function rootGeneratedTokens(demo: Demonstration, encode: (t: string) => number[]): number {
  const root = demo.contexts.find((c) => c.role === 'root');
  return (root?.segments ?? []).filter((s) => s.kind === 'generated').reduce((n, s) => n + encode(s.text).length, 0);
}

/**
 * A demonstration for a root told its limit `limit`: the one drawn if its root keeps to the limit,
 * else a delegation (up to 8 draws), else the monolithic chain, whichever keeps to it first; its
 * root prompt then states the limit (`<root>#48 …`). Null when none keeps to it (the problem is
 * not demonstrated at this limit). The choice between chain and delegation stays at random where
 * both fit: when to delegate is left to RL.
 */
export function rootLimitDemo(
  drawn: Demonstration,
  limit: number,
  delegate: () => Demonstration | null,
  mono: () => Demonstration,
  /** The tokens a demonstration's root writes, in the model's protocol. */
  rootTokensOf: (d: Demonstration) => number,
): Demonstration | null {
  const fits = (d: Demonstration | null): d is Demonstration => d !== null && rootTokensOf(d) <= limit;
  let demo: Demonstration | null = fits(drawn) ? drawn : null;
  for (let i = 0; demo === null && i < 8; i++) {
    const d = delegate();
    if (d === null) break;
    if (fits(d)) demo = d;
  }
  if (demo === null) {
    const m = mono();
    if (fits(m)) demo = m;
  }
  if (demo === null) return null;
  return {
    ...demo,
    contexts: demo.contexts.map((c) =>
      c.role !== 'root'
        ? c
        : {
            ...c,
            segments: c.segments.map((s, i) =>
              i === 0 && s.kind === 'prompt' && s.text.startsWith('<root>')
                ? { ...s, text: `<root>${rootLimitText(limit)}${s.text.slice('<root>'.length)}` }
                : s,
            ),
          },
    ),
  };
}

/** One micro-batch's gradients, weighted by its share of the step's trained tokens; its scalar is its part of the loss. */
export function sftItem(params: GPTParams, config: ModelConfig, b: PaddedBatch, totalWeight: number, labelSmoothing = 0): GradItem {
  const w = b.weights.reduce((a, x) => a + x, 0);
  const grads = new Map<string, tf.Tensor>();
  if (w === 0) return { grads, scalars: tf.zeros([1]) };
  const vars = [...params.values()];
  const { value, grads: byVariable } = tf.tidy(() => {
    const inputs = tf.tensor2d(b.inputs, [b.rows, b.length], 'int32');
    const targets = tf.tensor2d(b.targets, [b.rows, b.length], 'int32');
    const weights = tf.tensor2d(b.weights, [b.rows, b.length], 'float32');
    // Weighted so that the sum over micro-batches is the token mean over the step.
    return tf.variableGrads(
      () => tf.mul(maskedTokenLoss(params, config, { tokens: inputs, targets, weights }, labelSmoothing), w / totalWeight) as tf.Scalar,
      vars,
    );
  });
  accumulateGrads(grads, params, byVariable);
  const scalars = tf.reshape(value, [1]) as tf.Tensor1D;
  value.dispose();
  return { grads, scalars };
}

/**
 * Computes micro-batches of a step elsewhere (a worker thread): those it claims (shares.ts
 * `claimer`) of `batches`, each item's gradients apart; null: the worker is gone, do them here.
 */
export type RemoteGradients = (
  batches: PaddedBatch[],
  totalWeight: number,
  labelSmoothing: number,
  claims: Claims,
  signal?: AbortSignal,
) => Promise<ReadonlyMap<number, GradItemAway> | null>;

/** One logged warm-start step: the row of metrics.jsonl (CLI) and of the page's warm-start curve. */
export interface SftMetricsRow {
  step: number;
  loss: number;
  lr: number;
  gradNorm: number;
  /** The update was skipped: the loss or the gradient was not finite. */
  skipped: boolean;
  tokens: number;
  trainedTokens: number;
  elapsedSec: number;
}

export function sftMetricsRow(step: number, r: SftStepOutcome, lr: number, elapsedSec: number): SftMetricsRow {
  return {
    step,
    loss: r.loss,
    lr,
    gradNorm: r.gradNorm,
    skipped: !r.applied,
    tokens: r.tokens,
    trainedTokens: r.trainedTokens,
    elapsedSec: Math.round(elapsedSec * 10) / 10,
  };
}

export interface SftStepOutcome {
  loss: number;
  gradNorm: number;
  applied: boolean;
  trainedTokens: number;
  tokens: number;
}

/**
 * What a warm-start step needs of a model: the variables it trains, and the gradient item of one
 * padded micro-batch (its share `w / totalWeight` of the token-mean loss, and that loss as its one
 * scalar). The toy's (`toyLearner`: its hand-written backward, label smoothing) and any Scorer's
 * (`scorerLearner`: a Hugging Face decoder, LoRA or every weight).
 */
export interface SftLearner {
  readonly params: ReadonlyMap<string, tf.Variable>;
  item(b: PaddedBatch, totalWeight: number, labelSmoothing: number): GradItem;
}

export const toyLearner = (params: GPTParams, config: ModelConfig): SftLearner => ({
  params,
  item: (b, totalWeight, labelSmoothing) => sftItem(params, config, b, totalWeight, labelSmoothing),
});

/** A Scorer's warm start: the masked NLL of its target log-probs (label smoothing needs every logit: the toy's only). */
export function scorerLearner(scorer: Scorer): SftLearner {
  return {
    params: scorer.params,
    item: (b, totalWeight, labelSmoothing) => {
      if (labelSmoothing !== 0) throw new Error("sft: label smoothing reads every logit, which only the toy model's loss does");
      const grads = new Map<string, tf.Tensor>();
      if (b.weights.every((x) => x === 0)) return { grads, scalars: tf.zeros([1]) };
      const { value, grads: byVariable } = tf.tidy(() =>
        tf.variableGrads(() => {
          const shape: [number, number] = [b.rows, b.length];
          const { logp } = scorer.scores(tf.tensor2d(b.inputs, shape, 'int32'), tf.tensor2d(b.targets, shape, 'int32'), 1);
          return tf.div(tf.neg(tf.sum(tf.mul(logp, tf.tensor2d(b.weights, shape, 'float32')))), totalWeight) as tf.Scalar;
        }, [...scorer.params.values()]),
      );
      accumulateGrads(grads, scorer.params, byVariable);
      const scalars = tf.reshape(value, [1]) as tf.Tensor1D;
      value.dispose();
      return { grads, scalars };
    },
  };
}

/**
 * The summed gradients of a set of sequences' token-mean loss: cut into padded micro-batches by
 * length (`groupPlan`); with `remotes`, this thread and the remote workers take the micro-batches
 * from one queue (`computeQueue`); added in micro-batch order, so the same bits however they were
 * spread. The gradients are the caller's to dispose.
 */
export async function sftLossAndGrads(
  learner: SftLearner,
  seqs: readonly TrainSequence[],
  microTokens: number,
  remotes: readonly RemoteGradients[] = [],
  patience?: Patience,
  labelSmoothing = 0,
): Promise<{ loss: number; grads: Map<string, tf.Tensor>; trainedTokens: number }> {
  const totalWeight = seqs.reduce((n, s) => n + s.weights.reduce((a, b) => a + b, 0), 0);
  if (totalWeight === 0) throw new Error('sft: no trainable tokens in the batch');
  const plan = groupPlan(
    seqs.map((s) => s.tokens.length - 1),
    remotes.length + 1,
    microTokens,
  );
  const batches = plan.groups.map((g) => padBatch(seqs, g));
  const sum = new GradFold(learner.params, 1);
  try {
    await computeQueue(
      plan,
      remotes.map((remote) => (claims: Claims, signal: AbortSignal) => remote(batches, totalWeight, labelSmoothing, claims, signal)),
      {
        here: async (i) => learner.item(batches[i], totalWeight, labelSmoothing),
        fold: (_i, r) => sum.add(r),
        release: releaseGradItem,
      },
      { patience },
    );
    const [loss] = await sum.finish();
    return { loss, grads: sum.grads, trainedTokens: totalWeight };
  } catch (e) {
    sum.release();
    throw e;
  }
}

/**
 * One optimisation step of any model over a set of sequences (`sftLossAndGrads`, then AdamW); a
 * non-finite loss or gradient skips the update. `trainedTokens` counts the tokens that carried
 * loss, `tokens` all tokens (padding excluded).
 */
export async function sftStepOf(
  learner: SftLearner,
  optimizer: AdamW,
  seqs: readonly TrainSequence[],
  lr: number,
  microTokens: number,
  remotes: readonly RemoteGradients[] = [],
  patience?: Patience,
  labelSmoothing = 0,
): Promise<SftStepOutcome> {
  const { loss, grads, trainedTokens } = await sftLossAndGrads(learner, seqs, microTokens, remotes, patience, labelSmoothing);
  try {
    const stats = Number.isFinite(loss) ? await optimizer.apply(grads, lr) : { gradNorm: NaN, applied: false };
    return { loss, ...stats, trainedTokens, tokens: seqs.reduce((n, s) => n + s.tokens.length, 0) };
  } finally {
    grads.forEach((g) => g.dispose());
  }
}

/** The toy model's warm-start step (`sftStepOf` over `toyLearner`). */
export function sftStep(
  params: GPTParams,
  config: ModelConfig,
  optimizer: AdamW,
  seqs: readonly TrainSequence[],
  lr: number,
  microTokens: number,
  remotes: readonly RemoteGradients[] = [],
  patience?: Patience,
  labelSmoothing = 0,
): Promise<SftStepOutcome> {
  return sftStepOf(toyLearner(params, config), optimizer, seqs, lr, microTokens, remotes, patience, labelSmoothing);
}
export { cosineLr };
