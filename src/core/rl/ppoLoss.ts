/**
 * The policy-gradient update: vanilla PPO with an optional dual clip, as verl's
 * `compute_policy_loss`. Per trainable token, with ρ = π / π_old (π_old: the behaviour policy
 * that sampled the rollout; log ρ clamped to [−20, 20] as verl does):
 *
 *   s   = min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A)                  (PPO clip)
 *   s_c = max(s, c·A)  when A < 0 and the dual clip c (> 1) is set; else s
 *   objective = s_c − β·KL_k3,   KL_k3 = exp(log π_ref − log π) − (log π_ref − log π) − 1
 *
 * The dual clip bounds what one token with A < 0 can do: ρ·A has no floor as ρ grows, so
 * past ρ = c the term is the constant c·A and its gradient is 0 (verl: pg_losses3 = −A·c,
 * loss = min(pg_losses3, max(pg_losses1, pg_losses2)) where A < 0).
 *
 * Diagnostics, summed over the trained tokens (verl's names in brackets):
 *   clipped        the clipped term binds, A·clip(ρ) < A·ρ (pg_clipfrac)
 *   dualClipped    A < 0 and the floor binds, s < c·A (pg_clipfrac_lower)
 *   approxKl       (ρ − 1) − log ρ, the k3 estimate of KL(π_old ‖ π) (ppo_kl; verl logs the
 *                  k1 mean of −log ρ, which is noisier and can go negative)
 *   entropy        −Σ_v π(v) log π(v) of the current policy at the token's position
 *
 * Root and clone contexts of all episodes go into one update (shared weights: the
 * gradient is the sum over every path). Aggregation is folded into per-token weights over
 * the sequences of one optimizer update (a mini-batch, train.ts) — token-mean:
 * 1 / (its trained tokens); sequence-mean: 1 / (tokens of its context · its trained
 * contexts) — so micro-batches of any grouping add up to the same gradient.
 * A context with weight 0 (skipped group, or gated without its KL term) contributes exactly
 * nothing; a gated context that keeps its KL term comes with advantage 0 (advantage.ts).
 */
import * as tf from '@tensorflow/tfjs';
import { type GradItem, type GradItemAway, GradFold, accumulateGrads, releaseGradItem } from '../parallel/grads';
import { type GroupPlan, groupPlan, lengthGroups, shareGroups } from '../parallel/sequences';
import { type Claims, type Patience, type QueuePlan, computeQueue, computeShares } from '../parallel/shares';
import type { Scorer } from '../policyModel';

export interface PolicyLossConfig {
  clipLow: number;
  clipHigh: number;
  /** Dual-clip constant c (> 1) for A < 0; null: off (the reference uses 3). */
  dualClip: number | null;
  /** KL coefficient; 0 skips the reference forward. */
  beta: number;
  aggregation: 'token-mean' | 'sequence-mean';
  /** Sampling temperature of the rollouts (log-probs are taken under the same distribution). */
  temperature: number;
}

/** verl's clamp of log ρ before the exponential. */
const LOG_RATIO_LIMIT = 20;

/** One context prepared for the update. */
export interface RlSequence {
  tokens: number[];
  /** Per position i (predicting tokens[i+1]): 1 for the model's own tokens, else 0. */
  actions: number[];
  /** Behaviour log-prob per position (0 where actions[i] = 0). */
  oldLogprobs: number[];
  /** Reference log-prob per position (0 where actions[i] = 0); absent when β = 0 (`withReferenceLogprobs`). */
  refLogprobs?: number[];
  advantage: number;
  /** 0 for skipped contexts and for gated ones without their KL term (advantage.ts). */
  weight: number;
}

export interface PackedBatch {
  rows: number;
  length: number;
  inputs: Int32Array;
  targets: Int32Array;
  /** Aggregation weight per position (0 off the trained tokens). */
  weights: Float32Array;
  advantages: Float32Array;
  oldLogprobs: Float32Array;
  /** Null when the members carry no reference log-probs (no KL term). */
  refLogprobs: Float32Array | null;
  members: number[];
}

/** Per-token aggregation weights for every sequence of one update (see the file comment). */
export function aggregationWeights(seqs: readonly RlSequence[], aggregation: PolicyLossConfig['aggregation']): number[][] {
  const counts = seqs.map((s) => (s.weight > 0 ? s.actions.reduce((a, b) => a + b, 0) : 0));
  const totalTokens = counts.reduce((a, b) => a + b, 0);
  const trainedSeqs = counts.filter((n) => n > 0).length;
  return seqs.map((s, i) =>
    s.actions.map((a) => {
      if (a === 0 || s.weight === 0 || counts[i] === 0) return 0;
      return aggregation === 'token-mean' ? s.weight / totalTokens : s.weight / (counts[i] * trainedSeqs);
    }),
  );
}

/** Cells a sequence needs in a micro-batch: 0 (left out) when none of its positions trains. */
function rlCells(seqs: readonly RlSequence[], weights: readonly number[][]): number[] {
  return seqs.map((s, i) => (weights[i].some((w) => w > 0) ? s.tokens.length - 1 : 0));
}

/** One padded micro-batch of the given sequences (in the order given). */
function packGroup(seqs: readonly RlSequence[], weights: readonly number[][], group: number[]): PackedBatch {
  const length = Math.max(...group.map((i) => seqs[i].tokens.length - 1));
  const rows = group.length;
  const withRef = group.every((i) => seqs[i].refLogprobs !== undefined);
  const b: PackedBatch = {
    rows,
    length,
    inputs: new Int32Array(rows * length),
    targets: new Int32Array(rows * length),
    weights: new Float32Array(rows * length),
    advantages: new Float32Array(rows * length),
    oldLogprobs: new Float32Array(rows * length),
    refLogprobs: withRef ? new Float32Array(rows * length) : null,
    members: group,
  };
  group.forEach((m, r) => {
    const s = seqs[m];
    for (let t = 0; t + 1 < s.tokens.length; t++) {
      const k = r * length + t;
      b.inputs[k] = s.tokens[t];
      b.targets[k] = s.tokens[t + 1];
      b.weights[k] = weights[m][t];
      b.advantages[k] = s.advantage;
      b.oldLogprobs[k] = s.oldLogprobs[t];
      if (b.refLogprobs) b.refLogprobs[k] = (s.refLogprobs as number[])[t];
    }
  });
  return b;
}

/** The sequences that train, in padded micro-batches of at most `maxTokens` cells cut by length (`lengthGroups`). */
export function packRl(seqs: readonly RlSequence[], weights: readonly number[][], maxTokens: number): PackedBatch[] {
  return lengthGroups(rlCells(seqs, weights), maxTokens).map((g) => packGroup(seqs, weights, g));
}

/**
 * The sequences that train as micro-batches for `parts` threads (`groupPlan`): the packed
 * batches and the plan by which the threads take them. Since the weights were set over the whole
 * update, the batches' losses and gradients add up to the update's.
 */
export function packRlPlan(
  seqs: readonly RlSequence[],
  weights: readonly number[][],
  parts: number,
  maxTokens: number,
): { batches: PackedBatch[]; plan: GroupPlan } {
  const plan = groupPlan(rlCells(seqs, weights), parts, maxTokens);
  return { batches: plan.groups.map((g) => packGroup(seqs, weights, g)), plan };
}

/**
 * The sequences with their reference log-probs filled in (one forward of the frozen
 * reference, no gradient, one readback), or the sequences as they are when β = 0 or there is
 * no reference. Done once per rollout batch: every mini-batch and epoch reads them.
 */
export async function withReferenceLogprobs(
  ref: Scorer | null,
  seqs: readonly RlSequence[],
  c: PolicyLossConfig,
  maxTokens: number,
  elsewhere?: ReferenceShare,
): Promise<RlSequence[]> {
  if (!ref || c.beta === 0) return [...seqs];
  // Only the sequences that train read a reference (weight 0: skipped groups, gated without KL).
  const trains = (s: RlSequence) => s.weight > 0;
  const remotes = elsewhere?.referenceRemotes ?? [];
  let lp: number[][];
  if (remotes.length === 0) {
    lp = await actionLogprobs(ref, seqs, c.temperature, maxTokens, trains);
  } else {
    const parts = shareGroups(
      seqs.map((q) => (trains(q) ? q.tokens.length - 1 : 0)),
      remotes.length + 1,
      maxTokens,
    ).map((groups) => groups.flat().sort((a, b) => a - b));
    await (elsewhere as ReferenceShare).syncReference(ref.params);
    // Each share's rows with its sequence indices, placed once every share is in.
    const checked = (part: number[]) => (r: number[][]) => {
      if (r.length !== part.length || r.some((row, j) => row.length !== seqs[part[j]].actions.length))
        throw new Error('reference log-probs from a gradient worker: not one row per sequence and position');
      return { part, rows: r };
    };
    const here = async (part: number[]) => [
      checked(part)(
        await actionLogprobs(
          ref,
          part.map((i) => seqs[i]),
          c.temperature,
          maxTokens,
        ),
      ),
    ];
    const done = await computeShares(
      parts,
      remotes.map(
        (remote) => (part: number[], signal: AbortSignal) =>
          remote(
            part.map((i) => seqs[i]),
            c.temperature,
            maxTokens,
            signal,
          ),
      ),
      {
        isEmpty: (part) => part.length === 0,
        here,
        add: (acc, k, r) => acc.push(...('here' in r ? r.here : [checked(parts[k])(r.away)])),
      },
      elsewhere?.patience,
    );
    lp = seqs.map((s) => s.actions.map(() => 0));
    for (const { part, rows } of done) part.forEach((i, j) => (lp[i] = rows[j]));
  }
  return seqs.map((s, i) => ({ ...s, refLogprobs: lp[i] }));
}

/** Action log-probs of some sequences under the reference, computed elsewhere (`actionLogprobs` there); null: do them here. */
export type RemoteLogprobs = (seqs: RlSequence[], temperature: number, maxTokens: number, signal?: AbortSignal) => Promise<number[][] | null>;

/** Where the reference pass can be shared (gradient workers): they get `ref` first, then their part. */
export interface ReferenceShare {
  syncReference(ref: ReadonlyMap<string, tf.Tensor>): Promise<void>;
  referenceRemotes: readonly RemoteLogprobs[];
  /** How long the remotes get once this thread's share is done (default: shares.ts DEFAULT_PATIENCE). */
  patience?: Patience;
}

/**
 * Log-probs (at `temperature`) under `model` of each sequence's own tokens: per position, as
 * `actions` (0 off the actions, and everywhere in a sequence `include` leaves out). One forward
 * without gradient, packed in micro-batches of at most `maxTokens` cells, one readback.
 */
export async function actionLogprobs(
  model: Scorer,
  seqs: readonly RlSequence[],
  temperature: number,
  maxTokens: number,
  include: (s: RlSequence) => boolean = () => true,
): Promise<number[][]> {
  const out = seqs.map((s) => s.actions.map(() => 0));
  const batches = packRl(
    seqs,
    seqs.map((s) => (include(s) ? s.actions : s.actions.map(() => 0))),
    maxTokens,
  );
  if (batches.length === 0) return out;
  const flat = tf.tidy(() =>
    tf.concat(
      batches.map((b) => {
        const shape: [number, number] = [b.rows, b.length];
        return tf.reshape(model.scores(tf.tensor2d(b.inputs, shape, 'int32'), tf.tensor2d(b.targets, shape, 'int32'), temperature).logp, [-1]);
      }),
    ),
  );
  const values = await flat.data();
  flat.dispose();
  let at = 0;
  for (const b of batches) {
    b.members.forEach((m, r) => {
      seqs[m].actions.forEach((a, t) => {
        if (a) out[m][t] = values[at + r * b.length + t];
      });
    });
    at += b.rows * b.length;
  }
  return out;
}

/** Sums over the trained tokens of one or more updates (divide by `tokens` for the means). */
export interface TokenSums {
  tokens: number;
  kl: number;
  clipped: number;
  dualClipped: number;
  approxKl: number;
  entropy: number;
  ratio: number;
}

export const NO_TOKENS: TokenSums = { tokens: 0, kl: 0, clipped: 0, dualClipped: 0, approxKl: 0, entropy: 0, ratio: 0 };

export function addSums(a: TokenSums, b: TokenSums): TokenSums {
  return {
    tokens: a.tokens + b.tokens,
    kl: a.kl + b.kl,
    clipped: a.clipped + b.clipped,
    dualClipped: a.dualClipped + b.dualClipped,
    approxKl: a.approxKl + b.approxKl,
    entropy: a.entropy + b.entropy,
    ratio: a.ratio + b.ratio,
  };
}

/** Token means of the diagnostics (0 without tokens). */
export function tokenMeans(s: TokenSums): { kl: number; clipFraction: number; dualClipFraction: number; approxKl: number; entropy: number; meanRatio: number } {
  const n = Math.max(1, s.tokens);
  return {
    kl: s.kl / n,
    clipFraction: s.clipped / n,
    dualClipFraction: s.dualClipped / n,
    approxKl: s.approxKl / n,
    entropy: s.entropy / n,
    meanRatio: s.ratio / n,
  };
}

/** The diagnostics surrogateLoss sums, in the order it stacks them. */
export const DIAGNOSTICS = ['kl', 'clipped', 'dualClipped', 'approxKl', 'entropy', 'ratio'] as const;

/** The negated objective of one packed batch (a scalar to minimise) and its diagnostic sums. */
function batchLoss(model: Scorer, b: PackedBatch, c: PolicyLossConfig): { loss: tf.Scalar; diagnostics: tf.Scalar[] } {
  return surrogateLoss((inputs, targets) => model.scores(inputs, targets, c.temperature), b, c);
}

/**
 * The target log-probs [B, T] and entropies [B, T] of a model after `inputs`, at the loss's
 * temperature: what the loss needs of a model, so that any model (the GPT, a Llama-family decoder
 * with LoRA) trains under the one objective.
 */
export type TargetScores = (inputs: tf.Tensor2D, targets: tf.Tensor2D) => { logp: tf.Tensor2D; entropy: tf.Tensor2D };

/**
 * The clipped surrogate with dual clip and KL term over one packed batch, negated (a scalar to
 * minimise), and its diagnostic sums (DIAGNOSTICS); the model enters only through `scores`.
 */
export function surrogateLoss(scores: TargetScores, b: PackedBatch, c: PolicyLossConfig): { loss: tf.Scalar; diagnostics: tf.Scalar[] } {
  checkDualClip(c);
  const shape: [number, number] = [b.rows, b.length];
  const { logp, entropy } = scores(tf.tensor2d(b.inputs, shape, 'int32'), tf.tensor2d(b.targets, shape, 'int32'));
  const w = tf.tensor2d(b.weights, shape);
  const trained = tf.greater(w, 0);
  const active = tf.cast(trained, 'float32');
  const adv = tf.tensor2d(b.advantages, shape);
  const logRatio = tf.clipByValue(tf.sub(logp, tf.tensor2d(b.oldLogprobs, shape)), -LOG_RATIO_LIMIT, LOG_RATIO_LIMIT);
  const ratio = tf.exp(logRatio);
  const unclipped = tf.mul(ratio, adv);
  const clippedTerm = tf.mul(tf.clipByValue(ratio, 1 - c.clipLow, 1 + c.clipHigh), adv);
  let surrogate: tf.Tensor = tf.minimum(unclipped, clippedTerm);
  const clipped = tf.less(clippedTerm, unclipped);
  let dualClipped: tf.Tensor = tf.zerosLike(logp);
  if (c.dualClip !== null) {
    const floor = tf.mul(adv, c.dualClip);
    const negative = tf.less(adv, 0);
    dualClipped = tf.cast(tf.logicalAnd(negative, tf.less(surrogate, floor)), 'float32');
    surrogate = tf.where(negative, tf.maximum(surrogate, floor), surrogate);
  }
  let objective: tf.Tensor = surrogate;
  let kl: tf.Tensor = tf.zerosLike(logp);
  if (b.refLogprobs && c.beta > 0) {
    // Off the trained tokens the stored reference is 0: take d = 0 there, not exp(−log π).
    const d = tf.where(trained, tf.sub(tf.tensor2d(b.refLogprobs, shape), logp), tf.zerosLike(logp));
    kl = tf.sub(tf.sub(tf.exp(d), d), 1);
    objective = tf.sub(surrogate, tf.mul(kl, c.beta));
  }
  const loss = tf.neg(tf.sum(tf.mul(objective, w))) as tf.Scalar;
  const approxKl = tf.sub(tf.sub(ratio, 1), logRatio);
  const perToken: Record<(typeof DIAGNOSTICS)[number], tf.Tensor> = { kl, clipped: tf.cast(clipped, 'float32'), dualClipped, approxKl, entropy, ratio };
  return { loss, diagnostics: DIAGNOSTICS.map((k) => tf.sum(tf.mul(perToken[k], active)) as tf.Scalar) };
}

export interface PolicyGradResult {
  /** Gradients keyed by parameter name (caller disposes). */
  grads: Map<string, tf.Tensor>;
  loss: number;
  /** Diagnostic sums over the trained tokens, and their means. */
  sums: TokenSums;
  kl: number;
  clipFraction: number;
  dualClipFraction: number;
  approxKl: number;
  entropy: number;
  meanRatio: number;
  trainedTokens: number;
}

/** The scalars of a policy item: the loss, then the diagnostic sums. */
const POLICY_SCALARS = 1 + DIAGNOSTICS.length;

/** One packed batch's policy-loss gradients; its scalars: the loss, then the diagnostics' sums (DIAGNOSTICS). */
export function policyItem(model: Scorer, b: PackedBatch, c: PolicyLossConfig): GradItem {
  checkDualClip(c);
  const vars = [...model.params.values()];
  const { grads: byVariable, scalars } = tf.tidy(() => {
    let diag: tf.Scalar[] = [];
    const g = tf.variableGrads(() => {
      const r = batchLoss(model, b, c);
      diag = r.diagnostics.map((t) => tf.keep(t));
      return r.loss;
    }, vars);
    const scalars = tf.stack([g.value, ...diag]) as tf.Tensor1D;
    diag.forEach((t) => t.dispose());
    return { grads: g.grads, scalars };
  });
  const grads = new Map<string, tf.Tensor>();
  accumulateGrads(grads, model.params, byVariable);
  return { grads, scalars };
}

/** Tokens that carry loss in some packed batches. */
function trainedTokensOf(batches: readonly PackedBatch[]): number {
  return batches.reduce((n, b) => n + b.weights.reduce((k, w) => k + (w > 0 ? 1 : 0), 0), 0);
}

/** The update's result from its items' sums (`GradFold`, POLICY_SCALARS wide). */
function policyResult(grads: Map<string, tf.Tensor>, scalars: readonly number[], trainedTokens: number): PolicyGradResult {
  const s: TokenSums = { ...NO_TOKENS, tokens: trainedTokens };
  DIAGNOSTICS.forEach((k, j) => (s[k] = scalars[1 + j]));
  return { grads, loss: scalars[0], sums: s, ...tokenMeans(s), trainedTokens };
}

/**
 * The policy-loss gradients of the packed batches that a gradient worker claims (shares.ts
 * `claimer`), each item apart; null when that worker is gone, and the caller computes them itself.
 */
export type RemotePolicyGradients = (
  batches: PackedBatch[],
  c: PolicyLossConfig,
  claims: Claims,
  signal?: AbortSignal,
) => Promise<ReadonlyMap<number, GradItemAway> | null>;

function checkDualClip(c: PolicyLossConfig): void {
  if (c.dualClip !== null && !(c.dualClip > 1)) throw new Error(`dualClip must be a number > 1, or null (got ${c.dualClip})`);
}

/** Where an update's micro-batches may also be computed: the threads' plan, the gradient workers' remotes, and how long they get. */
export interface PolicyShare {
  plan: QueuePlan;
  remotes: readonly RemotePolicyGradients[];
  patience?: Patience;
}

/**
 * Summed gradients of the policy loss over the micro-batches of one update: on this thread, or
 * with `share`'s workers taking micro-batches from one queue (`computeQueue`); either way folded
 * in micro-batch order (`GradFold`), so the result is the same bits however they were spread.
 */
export async function policyGradients(model: Scorer, batches: PackedBatch[], c: PolicyLossConfig, share?: PolicyShare): Promise<PolicyGradResult> {
  checkDualClip(c);
  const all = batches.map((_, i) => i);
  const sum = new GradFold(model.params, POLICY_SCALARS);
  try {
    await computeQueue(
      share?.plan ?? { order: all, shares: [all] },
      (share?.remotes ?? []).map((remote) => (claims: Claims, signal: AbortSignal) => remote(batches, c, claims, signal)),
      {
        here: async (i) => policyItem(model, batches[i], c),
        fold: (_i, r) => sum.add(r),
        release: releaseGradItem,
      },
      { patience: share?.patience },
    );
    return policyResult(sum.grads, await sum.finish(), trainedTokensOf(batches));
  } catch (e) {
    sum.release();
    throw e;
  }
}
