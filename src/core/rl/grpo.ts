/**
 * The policy-gradient update (DESIGN §5). Per trainable token:
 *
 *   objective = min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A) − β·KL_k3(π_ref ‖ π),
 *   ρ = π / π_old,   KL_k3 = exp(log π_ref − log π) − (log π_ref − log π) − 1
 *
 * Root and clone contexts of all episodes go into one update (shared weights: the
 * gradient is the sum over every path). Aggregation is folded into per-token weights —
 * token-mean: 1 / (all trained tokens); sequence-mean: 1 / (tokens of its context ·
 * trained contexts) — so micro-batches of any grouping add up to the same gradient.
 * A gated or skipped context has weight 0 and contributes exactly nothing.
 */
import * as tf from '@tensorflow/tfjs';
import { accumulateGrads } from './grads';
import type { ModelConfig } from '../model/config';
import { targetLogProbs } from '../model/gpt';
import type { GPTParams } from '../model/params';

export interface PolicyLossConfig {
  clipLow: number;
  clipHigh: number;
  /** KL coefficient; 0 skips the reference forward. */
  beta: number;
  aggregation: 'token-mean' | 'sequence-mean';
  /** Sampling temperature of the rollouts (log-probs are taken under the same distribution). */
  temperature: number;
}

export const POLICY_LOSS_DEFAULTS: PolicyLossConfig = {
  clipLow: 0.2,
  clipHigh: 0.2,
  beta: 0.001,
  aggregation: 'token-mean',
  temperature: 1,
};

/** One context prepared for the update. */
export interface RlSequence {
  tokens: number[];
  /** Per position i (predicting tokens[i+1]): 1 for the model's own tokens, else 0. */
  actions: number[];
  /** Behaviour log-prob per position (0 where actions[i] = 0). */
  oldLogprobs: number[];
  advantage: number;
  /** 0 for gated or skipped contexts. */
  weight: number;
}

interface PackedBatch {
  rows: number;
  length: number;
  inputs: Int32Array;
  targets: Int32Array;
  /** Aggregation weight per position (0 off the trained tokens). */
  weights: Float32Array;
  advantages: Float32Array;
  oldLogprobs: Float32Array;
  members: number[];
}

/** Per-token aggregation weights for every sequence (see the file comment). */
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

/** Pack sequences into length-sorted padded micro-batches of at most `maxTokens` cells. */
export function packRl(seqs: readonly RlSequence[], weights: readonly number[][], maxTokens: number): PackedBatch[] {
  const order = seqs
    .map((_, i) => i)
    .filter((i) => weights[i].some((w) => w > 0))
    .sort((a, b) => seqs[a].tokens.length - seqs[b].tokens.length);
  const out: PackedBatch[] = [];
  let group: number[] = [];
  const flush = () => {
    if (group.length === 0) return;
    const length = Math.max(...group.map((i) => seqs[i].tokens.length - 1));
    const rows = group.length;
    const b: PackedBatch = {
      rows,
      length,
      inputs: new Int32Array(rows * length),
      targets: new Int32Array(rows * length),
      weights: new Float32Array(rows * length),
      advantages: new Float32Array(rows * length),
      oldLogprobs: new Float32Array(rows * length),
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
      }
    });
    out.push(b);
    group = [];
  };
  for (const i of order) {
    const len = seqs[i].tokens.length - 1;
    if (group.length > 0 && (group.length + 1) * len > maxTokens) flush();
    group.push(i);
  }
  flush();
  return out;
}

/** The negated objective of one packed batch (a scalar to minimise) and its diagnostics. */
function batchLoss(
  params: GPTParams,
  config: ModelConfig,
  b: PackedBatch,
  c: PolicyLossConfig,
  refLogprobs: tf.Tensor2D | null,
): { loss: tf.Scalar; kl: tf.Scalar; clipped: tf.Scalar; ratio: tf.Scalar } {
  const shape: [number, number] = [b.rows, b.length];
  const logp = targetLogProbs(params, config, tf.tensor2d(b.inputs, shape, 'int32'), tf.tensor2d(b.targets, shape, 'int32'), c.temperature);
  const w = tf.tensor2d(b.weights, shape);
  const adv = tf.tensor2d(b.advantages, shape);
  const ratio = tf.exp(tf.sub(logp, tf.tensor2d(b.oldLogprobs, shape)));
  const unclipped = tf.mul(ratio, adv);
  const clippedRatio = tf.clipByValue(ratio, 1 - c.clipLow, 1 + c.clipHigh);
  const surrogate = tf.minimum(unclipped, tf.mul(clippedRatio, adv));
  let objective: tf.Tensor = surrogate;
  let kl: tf.Tensor = tf.zerosLike(logp);
  if (refLogprobs && c.beta > 0) {
    const d = tf.sub(refLogprobs, logp);
    kl = tf.sub(tf.sub(tf.exp(d), d), 1);
    objective = tf.sub(surrogate, tf.mul(kl, c.beta));
  }
  const loss = tf.neg(tf.sum(tf.mul(objective, w))) as tf.Scalar;
  const active = tf.cast(tf.greater(w, 0), 'float32');
  const isClipped = tf.cast(tf.notEqual(ratio, clippedRatio), 'float32');
  return {
    loss,
    kl: tf.sum(tf.mul(kl, active)) as tf.Scalar,
    clipped: tf.sum(tf.mul(isClipped, active)) as tf.Scalar,
    ratio: tf.sum(tf.mul(ratio, active)) as tf.Scalar,
  };
}

export interface PolicyGradResult {
  /** Gradients keyed by parameter name (caller disposes). */
  grads: Map<string, tf.Tensor>;
  loss: number;
  /** Mean KL_k3 over trained tokens, share of clipped tokens, mean ratio. */
  kl: number;
  clipFraction: number;
  meanRatio: number;
  trainedTokens: number;
}

/** Reference-policy log-probs of each packed batch (no gradient), or nulls when β = 0. */
export function referenceLogprobs(ref: GPTParams | null, config: ModelConfig, batches: PackedBatch[], c: PolicyLossConfig): (tf.Tensor2D | null)[] {
  return batches.map((b) => {
    if (!ref || c.beta === 0) return null;
    const shape: [number, number] = [b.rows, b.length];
    return tf.tidy(() => targetLogProbs(ref, config, tf.tensor2d(b.inputs, shape, 'int32'), tf.tensor2d(b.targets, shape, 'int32'), c.temperature));
  });
}

/** Summed gradients of the policy loss over all micro-batches. */
export async function policyGradients(
  params: GPTParams,
  config: ModelConfig,
  batches: PackedBatch[],
  refs: (tf.Tensor2D | null)[],
  c: PolicyLossConfig,
): Promise<PolicyGradResult> {
  const vars = [...params.values()];
  const sums = new Map<string, tf.Tensor>();
  const parts: tf.Scalar[] = [];
  let trainedTokens = 0;
  for (let k = 0; k < batches.length; k++) {
    const b = batches[k];
    trainedTokens += b.weights.reduce((n, w) => n + (w > 0 ? 1 : 0), 0);
    const { value, grads, extra } = tf.tidy(() => {
      let diag: tf.Scalar[] = [];
      const g = tf.variableGrads(() => {
        const r = batchLoss(params, config, b, c, refs[k]);
        diag = [r.kl, r.clipped, r.ratio].map((t) => tf.keep(t));
        return r.loss;
      }, vars);
      const extra = tf.stack(diag);
      diag.forEach((t) => t.dispose());
      return { value: g.value, grads: g.grads, extra };
    });
    parts.push(value, ...tf.unstack(extra).map((t) => t as tf.Scalar));
    extra.dispose();
    accumulateGrads(sums, params, grads);
  }
  const stacked = parts.length ? tf.stack(parts) : tf.zeros([0]);
  const vals = await stacked.data();
  stacked.dispose();
  parts.forEach((t) => t.dispose());
  let loss = 0;
  let kl = 0;
  let clipped = 0;
  let ratio = 0;
  for (let i = 0; i < vals.length; i += 4) {
    loss += vals[i];
    kl += vals[i + 1];
    clipped += vals[i + 2];
    ratio += vals[i + 3];
  }
  const n = Math.max(1, trainedTokens);
  return { grads: sums, loss, kl: kl / n, clipFraction: clipped / n, meanRatio: ratio / n, trainedTokens };
}
