/**
 * GPT-2 training forward pass, computed as Hugging Face's GPT2LMHeadModel computes it so an
 * exported checkpoint gives the same logits there: token + position embeddings, pre-LayerNorm
 * blocks (attention, then a gelu_new MLP, each added to the residual stream), a final
 * LayerNorm and an LM head tied to the token embedding.
 *
 * Written for the tfjs wasm backend, where the cost model is unusual:
 * - tfjs's own wasm matMul is fast only for one 2-D product with neither operand transposed;
 *   the runtime replaces it with the project's SIMD kernel (src/runtime/wasmKernels), for
 *   which transposed and batched products cost the same as plain ones. Linear layers carry
 *   their own gradient (two transposed matMuls and a column sum, no autodiff bookkeeping).
 * - every op costs tens of microseconds of overhead, so the graph is kept small: the attention
 *   scale is folded into the query weights, the causal mask is a cached additive constant.
 * - slicing a large tensor copies all of it, and tanh is ~20x slower than sigmoid, hence the
 *   per-projection weight slices and gelu_new written with a sigmoid (the same function).
 * - gather has no gradient: embeddings are one-hot · matMul.
 */
import * as tf from '@tensorflow/tfjs';
import type { ModelConfig } from './config';
import type { GPTParams } from './params';

// ---------------------------------------------------------------------------------------------
// Building blocks (shared with the KV-cached decoder)

type Grad2 = (dy: tf.Tensor, saved: tf.Tensor[]) => tf.Tensor[];

/** xᵀ·dy, the weight gradient of x·w. */
function weightGrad(x: tf.Tensor2D, dy: tf.Tensor2D): tf.Tensor2D {
  return tf.matMul(x, dy, true, false);
}

/** Column sums of dy [N, c] as a ones-row matMul (a sum over axis 0 transposes first on wasm). */
function columnSums(dy: tf.Tensor2D): tf.Tensor1D {
  return tf.reshape(tf.matMul(tf.ones([1, dy.shape[0]]), dy), [dy.shape[1]]);
}

/** x·w with a hand-written backward (two transposed matMuls, no autodiff bookkeeping). x [N, in], w [in, out]. */
const matMulFast = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
  const [x, w, save] = args as [tf.Tensor2D, tf.Tensor2D, tf.GradSaveFunc];
  save([x, w]);
  const gradFunc: Grad2 = (dy, [xs, ws]) => [tf.matMul(dy as tf.Tensor2D, ws as tf.Tensor2D, false, true), weightGrad(xs as tf.Tensor2D, dy as tf.Tensor2D)];
  return { value: tf.matMul(x, w), gradFunc };
});

/** x·w + b, one fused kernel forward, plain matMuls backward. */
const linearFast = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
  const [x, w, b, save] = args as [tf.Tensor2D, tf.Tensor2D, tf.Tensor1D, tf.GradSaveFunc];
  save([x, w]);
  const gradFunc: Grad2 = (dy, [xs, ws]) => [
    tf.matMul(dy as tf.Tensor2D, ws as tf.Tensor2D, false, true),
    weightGrad(xs as tf.Tensor2D, dy as tf.Tensor2D),
    columnSums(dy as tf.Tensor2D),
  ];
  return { value: tf.fused.matMul({ a: x, b: w, bias: b }), gradFunc };
});

/** x [N, in] · w [in, out] (+ b [out]), differentiable with the fast backward above. */
export function linear(x: tf.Tensor2D, w: tf.Tensor2D, b?: tf.Tensor1D): tf.Tensor2D {
  return (b === undefined ? matMulFast(x, w) : linearFast(x, w, b)) as tf.Tensor2D;
}

type LayerNormOp = (x: tf.Tensor, gain: tf.Tensor, bias: tf.Tensor) => tf.Tensor;
const layerNormOps = new Map<number, LayerNormOp>();

/**
 * The same LayerNorm with a hand-written backward: about half the ops of autodiff, and the
 * gain/bias gradients as ones-row matMuls instead of slow axis-0 sums.
 */
function layerNormTrainable(x: tf.Tensor2D, gain: tf.Tensor1D, bias: tf.Tensor1D, eps: number): tf.Tensor2D {
  let op = layerNormOps.get(eps);
  if (op === undefined) {
    op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
      const [xs, g, b, save] = args as [tf.Tensor2D, tf.Tensor1D, tf.Tensor1D, tf.GradSaveFunc];
      const centred = tf.sub(xs, tf.mean(xs, -1, true));
      const rstd = tf.rsqrt(tf.add(tf.mean(tf.square(centred), -1, true), eps));
      const normed = tf.mul(centred, rstd);
      save([normed, rstd, g]);
      const gradFunc: Grad2 = (dy, [xhat, r, gs]) => {
        const dxhat = tf.mul(dy, gs);
        const proj = tf.mean(tf.mul(dxhat, xhat), -1, true);
        const dx = tf.mul(tf.sub(tf.sub(dxhat, tf.mean(dxhat, -1, true)), tf.mul(xhat, proj)), r);
        return [dx, columnSums(tf.mul(dy, xhat) as tf.Tensor2D), columnSums(dy as tf.Tensor2D)];
      };
      return { value: tf.add(tf.mul(normed, g), b), gradFunc };
    });
    layerNormOps.set(eps, op);
  }
  return op(x, gain, bias) as tf.Tensor2D;
}

const GELU_A = 2 * Math.sqrt(2 / Math.PI);
const GELU_B = GELU_A * 0.044715;

/**
 * gelu_new: 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))). Since 0.5(1 + tanh z) = sigmoid(2z) this
 * is x·sigmoid(x·(A + B·x²)) exactly, which needs no tanh (slow on wasm) and fewer ops.
 */
export function geluNew<T extends tf.Tensor>(x: T): T {
  return tf.mul(x, tf.sigmoid(tf.mul(x, tf.add(tf.mul(tf.square(x), GELU_B), GELU_A)))) as T;
}

/** Large negative instead of -Infinity: masked scores vanish in softmax without inf − inf = NaN. */
export const MASKED = -1e9;

const causalMasks = new Map<string, tf.Tensor2D>();
const MAX_CACHED_MASKS = 16;

/** How many causal masks are cached (tensors that outlive a step, for leak checks). */
export function cachedCausalMasks(): number {
  return causalMasks.size;
}

/** Additive causal mask [T, T] (0 where key ≤ query, MASKED after), created once per length. */
export function causalMask(t: number): tf.Tensor2D {
  const key = `${tf.getBackend()}:${t}`;
  const hit = causalMasks.get(key);
  if (hit !== undefined && !hit.isDisposed) {
    // Re-insert so the map's order is least recently used first.
    causalMasks.delete(key);
    causalMasks.set(key, hit);
    return hit;
  }
  const values = new Float32Array(t * t);
  for (let i = 0; i < t; i++) for (let j = i + 1; j < t; j++) values[i * t + j] = MASKED;
  const mask = tf.keep(tf.tensor2d(values, [t, t]));
  causalMasks.set(key, mask);
  if (causalMasks.size > MAX_CACHED_MASKS) {
    const [oldestKey, oldest] = causalMasks.entries().next().value as [string, tf.Tensor2D];
    causalMasks.delete(oldestKey);
    oldest.dispose();
  }
  return mask;
}

/** Looks a parameter up by its Hugging Face name; a missing one is a programming error. */
export function param<T extends tf.Tensor = tf.Tensor>(params: GPTParams, name: string): T {
  const v = params.get(name);
  if (v === undefined) throw new Error(`model parameter ${name} is missing`);
  return v as unknown as T;
}

/** Query/key/value weights split out of the fused c_attn, with 1/√dh folded into the query. */
export function splitAttention(
  params: GPTParams,
  config: ModelConfig,
  layer: number,
): { wq: tf.Tensor2D; bq: tf.Tensor1D; wk: tf.Tensor2D; bk: tf.Tensor1D; wv: tf.Tensor2D; bv: tf.Tensor1D } {
  const d = config.nEmbd;
  const scale = 1 / Math.sqrt(d / config.nHead);
  const w = param<tf.Tensor2D>(params, `transformer.h.${layer}.attn.c_attn.weight`);
  const b = param<tf.Tensor1D>(params, `transformer.h.${layer}.attn.c_attn.bias`);
  return {
    wq: tf.mul(tf.slice(w, [0, 0], [d, d]), scale),
    bq: tf.mul(tf.slice(b, [0], [d]), scale),
    wk: tf.slice(w, [0, d], [d, d]),
    bk: tf.slice(b, [d], [d]),
    wv: tf.slice(w, [0, 2 * d], [d, d]),
    bv: tf.slice(b, [2 * d], [d]),
  };
}

// ---------------------------------------------------------------------------------------------
// Training forward

/** float32 one-hot rows (tfjs 4.22's wasm oneHot returns zeros when asked for float32, hence the cast). */
function oneHotFloat(ids: tf.Tensor1D, depth: number): tf.Tensor2D {
  return tf.cast(tf.oneHot(ids, depth), 'float32') as tf.Tensor2D;
}

function checkTokens(config: ModelConfig, tokens: tf.Tensor, what: string): [number, number] {
  if (tokens.rank !== 2) throw new Error(`${what} must be a [batch, time] tensor (got shape [${tokens.shape.join(', ')}])`);
  if (tokens.dtype !== 'int32') throw new Error(`${what} must be int32 (got ${tokens.dtype})`);
  const [b, t] = tokens.shape as [number, number];
  if (b < 1 || t < 1) throw new Error(`${what} must not be empty (got shape [${b}, ${t}])`);
  if (t > config.nPositions) {
    throw new Error(`${what}: sequence length ${t} exceeds the model's nPositions (${config.nPositions})`);
  }
  return [b, t];
}

/** Final hidden states after ln_f, flattened to [B·T, d]. Token ids must lie in [0, vocabSize). */
function hiddenStates(params: GPTParams, config: ModelConfig, tokens: tf.Tensor2D): tf.Tensor2D {
  const [batch, time] = checkTokens(config, tokens, 'tokens');
  const d = config.nEmbd;
  const heads = config.nHead;
  const dh = d / heads;
  const attnScale = 1 / Math.sqrt(dh);
  const splitActivations = tf.getBackend() === 'webgpu';
  const eps = config.layerNormEps;
  const wte = param<tf.Tensor2D>(params, 'transformer.wte.weight');
  const wpe = param<tf.Tensor2D>(params, 'transformer.wpe.weight');

  const oneHot = oneHotFloat(tf.reshape(tokens, [batch * time]), config.vocabSize);
  const positions = tf.slice(wpe, [0, 0], [time, d]);
  let x = tf.reshape(tf.add(tf.reshape(linear(oneHot, wte), [batch, time, d]), positions), [batch * time, d]) as tf.Tensor2D;
  const mask = causalMask(time);

  // [B·T, d] → [B·H, T, dh] and back.
  const toHeads = (t: tf.Tensor2D) => tf.reshape(tf.transpose(tf.reshape(t, [batch, time, heads, dh]), [0, 2, 1, 3]), [batch * heads, time, dh]) as tf.Tensor3D;
  const fromHeads = (t: tf.Tensor3D) => tf.reshape(tf.transpose(tf.reshape(t, [batch, heads, time, dh]), [0, 2, 1, 3]), [batch * time, d]) as tf.Tensor2D;

  for (let i = 0; i < config.nLayer; i++) {
    const p = `transformer.h.${i}`;
    const h = layerNormTrainable(x, param(params, `${p}.ln_1.weight`), param(params, `${p}.ln_1.bias`), eps);
    let q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D;
    if (splitActivations) {
      // WebGPU: one product with the fused c_attn, then its three column blocks (18 dispatches
      // a layer fewer, forward and backward, than three products of sliced weights).
      const [q0, k0, v0] = tf.split(
        linear(h, param<tf.Tensor2D>(params, `${p}.attn.c_attn.weight`), param<tf.Tensor1D>(params, `${p}.attn.c_attn.bias`)),
        3,
        1,
      ) as tf.Tensor2D[];
      [q, k, v] = [toHeads(tf.mul(q0, attnScale) as tf.Tensor2D), toHeads(k0), toHeads(v0)];
    } else {
      // wasm and cpu: slicing a [B·T, 3d] activation copies element by element there (SplitV
      // ~7 ms a layer on `small`), so the weights are sliced instead and the products are three.
      const { wq, bq, wk, bk, wv, bv } = splitAttention(params, config, i);
      [q, k, v] = [toHeads(linear(h, wq, bq)), toHeads(linear(h, wk, bk)), toHeads(linear(h, wv, bv))];
    }
    const probs = tf.softmax(tf.add(tf.matMul(q, k, false, true), mask));
    const attn = fromHeads(tf.matMul(probs, v));
    x = tf.add(x, linear(attn, param<tf.Tensor2D>(params, `${p}.attn.c_proj.weight`), param<tf.Tensor1D>(params, `${p}.attn.c_proj.bias`)));

    const h2 = layerNormTrainable(x, param(params, `${p}.ln_2.weight`), param(params, `${p}.ln_2.bias`), eps);
    const up = geluNew(linear(h2, param<tf.Tensor2D>(params, `${p}.mlp.c_fc.weight`), param<tf.Tensor1D>(params, `${p}.mlp.c_fc.bias`)));
    x = tf.add(x, linear(up, param<tf.Tensor2D>(params, `${p}.mlp.c_proj.weight`), param<tf.Tensor1D>(params, `${p}.mlp.c_proj.bias`)));
  }
  return layerNormTrainable(x, param(params, 'transformer.ln_f.weight'), param(params, 'transformer.ln_f.bias'), eps);
}

/** Tied LM head: logits = h · wteᵀ (wte transposed once a forward; the linear's backward as everywhere). */
function lmHead(params: GPTParams, hidden: tf.Tensor2D): tf.Tensor2D {
  return linear(hidden, tf.transpose(param<tf.Tensor2D>(params, 'transformer.wte.weight')));
}

/** Logits [B, T, V] for int32 tokens [B, T]. Call inside tf.tidy (or dispose the result). */
export function forwardLogits(params: GPTParams, config: ModelConfig, tokens: tf.Tensor2D): tf.Tensor3D {
  return tf.tidy(() => {
    const [batch, time] = tokens.shape;
    return tf.reshape(lmHead(params, hiddenStates(params, config, tokens)), [batch, time, config.vocabSize]) as tf.Tensor3D;
  });
}

/**
 * log p(target | prefix) at every position, [B, T], under softmax(logits / temperature).
 * The temperature lets RL score tokens under the distribution they were sampled from.
 * Differentiable on every backend (the target is picked with a one-hot product, not gather).
 */
export function targetLogProbs(params: GPTParams, config: ModelConfig, tokens: tf.Tensor2D, targets: tf.Tensor2D, temperature = 1): tf.Tensor2D {
  return tf.tidy(() => scoreTargets(params, config, tokens, targets, temperature, false).logp);
}

/**
 * `targetLogProbs` and, from the same forward, the entropy −Σ_v p_v log p_v of the tempered
 * distribution at every position, [B, T] (the RL step logs it on the trained tokens).
 */
export function targetLogProbsAndEntropy(
  params: GPTParams,
  config: ModelConfig,
  tokens: tf.Tensor2D,
  targets: tf.Tensor2D,
  temperature = 1,
): { logp: tf.Tensor2D; entropy: tf.Tensor2D } {
  return tf.tidy(() => {
    const r = scoreTargets(params, config, tokens, targets, temperature, true);
    return { logp: r.logp, entropy: r.entropy as tf.Tensor2D };
  });
}

/** Inside a tidy: the targets' log-probs and, when asked, each position's entropy. */
function scoreTargets(
  params: GPTParams,
  config: ModelConfig,
  tokens: tf.Tensor2D,
  targets: tf.Tensor2D,
  temperature: number,
  withEntropy: boolean,
  withMeanLogp = false,
): { logp: tf.Tensor2D; entropy: tf.Tensor2D | null; meanLogp: tf.Tensor2D | null } {
  if (!(temperature > 0) || !Number.isFinite(temperature)) {
    throw new Error(`temperature must be a finite number > 0 (got ${temperature})`);
  }
  const [batch, time] = checkTokens(config, tokens, 'tokens');
  checkTokens(config, targets, 'targets');
  if (targets.shape[0] !== batch || targets.shape[1] !== time) {
    throw new Error(`targets shape [${targets.shape.join(', ')}] must equal tokens shape [${batch}, ${time}]`);
  }
  let logits = lmHead(params, hiddenStates(params, config, tokens));
  if (temperature !== 1) logits = tf.div(logits, temperature);
  const logProbs = tf.logSoftmax(logits);
  const pick = oneHotFloat(tf.reshape(targets, [batch * time]), config.vocabSize);
  const logp = tf.reshape(tf.sum(tf.mul(logProbs, pick), -1), [batch, time]) as tf.Tensor2D;
  const entropy = withEntropy ? (tf.reshape(tf.neg(tf.sum(tf.mul(tf.exp(logProbs), logProbs), -1)), [batch, time]) as tf.Tensor2D) : null;
  const meanLogp = withMeanLogp ? (tf.reshape(tf.mean(logProbs, -1), [batch, time]) as tf.Tensor2D) : null;
  return { logp, entropy, meanLogp };
}

export interface TokenBatch {
  /** int32 [B, T] inputs; right padding is allowed (give it weight 0). */
  tokens: tf.Tensor2D;
  /** int32 [B, T] next tokens. */
  targets: tf.Tensor2D;
  /** float32 [B, T] per-token weights; 0 excludes a position (padding, injected tokens). */
  weights: tf.Tensor2D;
}

/**
 * Weighted mean cross-entropy: −Σ w·log p(target) / Σ w (0 when every weight is 0). With label
 * smoothing ε each position scores (1 − ε)·log p(target) + ε·(1/V)·Σ_v log p(v).
 */
export function maskedTokenLoss(params: GPTParams, config: ModelConfig, batch: TokenBatch, labelSmoothing = 0): tf.Scalar {
  const { tokens, targets, weights } = batch;
  if (weights.shape.length !== 2 || weights.shape[0] !== tokens.shape[0] || weights.shape[1] !== tokens.shape[1]) {
    throw new Error(`weights shape [${weights.shape.join(', ')}] must equal tokens shape [${tokens.shape.join(', ')}]`);
  }
  if (weights.dtype !== 'float32') throw new Error(`weights must be float32 (got ${weights.dtype})`);
  if (!(labelSmoothing >= 0 && labelSmoothing < 1)) throw new Error(`label smoothing must be in [0, 1) (got ${labelSmoothing})`);
  return tf.tidy(() => {
    const r = scoreTargets(params, config, tokens, targets, 1, false, labelSmoothing > 0);
    // Smoothed: the target distribution is (1 − ε) on the token and ε / V on every token of the vocabulary.
    const score = labelSmoothing > 0 ? tf.add(tf.mul(r.logp, 1 - labelSmoothing), tf.mul(r.meanLogp as tf.Tensor2D, labelSmoothing)) : r.logp;
    const total = tf.sum(tf.mul(score, weights));
    return tf.neg(tf.div(total, tf.maximum(tf.sum(weights), 1e-12))) as tf.Scalar;
  });
}
