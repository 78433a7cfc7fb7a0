/**
 * Decoder-only language models as Hugging Face defines them: one interface (config, weights by HF
 * name, forward, cached decoding, LoRA) over four families. GPT-2 (modeling_gpt2, the playground's
 * own model's architecture): LayerNorm, learned positions, a fused q/k/v projection and a gelu_new
 * MLP, with Conv1D weights stored [in, out]. The Llama family (modeling_llama, modeling_qwen2,
 * modeling_qwen3): RMSNorm before attention and MLP, rotary positions, grouped-query
 * attention, a SwiGLU MLP, tied or untied embeddings, and the biases and norms each family adds:
 *
 *   llama   q/k/v/o biases when `attention_bias`, MLP biases when `mlp_bias`
 *   qwen2   q/k/v biases, no o bias
 *   qwen3   RMSNorm over each head of q and k (q_norm, k_norm) before the rotation; q/k/v/o
 *           biases when `attention_bias`
 *
 * One layer, in HF's order:  h = x + o(attn(rope(norm_q(q(n1(x)))), rope(norm_k(k(n1(x)))), v(n1(x))))
 *                            y = h + down(silu(gate(n2(h))) · up(n2(h)))
 * and logits = lm_head(norm(y)), lm_head = embed_tokens when tied. Weights stay as the checkpoint
 * holds them ([out, in]); a linear layer is x·Wᵀ (+ b). Everything is computed in float32; with
 * `storage: 'half'` the float16/bfloat16 matrices of a checkpoint stay 16-bit in memory and are
 * widened where a forward reads them (halfWeights.ts).
 *
 * The config reads both the layout of transformers 5 (`rope_parameters`) and the older one
 * (`rope_theta`, `rope_scaling`), and the rope types `default`, `linear` and `llama3`; anything
 * else is refused by name rather than run differently from the reference.
 */
import type { Rng } from '../rng';
import { sampleFromLogits } from './sample';
import { geluNew } from './gpt';
import * as tf from '@tensorflow/tfjs';
import type { DecodedTensor } from '../io/safetensors';
import { hfConfigBoundError } from './decoderBounds';
import { asFloat, halfFormatOf, halfStorageAvailable, packedHalfTensor, widenHalfRows } from './halfWeights';

export type DecoderFamily = 'gpt2' | 'llama' | 'qwen2' | 'qwen3';
export const DECODER_FAMILIES: readonly DecoderFamily[] = ['gpt2', 'llama', 'qwen2', 'qwen3'];

export type RopeScaling =
  | { type: 'default' }
  | { type: 'linear'; factor: number }
  | { type: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositions: number };

export interface DecoderConfig {
  family: DecoderFamily;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** The epsilon of every norm (RMSNorm, or GPT-2's LayerNorm). */
  normEps: number;
  /** Rotary positions (the Llama family; GPT-2 learns a position table instead and ignores them). */
  ropeTheta: number;
  rope: RopeScaling;
  maxPositions: number;
  tieEmbeddings: boolean;
  /** Biases on q, k, v (qwen2; llama with attention_bias). */
  qkvBias: boolean;
  /** A bias on o (llama and qwen3 with attention_bias). */
  oBias: boolean;
  /** Biases on gate, up and down (llama with mlp_bias). */
  mlpBias: boolean;
  /** RMSNorm of each q and k head (qwen3). */
  qkNorm: boolean;
}

export class DecoderConfigError extends Error {
  constructor(message: string) {
    super(`config.json: ${message}`);
    this.name = 'DecoderConfigError';
  }
}

/** Weights that do not fit their config: a tensor missing or of another shape. */
export class DecoderWeightsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DecoderWeightsError';
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A Hugging Face config.json of a llama, qwen2 or qwen3 causal LM, checked field by field. */
export function decoderConfigFromHf(raw: unknown): DecoderConfig {
  if (!isObject(raw)) throw new DecoderConfigError('must be a JSON object');
  const family = raw.model_type;
  if (typeof family !== 'string' || !(DECODER_FAMILIES as readonly string[]).includes(family)) {
    throw new DecoderConfigError(`model_type ${JSON.stringify(family)} is not one of ${DECODER_FAMILIES.join(', ')}`);
  }
  if (family === 'gpt2') return gpt2Config(raw);
  const int = (key: string, fallback?: number): number => {
    const v = raw[key] ?? fallback;
    if (!(typeof v === 'number' && Number.isInteger(v) && v > 0)) throw new DecoderConfigError(`${key} must be a positive integer (got ${JSON.stringify(v)})`);
    const tooLarge = hfConfigBoundError(key, v);
    if (tooLarge !== null) throw new DecoderConfigError(tooLarge);
    return v;
  };
  const num = (key: string, v: unknown): number => {
    if (!(typeof v === 'number' && Number.isFinite(v) && v > 0)) throw new DecoderConfigError(`${key} must be a positive number (got ${JSON.stringify(v)})`);
    return v;
  };
  const bool = (key: string, fallback: boolean): boolean => {
    const v = raw[key] ?? fallback;
    if (typeof v !== 'boolean') throw new DecoderConfigError(`${key} must be true or false (got ${JSON.stringify(v)})`);
    return v;
  };
  if (raw.hidden_act !== undefined && raw.hidden_act !== 'silu') throw new DecoderConfigError(`hidden_act ${JSON.stringify(raw.hidden_act)} is not silu`);
  const hiddenSize = int('hidden_size');
  const heads = int('num_attention_heads');
  const kvHeads = int('num_key_value_heads', heads);
  if (heads % kvHeads !== 0) throw new DecoderConfigError(`num_attention_heads ${heads} is not a multiple of num_key_value_heads ${kvHeads}`);
  const headDim = raw.head_dim === undefined || raw.head_dim === null ? hiddenSize / heads : int('head_dim');
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) throw new DecoderConfigError(`head_dim ${headDim} must be an even integer`);
  // transformers 5 keeps theta and scaling in rope_parameters; older configs in rope_theta and rope_scaling.
  const params = isObject(raw.rope_parameters) ? raw.rope_parameters : isObject(raw.rope_scaling) ? raw.rope_scaling : {};
  const ropeTheta = num('rope_theta', params.rope_theta ?? raw.rope_theta ?? 10000);
  const type = params.rope_type ?? params.type ?? 'default';
  let rope: RopeScaling;
  if (type === 'default') rope = { type: 'default' };
  else if (type === 'linear') rope = { type: 'linear', factor: num('rope factor', params.factor) };
  else if (type === 'llama3') {
    rope = {
      type: 'llama3',
      factor: num('rope factor', params.factor),
      lowFreqFactor: num('rope low_freq_factor', params.low_freq_factor),
      highFreqFactor: num('rope high_freq_factor', params.high_freq_factor),
      originalMaxPositions: num('rope original_max_position_embeddings', params.original_max_position_embeddings),
    };
  } else throw new DecoderConfigError(`rope type ${JSON.stringify(type)} is not supported (default, linear, llama3)`);
  if (raw.use_sliding_window === true) throw new DecoderConfigError('sliding-window attention (use_sliding_window) is not supported');
  const attentionBias = bool('attention_bias', family === 'qwen2');
  return {
    family: family as DecoderFamily,
    vocabSize: int('vocab_size'),
    hiddenSize,
    intermediateSize: int('intermediate_size'),
    layers: int('num_hidden_layers'),
    heads,
    kvHeads,
    headDim,
    normEps: num('rms_norm_eps', raw.rms_norm_eps ?? 1e-6),
    ropeTheta,
    rope,
    maxPositions: int('max_position_embeddings'),
    tieEmbeddings: bool('tie_word_embeddings', false),
    qkvBias: family === 'qwen2' || attentionBias,
    oBias: family !== 'qwen2' && attentionBias,
    mlpBias: family === 'llama' && bool('mlp_bias', false),
    qkNorm: family === 'qwen3',
  };
}

/** GPT-2's config.json (GPT2Config's names), refusing the switches that would change the forward pass. */
function gpt2Config(raw: Record<string, unknown>): DecoderConfig {
  const int = (key: string, fallback?: number): number => {
    const v = raw[key] ?? fallback;
    if (!(typeof v === 'number' && Number.isInteger(v) && v > 0)) throw new DecoderConfigError(`${key} must be a positive integer (got ${JSON.stringify(v)})`);
    const tooLarge = hfConfigBoundError(key, v);
    if (tooLarge !== null) throw new DecoderConfigError(tooLarge);
    return v;
  };
  const act = raw.activation_function ?? 'gelu_new';
  // gelu_pytorch_tanh is the same tanh approximation as gelu_new.
  if (act !== 'gelu_new' && act !== 'gelu_pytorch_tanh') throw new DecoderConfigError(`activation_function ${JSON.stringify(act)} is not gelu_new`);
  for (const [key, refused] of [
    ['scale_attn_weights', false],
    ['scale_attn_by_inverse_layer_idx', true],
    ['add_cross_attention', true],
  ] as const) {
    if (raw[key] === refused) throw new DecoderConfigError(`${key} ${refused} is not supported`);
  }
  const hiddenSize = int('n_embd');
  const heads = int('n_head');
  if (hiddenSize % heads !== 0) throw new DecoderConfigError(`n_embd ${hiddenSize} is not a multiple of n_head ${heads}`);
  const eps = raw.layer_norm_epsilon ?? 1e-5;
  if (!(typeof eps === 'number' && Number.isFinite(eps) && eps > 0))
    throw new DecoderConfigError(`layer_norm_epsilon must be a positive number (got ${JSON.stringify(eps)})`);
  const tie = raw.tie_word_embeddings ?? true;
  if (typeof tie !== 'boolean') throw new DecoderConfigError(`tie_word_embeddings must be true or false (got ${JSON.stringify(tie)})`);
  return {
    family: 'gpt2',
    vocabSize: int('vocab_size'),
    hiddenSize,
    intermediateSize: raw.n_inner === null || raw.n_inner === undefined ? 4 * hiddenSize : int('n_inner'),
    layers: int('n_layer'),
    heads,
    kvHeads: heads,
    headDim: hiddenSize / heads,
    normEps: eps,
    ropeTheta: 10000,
    rope: { type: 'default' },
    maxPositions: int('n_positions'),
    tieEmbeddings: tie,
    qkvBias: true,
    oBias: true,
    mlpBias: true,
    qkNorm: false,
  };
}

/** GPT-2's tensors (Conv1D weights [in, out]), named as GPT2LMHeadModel saves them. */
function gpt2TensorSpecs(c: DecoderConfig): { name: string; shape: number[] }[] {
  const H = c.hiddenSize;
  const specs = [
    { name: 'transformer.wte.weight', shape: [c.vocabSize, H] },
    { name: 'transformer.wpe.weight', shape: [c.maxPositions, H] },
  ];
  for (let l = 0; l < c.layers; l++) {
    const p = `transformer.h.${l}`;
    specs.push(
      { name: `${p}.ln_1.weight`, shape: [H] },
      { name: `${p}.ln_1.bias`, shape: [H] },
      { name: `${p}.attn.c_attn.weight`, shape: [H, 3 * H] },
      { name: `${p}.attn.c_attn.bias`, shape: [3 * H] },
      { name: `${p}.attn.c_proj.weight`, shape: [H, H] },
      { name: `${p}.attn.c_proj.bias`, shape: [H] },
      { name: `${p}.ln_2.weight`, shape: [H] },
      { name: `${p}.ln_2.bias`, shape: [H] },
      { name: `${p}.mlp.c_fc.weight`, shape: [H, c.intermediateSize] },
      { name: `${p}.mlp.c_fc.bias`, shape: [c.intermediateSize] },
      { name: `${p}.mlp.c_proj.weight`, shape: [c.intermediateSize, H] },
      { name: `${p}.mlp.c_proj.bias`, shape: [H] },
    );
  }
  specs.push({ name: 'transformer.ln_f.weight', shape: [H] }, { name: 'transformer.ln_f.bias', shape: [H] });
  if (!c.tieEmbeddings) specs.push({ name: 'lm_head.weight', shape: [c.vocabSize, H] });
  return specs;
}

/** Whether a family stores its linear layers as Conv1D, [in, out] (GPT-2), rather than [out, in]. */
export const conv1dWeights = (c: Pick<DecoderConfig, 'family'>): boolean => c.family === 'gpt2';

/** The embedding table's HF name. */
export const embeddingName = (c: Pick<DecoderConfig, 'family'>): string => (c.family === 'gpt2' ? 'transformer.wte.weight' : 'model.embed_tokens.weight');

/** The checkpoint's tensors a config needs, with their shapes (HF names). */
export function decoderTensorSpecs(c: DecoderConfig): { name: string; shape: number[] }[] {
  if (c.family === 'gpt2') return gpt2TensorSpecs(c);
  const specs: { name: string; shape: number[] }[] = [{ name: 'model.embed_tokens.weight', shape: [c.vocabSize, c.hiddenSize] }];
  const q = c.heads * c.headDim;
  const kv = c.kvHeads * c.headDim;
  for (let l = 0; l < c.layers; l++) {
    const p = `model.layers.${l}`;
    specs.push({ name: `${p}.input_layernorm.weight`, shape: [c.hiddenSize] });
    specs.push({ name: `${p}.self_attn.q_proj.weight`, shape: [q, c.hiddenSize] });
    specs.push({ name: `${p}.self_attn.k_proj.weight`, shape: [kv, c.hiddenSize] });
    specs.push({ name: `${p}.self_attn.v_proj.weight`, shape: [kv, c.hiddenSize] });
    specs.push({ name: `${p}.self_attn.o_proj.weight`, shape: [c.hiddenSize, q] });
    if (c.qkvBias) {
      specs.push({ name: `${p}.self_attn.q_proj.bias`, shape: [q] });
      specs.push({ name: `${p}.self_attn.k_proj.bias`, shape: [kv] });
      specs.push({ name: `${p}.self_attn.v_proj.bias`, shape: [kv] });
    }
    if (c.oBias) specs.push({ name: `${p}.self_attn.o_proj.bias`, shape: [c.hiddenSize] });
    if (c.qkNorm) {
      specs.push({ name: `${p}.self_attn.q_norm.weight`, shape: [c.headDim] });
      specs.push({ name: `${p}.self_attn.k_norm.weight`, shape: [c.headDim] });
    }
    specs.push({ name: `${p}.post_attention_layernorm.weight`, shape: [c.hiddenSize] });
    specs.push({ name: `${p}.mlp.gate_proj.weight`, shape: [c.intermediateSize, c.hiddenSize] });
    specs.push({ name: `${p}.mlp.up_proj.weight`, shape: [c.intermediateSize, c.hiddenSize] });
    specs.push({ name: `${p}.mlp.down_proj.weight`, shape: [c.hiddenSize, c.intermediateSize] });
    if (c.mlpBias) {
      specs.push({ name: `${p}.mlp.gate_proj.bias`, shape: [c.intermediateSize] });
      specs.push({ name: `${p}.mlp.up_proj.bias`, shape: [c.intermediateSize] });
      specs.push({ name: `${p}.mlp.down_proj.bias`, shape: [c.hiddenSize] });
    }
  }
  specs.push({ name: 'model.norm.weight', shape: [c.hiddenSize] });
  if (!c.tieEmbeddings) specs.push({ name: 'lm_head.weight', shape: [c.vocabSize, c.hiddenSize] });
  return specs;
}

/** A checkpoint's weights by HF name; with half storage its 16-bit matrices are packed (halfWeights.ts): read them through `asFloat`. */
export type DecoderParams = Map<string, tf.Tensor>;

/**
 * How weights are held: `float32`, or `half`: a matrix the checkpoint stores as F16 or BF16 stays
 * 16-bit (packed, half the memory) and is widened where a forward reads it; F32 tensors, and
 * vectors (norms, biases), are float32 either way.
 */
export type WeightStorage = 'float32' | 'half';

/**
 * The weights of a checkpoint's tensors as tfjs tensors, after checking that every tensor the
 * config needs is there with its shape; extra tensors (rotary caches some exports keep) are left.
 */
export function decoderParams(c: DecoderConfig, tensors: ReadonlyMap<string, DecodedTensor>, storage: WeightStorage = 'float32'): DecoderParams {
  if (storage === 'half' && !halfStorageAvailable()) throw new Error(`backend ${tf.getBackend()} has no kernel to widen 16-bit weights: load them as float32`);
  const params: DecoderParams = new Map();
  try {
    for (const { name, shape } of decoderTensorSpecs(c)) {
      // GPT-2 checkpoints saved from GPT2Model (the Hub's own gpt2) lack the `transformer.` prefix.
      const t = tensors.get(name) ?? (c.family === 'gpt2' ? tensors.get(name.replace(/^transformer\./, '')) : undefined);
      if (!t) throw new DecoderWeightsError(`the weights lack ${name} (shape [${shape.join(', ')}])`);
      if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
        throw new DecoderWeightsError(`${name} has shape [${t.shape.join(', ')}], the config needs [${shape.join(', ')}]`);
      }
      const packed = storage === 'half' && t.bits !== undefined && shape.length === 2 && shape[1] % 2 === 0;
      params.set(name, packed ? packedHalfTensor(t.bits as Uint16Array, shape, t.dtype === 'BF16' ? 'bf16' : 'f16') : tf.tensor(t.data, shape, 'float32'));
    }
  } catch (e) {
    params.forEach((t) => t.dispose());
    throw e;
  }
  return params;
}

/** Bytes the weights take in memory, and how many of them are held 16-bit. */
export function decoderParamBytes(params: DecoderParams): { bytes: number; halfTensors: number } {
  let bytes = 0;
  let halfTensors = 0;
  params.forEach((t) => {
    bytes += t.size * 4;
    if (halfFormatOf(t) !== null) halfTensors++;
  });
  return { bytes, halfTensors };
}

/** The rotary inverse frequencies of a config (HF's `_compute_*_parameters`), float64. */
export function ropeInverseFrequencies(c: Pick<DecoderConfig, 'headDim' | 'ropeTheta' | 'rope'>): Float64Array {
  const half = c.headDim / 2;
  const inv = Float64Array.from({ length: half }, (_, i) => 1 / c.ropeTheta ** ((2 * i) / c.headDim));
  const r = c.rope;
  if (r.type === 'linear') return inv.map((f) => f / r.factor);
  if (r.type === 'llama3') {
    const lowWavelen = r.originalMaxPositions / r.lowFreqFactor;
    const highWavelen = r.originalMaxPositions / r.highFreqFactor;
    return inv.map((f) => {
      const wavelen = (2 * Math.PI) / f;
      if (wavelen > lowWavelen) return f / r.factor;
      if (wavelen < highWavelen) return f;
      const smooth = (r.originalMaxPositions / wavelen - r.lowFreqFactor) / (r.highFreqFactor - r.lowFreqFactor);
      return ((1 - smooth) * f) / r.factor + smooth * f;
    });
  }
  return inv;
}

/** Rotary cos and sin by config, for the positions reached so far (grown by doubling): computed once, not per decoded token. */
const ROTARY = new WeakMap<DecoderConfig, { positions: number; cos: Float32Array; sin: Float32Array }>();

/**
 * cos and sin of positions [from, from + count) × frequency, [count, headDim] (the halves repeated,
 * as HF's `cat(freqs, freqs)`).
 */
function rotaryTables(c: DecoderConfig, from: number, count: number): { cos: tf.Tensor2D; sin: tf.Tensor2D } {
  let t = ROTARY.get(c);
  if (!t || t.positions < from + count) {
    const positions = Math.min(c.maxPositions, Math.max(from + count, 2 * (t?.positions ?? 64)));
    const inv = ropeInverseFrequencies(c);
    const half = inv.length;
    const cos = new Float32Array(positions * c.headDim);
    const sin = new Float32Array(positions * c.headDim);
    for (let p = 0; p < positions; p++) {
      for (let i = 0; i < half; i++) {
        const a = p * inv[i];
        cos[p * c.headDim + i] = cos[p * c.headDim + half + i] = Math.cos(a);
        sin[p * c.headDim + i] = sin[p * c.headDim + half + i] = Math.sin(a);
      }
    }
    t = { positions, cos, sin };
    ROTARY.set(c, t);
  }
  const rows = (a: Float32Array) => tf.tensor2d(a.subarray(from * c.headDim, (from + count) * c.headDim), [count, c.headDim]);
  return { cos: rows(t.cos), sin: rows(t.sin) };
}

function rmsNorm(x: tf.Tensor, w: tf.Tensor, eps: number): tf.Tensor {
  const variance = tf.mean(tf.square(x), -1, true);
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(variance, eps))), w);
}

function layerNorm(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor, eps: number): tf.Tensor {
  const centred = tf.sub(x, tf.mean(x, -1, true));
  return tf.add(tf.mul(tf.mul(centred, tf.rsqrt(tf.add(tf.mean(tf.square(centred), -1, true), eps))), w), b);
}

/** x·Wᵀ (+ b) for W [out, in]; x·W for a Conv1D weight [in, out] (`conv1d`). */
function linear(x: tf.Tensor, w: tf.Tensor, b?: tf.Tensor, conv1d = false): tf.Tensor {
  const shape = x.shape;
  const y = tf.matMul(tf.reshape(x, [-1, shape[shape.length - 1]]), w, false, !conv1d);
  const out = tf.reshape(y, [...shape.slice(0, -1), w.shape[conv1d ? 1 : 0] as number]);
  return b ? tf.add(out, b) : out;
}

/** x·cos + rotate_half(x)·sin over the last axis, x [B, H, T, D]. */
function rotate(x: tf.Tensor4D, cos: tf.Tensor2D, sin: tf.Tensor2D): tf.Tensor {
  const half = x.shape[3] / 2;
  const [x1, x2] = tf.split(x, [half, half], 3);
  const rotated = tf.concat([tf.neg(x2), x1], 3);
  return tf.add(tf.mul(x, cos), tf.mul(rotated, sin));
}

/** Low-rank adapters over some linear layers (lora.ts): the term added to module `m`'s output for input x, or null. */
export interface Adapters {
  delta(module: string, x: tf.Tensor): tf.Tensor | null;
}

/** One layer's keys (after q/k norm and rotation) and values, [B, kvHeads, T, headDim]: what a cache keeps. */
export interface LayerKv {
  k: tf.Tensor4D;
  v: tf.Tensor4D;
}

/**
 * Rows `ids` of a trained table (full fine-tuning): a gather whose gradient is one-hot(ids)ᵀ · dy,
 * since tfjs's own gather gradient needs UnsortedSegmentSum, which the wasm backend lacks.
 */
function trainableRows(table: tf.Tensor, ids: tf.Tensor): tf.Tensor {
  const rows = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [t, save] = args as [tf.Tensor, tf.GradSaveFunc];
    // The one-hot rows are kept for the gradient (the ids themselves do not outlive the forward).
    save([tf.cast(tf.oneHot(tf.reshape(ids, [-1]) as tf.Tensor1D, t.shape[0]), 'float32')]);
    return {
      value: tf.gather(t, ids),
      gradFunc: (dy: tf.Tensor | tf.Tensor[], [oneHot]: tf.Tensor[]) => tf.matMul(oneHot, tf.reshape(dy as tf.Tensor, [-1, t.shape[1]!]), true, false),
    };
  });
  return rows(table);
}

/** Logits [B, T, V] of token ids [B, T] (every row starts at position 0; causal attention). */
export function decoderLogits(params: DecoderParams, c: DecoderConfig, tokens: tf.Tensor2D): tf.Tensor3D {
  return tf.tidy(() => decoderForward(params, c, tokens, null).logits);
}

/**
 * The forward of `tokens` [B, n] at positions past..past+n−1 of every row, attending to `cache`
 * (the keys and values of the first `past` positions, per layer; null: none): the logits of the
 * new positions and every layer's keys and values through them. Call inside a tidy; the caller
 * keeps what it needs.
 */
export function decoderForward(
  params: DecoderParams,
  c: DecoderConfig,
  tokens: tf.Tensor2D,
  cache: readonly LayerKv[] | null,
  adapters?: Adapters,
  /** Rows left-padded by this many tokens each (rows of different lengths decoded together); none: no padding. */
  pad?: readonly number[],
): { logits: tf.Tensor3D; kv: LayerKv[] } {
  const [batch, time] = tokens.shape;
  const past = cache === null ? 0 : cache[0].k.shape[2];
  const total = past + time;
  if (total > c.maxPositions) throw new Error(`decoder: ${total} positions exceed max_position_embeddings ${c.maxPositions}`);
  if (cache !== null && (cache.length !== c.layers || cache.some((l) => l.k.shape[0] !== batch))) {
    throw new Error(
      `decoder: the cache holds ${cache.length} layers of ${cache[0]?.k.shape[0]} rows, the model ${c.layers} layers and the input ${batch} rows`,
    );
  }
  // A weight as float32 (a 16-bit matrix widened here, inside the caller's tidy).
  const stored = (name: string) => {
    const t = params.get(name);
    if (!t) throw new Error(`decoder: no weight ${name}`);
    return t;
  };
  // Widened copies of 16-bit matrices are freed as soon as their product is taken, so a forward
  // holds one at a time, unless a gradient is being recorded (its backward reads them).
  const recording = (tf.engine() as unknown as { state: { gradientDepth: number } }).state.gradientDepth > 0;
  const widened: tf.Tensor[] = [];
  const get = (name: string) => {
    const t = stored(name);
    const w = asFloat(t);
    if (w !== t) widened.push(w);
    return w;
  };
  const release = () => {
    if (!recording) widened.splice(0).forEach((w) => w.dispose());
  };
  const opt = (name: string) => {
    const t = params.get(name);
    return t === undefined ? undefined : asFloat(t);
  };
  if (pad !== undefined && (pad.length !== batch || pad.some((p) => !Number.isInteger(p) || p < 0 || p >= total))) {
    throw new Error(`decoder: pad must give each of the ${batch} rows a count in [0, ${total}) (got ${JSON.stringify(pad)})`);
  }
  const gpt2 = c.family === 'gpt2';
  // A linear layer of module `m` (HF name without .weight), with its adapter's low-rank term where
  // it has one; GPT-2's Conv1D weights are [in, out].
  const lin = (x: tf.Tensor, m: string) => {
    const y = linear(x, get(`${m}.weight`), opt(`${m}.bias`), gpt2);
    release();
    const delta = adapters?.delta(m, x);
    return delta ? tf.add(y, delta) : y;
  };
  // Query i (position past + i) sees keys 0..past + i; a padded row, none of its padding.
  const mask = tf.linalg.bandPart(tf.ones([time, total]), -1, past);
  const negative =
    pad === undefined
      ? tf.mul(tf.sub(1, mask), -1e9)
      : tf.mul(
          tf.sub(
            1,
            tf.mul(
              tf.reshape(mask, [1, 1, time, total]),
              tf.tensor4d(
                pad.flatMap((p) => Array.from({ length: total }, (_, j) => (j >= p ? 1 : 0))),
                [batch, 1, 1, total],
              ),
            ),
          ),
          -1e9,
        );
  // Embedding rows: of a 16-bit table, only the rows gathered are widened.
  const embed = (name: string, ids: tf.Tensor) => {
    const table = stored(name);
    const format = halfFormatOf(table);
    const flat = tf.reshape(ids, [-1]);
    const rows = format !== null ? widenHalfRows(table, flat, format) : table instanceof tf.Variable ? trainableRows(table, flat) : tf.gather(table, flat);
    return tf.reshape(rows, [batch, time, c.hiddenSize]);
  };
  let x: tf.Tensor = embed(embeddingName(c), tokens);
  // Rotary positions (the Llama family): padded rows share them, since rotary attention depends
  // only on the distance between a query and a key, so a row whose real tokens start at pad[r]
  // attends as it would from 0. Learned positions (GPT-2) are absolute: each padded row counts its
  // own from its first real token.
  const rotary = gpt2 ? null : rotaryTables(c, past, time);
  if (gpt2) {
    const positions = Array.from({ length: batch }, (_, r) => Array.from({ length: time }, (_, t) => Math.max(0, past + t - (pad?.[r] ?? 0))));
    x = tf.add(x, embed('transformer.wpe.weight', tf.tensor2d(positions, [batch, time], 'int32')));
  }
  const norm = (t: tf.Tensor, name: string) =>
    gpt2 ? layerNorm(t, get(`${name}.weight`), get(`${name}.bias`), c.normEps) : rmsNorm(t, get(`${name}.weight`), c.normEps);
  const group = c.heads / c.kvHeads;
  // The mask of every query row, once per group (the group's queries share the query axis below).
  const groupedNegative = group > 1 ? tf.tile(negative, negative.rank === 2 ? [group, 1] : [1, 1, group, 1]) : negative;
  const heads = (t: tf.Tensor, n: number) => tf.transpose(tf.reshape(t, [batch, time, n, c.headDim]), [0, 2, 1, 3]) as tf.Tensor4D;
  const kv: LayerKv[] = [];
  for (let l = 0; l < c.layers; l++) {
    let q: tf.Tensor4D, k: tf.Tensor4D, v: tf.Tensor4D;
    const p = gpt2 ? `transformer.h.${l}` : `model.layers.${l}`;
    const attnModule = gpt2 ? `${p}.attn` : `${p}.self_attn`;
    const h = norm(x, gpt2 ? `${p}.ln_1` : `${p}.input_layernorm`);
    if (gpt2) {
      const [q0, k0, v0] = tf.split(lin(h, `${attnModule}.c_attn`), 3, 2);
      [q, k, v] = [heads(q0, c.heads), heads(k0, c.heads), heads(v0, c.heads)];
    } else {
      q = heads(lin(h, `${attnModule}.q_proj`), c.heads);
      k = heads(lin(h, `${attnModule}.k_proj`), c.kvHeads);
      v = heads(lin(h, `${attnModule}.v_proj`), c.kvHeads);
      if (c.qkNorm) {
        q = rmsNorm(q, get(`${attnModule}.q_norm.weight`), c.normEps) as tf.Tensor4D;
        k = rmsNorm(k, get(`${attnModule}.k_norm.weight`), c.normEps) as tf.Tensor4D;
      }
      const { cos, sin } = rotary as { cos: tf.Tensor2D; sin: tf.Tensor2D };
      q = rotate(q, cos, sin) as tf.Tensor4D;
      k = rotate(k, cos, sin) as tf.Tensor4D;
    }
    if (cache !== null) {
      k = tf.concat([cache[l].k, k], 2);
      v = tf.concat([cache[l].v, v], 2);
    }
    kv.push({ k, v });
    // Grouped-query attention: each kv head serves `group` consecutive query heads (HF repeat_kv).
    // The group's queries are folded into the query axis ([B, kvHeads, group·time, dh]) so each kv
    // head is read once as it is: no copy of the keys and values per query head (on wasm such a
    // copy of the whole cache was most of a batched decoding step). The mask repeats per group.
    const qGrouped = group > 1 ? (tf.reshape(q, [batch, c.kvHeads, group * time, c.headDim]) as tf.Tensor4D) : q;
    const scores = tf.add(tf.mul(tf.matMul(qGrouped, k, false, true), 1 / Math.sqrt(c.headDim)), groupedNegative);
    const attended = tf.reshape(tf.matMul(tf.softmax(scores, -1), v), [batch, c.heads, time, c.headDim]);
    const merged = tf.reshape(tf.transpose(attended, [0, 2, 1, 3]), [batch, time, c.heads * c.headDim]);
    x = tf.add(x, lin(merged, gpt2 ? `${attnModule}.c_proj` : `${attnModule}.o_proj`));
    const h2 = norm(x, gpt2 ? `${p}.ln_2` : `${p}.post_attention_layernorm`);
    if (gpt2) x = tf.add(x, lin(geluNew(lin(h2, `${p}.mlp.c_fc`)), `${p}.mlp.c_proj`));
    else {
      const gate = lin(h2, `${p}.mlp.gate_proj`);
      const up = lin(h2, `${p}.mlp.up_proj`);
      x = tf.add(x, lin(tf.mul(tf.mul(gate, tf.sigmoid(gate)), up), `${p}.mlp.down_proj`));
    }
  }
  const final = norm(x, gpt2 ? 'transformer.ln_f' : 'model.norm');
  const head = c.tieEmbeddings ? get(embeddingName(c)) : get('lm_head.weight');
  const logits = linear(final, head) as tf.Tensor3D;
  release();
  return { logits, kv };
}

/**
 * The log-probs [B, T] of `targets` after `inputs` (both [B, T]) under logits / temperature, and
 * each position's entropy: what the policy loss reads (ppoLoss.ts `surrogateLoss`). Call inside a
 * tidy or a gradient function.
 */
export function decoderTargetScores(
  params: DecoderParams,
  c: DecoderConfig,
  inputs: tf.Tensor2D,
  targets: tf.Tensor2D,
  temperature: number,
  adapters?: Adapters,
): { logp: tf.Tensor2D; entropy: tf.Tensor2D } {
  if (!(temperature > 0) || !Number.isFinite(temperature)) throw new Error(`temperature must be a finite number > 0 (got ${temperature})`);
  const [batch, time] = inputs.shape;
  let logits: tf.Tensor = decoderForward(params, c, inputs, null, adapters).logits;
  if (temperature !== 1) logits = tf.div(logits, temperature);
  const logProbs = tf.logSoftmax(logits);
  const pick = tf.oneHot(tf.reshape(targets, [batch * time]), c.vocabSize);
  const logp = tf.reshape(tf.sum(tf.mul(tf.reshape(logProbs, [batch * time, c.vocabSize]), pick), -1), [batch, time]) as tf.Tensor2D;
  const entropy = tf.reshape(tf.neg(tf.sum(tf.mul(tf.exp(logProbs), logProbs), -1)), [batch, time]) as tf.Tensor2D;
  return { logp, entropy };
}

/** Picks the next id from one row of logits (over the vocabulary); it may wait (a stepper pauses there). */
export type ChooseToken = (logits: Float32Array) => number | Promise<number>;

/** The most likely id (the lowest on ties). */
export function argmaxId(logits: Float32Array): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

/** Greedy choice, as a ChooseToken. */
export const argmaxToken: ChooseToken = argmaxId;

/** Sampling at `temperature` from the whole distribution with `rng` (temperature 0: greedy), as a ChooseToken. */
export function samplingChooser(vocab: number, temperature: number, rng: Rng): ChooseToken {
  return temperature > 0 ? (logits) => sampleFromLogits(logits, 0, vocab, { temperature, topK: 0 }, rng).id : argmaxToken;
}

/**
 * Cached decoding of a batch of rows that advance together (the same length): `feed` runs only
 * the new tokens against the keys and values kept from earlier feeds, so a prefill and then one
 * token at a time give the logits of the full forward. With `adapters` (LoRA) the model decoded
 * is the adapted one.
 */
export class DecoderCache {
  private kv: LayerKv[] | null = null;
  /** Left padding of each row (generatePadded); null: rows of one length. */
  private pad: number[] | null = null;

  constructor(
    private readonly params: DecoderParams,
    private readonly config: DecoderConfig,
    private readonly adapters?: Adapters,
  ) {}

  /** Positions held so far. */
  get length(): number {
    return this.kv === null ? 0 : this.kv[0].k.shape[2];
  }

  /** The logits [B, n, V] of `tokens` (B rows × n new tokens each); the caller disposes them. */
  feed(tokens: readonly (readonly number[])[]): tf.Tensor3D {
    if (tokens.length === 0 || tokens.some((r) => r.length !== tokens[0].length || r.length === 0)) {
      throw new Error('DecoderCache.feed: every row needs the same number (≥ 1) of new tokens');
    }
    const old = this.kv;
    let out: { logits: tf.Tensor3D; kv: LayerKv[] } | null = null;
    tf.tidy(() => {
      const r = decoderForward(
        this.params,
        this.config,
        tf.tensor2d(
          tokens.map((row) => [...row]),
          undefined,
          'int32',
        ),
        old,
        this.adapters,
        this.pad ?? undefined,
      );
      r.kv.forEach((l) => (tf.keep(l.k), tf.keep(l.v)));
      tf.keep(r.logits);
      out = r;
    });
    const { logits, kv } = out as unknown as { logits: tf.Tensor3D; kv: LayerKv[] };
    old?.forEach((l) => (l.k.dispose(), l.v.dispose()));
    this.kv = kv;
    return logits;
  }

  /**
   * Tokens after feeding `first` (prompt tokens, or the one last sampled), each picked by `choose`
   * from its logits, one at a time until a stop id or `max` of them; the last token is returned,
   * not fed. `cut`: `max` ended it.
   */
  async generate(first: readonly number[], max: number, stop: ReadonlySet<number>, choose: ChooseToken): Promise<{ ids: number[]; cut: boolean }> {
    const ids: number[] = [];
    let next = first;
    while (ids.length < max) {
      const logits = this.feed([next]);
      const row = tf.tidy(() => tf.reshape(tf.slice(logits, [0, next.length - 1, 0], [1, 1, this.config.vocabSize]), [this.config.vocabSize]));
      const values = (await row.data()) as Float32Array;
      row.dispose();
      logits.dispose();
      const id = await choose(values);
      ids.push(id);
      if (stop.has(id)) return { ids, cut: false };
      next = [id];
    }
    return { ids, cut: true };
  }

  /**
   * `rows` continuations of one prompt decoded together: `first` is fed once (one row), its keys
   * and values copied to every row, then each row picks its tokens with its own `choose` until a
   * stop id or `max` of them, all rows advancing in lockstep (a row that has stopped is fed its
   * last token again and its logits are not read). Returns each row's tokens and whether `max`
   * ended it, and one cache per row holding exactly what that row read (`rowCaches`); this cache
   * is emptied.
   */
  async generateRows(
    first: readonly number[],
    max: number,
    stop: ReadonlySet<number>,
    chooses: readonly ChooseToken[],
  ): Promise<{ ids: number[][]; cut: boolean[]; rowCaches: DecoderCache[] }> {
    if (this.kv !== null) throw new Error('DecoderCache.generateRows starts from an empty cache');
    const rows = chooses.length;
    const V = this.config.vocabSize;
    const ids: number[][] = chooses.map(() => []);
    const done = chooses.map(() => false);
    // The prompt once (one row): its last position's logits, the same for every row; then its keys and values tiled to every row.
    const prefill = this.feed([first]);
    const lastRow = tf.tidy(() => tf.reshape(tf.slice(prefill, [0, first.length - 1, 0], [1, 1, V]), [V]));
    const promptLogits = (await lastRow.data()) as Float32Array;
    lastRow.dispose();
    prefill.dispose();
    const one = this.kv as unknown as LayerKv[];
    this.kv = one.map((l) => ({ k: tf.tile(l.k, [rows, 1, 1, 1]) as tf.Tensor4D, v: tf.tile(l.v, [rows, 1, 1, 1]) as tf.Tensor4D }));
    one.forEach((l) => (l.k.dispose(), l.v.dispose()));
    try {
      let next: number[] = [];
      let step = 0;
      let rowLogits: Float32Array | null = null;
      while (step < max && done.some((d) => !d)) {
        if (step > 0) {
          const out = this.feed(next.map((t) => [t]));
          const flat = tf.tidy(() => tf.reshape(out, [rows * V]));
          rowLogits = (await flat.data()) as Float32Array;
          flat.dispose();
          out.dispose();
        }
        next = [];
        for (let r = 0; r < rows; r++) {
          const last = ids[r].at(-1) ?? first[first.length - 1];
          if (done[r]) {
            next.push(last);
            continue;
          }
          const row = step === 0 ? promptLogits : (rowLogits as Float32Array).subarray(r * V, (r + 1) * V);
          const id = await chooses[r](row);
          ids[r].push(id);
          if (stop.has(id)) done[r] = true;
          next.push(id);
        }
        step++;
      }
    } catch (e) {
      // A chooser that throws (a stepper ended) leaves no tiled cache behind.
      this.dispose();
      throw e;
    }
    const cut = done.map((d) => !d);
    // Each row's cache: the prompt and its tokens but the last (picked, not fed).
    const kv = this.kv as unknown as LayerKv[];
    const rowCaches = ids.map((row, r) => {
      const length = first.length + Math.max(0, row.length - 1);
      const c = new DecoderCache(this.params, this.config, this.adapters);
      c.kv = kv.map((l) => ({
        k: tf.slice(l.k, [r, 0, 0, 0], [1, l.k.shape[1], length, l.k.shape[3]]) as tf.Tensor4D,
        v: tf.slice(l.v, [r, 0, 0, 0], [1, l.v.shape[1], length, l.v.shape[3]]) as tf.Tensor4D,
      }));
      return c;
    });
    this.dispose();
    return { ids, cut, rowCaches };
  }

  /**
   * Prompts of different lengths continued together: each row left-padded to the longest (the
   * padding masked out of attention; rotary attention reads only distances, so a row's start does
   * not matter), then
   * decoded in lockstep, row r picking with `chooses[r]` until a stop id or `maxes[r]` tokens.
   * Returns each row's tokens and whether its limit ended it; the cache is emptied.
   */
  async generatePadded(
    prompts: readonly (readonly number[])[],
    maxes: readonly number[],
    stop: ReadonlySet<number>,
    chooses: readonly ChooseToken[],
  ): Promise<{ ids: number[][]; cut: boolean[] }> {
    if (this.kv !== null) throw new Error('DecoderCache.generatePadded starts from an empty cache');
    const rows = prompts.length;
    const V = this.config.vocabSize;
    const longest = Math.max(...prompts.map((p) => p.length));
    this.pad = prompts.map((p) => longest - p.length);
    const ids: number[][] = prompts.map(() => []);
    const stopped = prompts.map(() => false);
    const done = maxes.map((m) => m <= 0);
    try {
      // Padding repeats a row's first token (any id would do: it is never attended to).
      let out = this.feed(prompts.map((p, r) => [...new Array<number>((this.pad as number[])[r]).fill(p[0]), ...p]));
      let at = longest - 1;
      if (done.every((d) => d)) out.dispose();
      while (done.some((d) => !d)) {
        const last = tf.tidy(() => tf.reshape(tf.slice(out, [0, at, 0], [rows, 1, V]), [rows * V]));
        const logits = (await last.data()) as Float32Array;
        last.dispose();
        out.dispose();
        const next: number[] = [];
        for (let r = 0; r < rows; r++) {
          if (!done[r]) {
            const id = await chooses[r](logits.subarray(r * V, (r + 1) * V));
            ids[r].push(id);
            if (stop.has(id)) stopped[r] = done[r] = true;
            else if (ids[r].length >= maxes[r]) done[r] = true;
          }
          next.push(ids[r].at(-1) ?? prompts[r][prompts[r].length - 1]);
        }
        if (done.every((d) => d)) break;
        out = this.feed(next.map((t) => [t]));
        at = 0;
      }
    } finally {
      this.dispose();
    }
    return { ids, cut: stopped.map((s) => !s) };
  }

  /** `generate` with the most likely token each time. */
  greedy(first: readonly number[], max: number, stop: ReadonlySet<number>): Promise<{ ids: number[]; cut: boolean }> {
    return this.generate(first, max, stop, argmaxToken);
  }

  dispose(): void {
    this.kv?.forEach((l) => (l.k.dispose(), l.v.dispose()));
    this.kv = null;
    this.pad = null;
  }
}
