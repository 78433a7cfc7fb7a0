/**
 * ModelConfig ↔ Hugging Face GPT-2 `config.json`.
 *
 * Export writes every field `GPT2Config` would write for this architecture, with dropout 0
 * and the switches that change the forward pass (activation, attention scaling, tied head)
 * pinned to what our model computes, so `GPT2LMHeadModel.from_pretrained(dir)` reproduces our
 * logits. Import accepts any GPT-2 config whose forward pass is the one we implement and
 * rejects, naming the field, any that would silently compute something else.
 */
import { validateModelConfig, type ModelConfig } from '../model/config';
import { T } from '../tokenizer/vocab';

export interface HfGpt2Config {
  architectures: ['GPT2LMHeadModel'];
  model_type: 'gpt2';
  vocab_size: number;
  n_positions: number;
  n_ctx: number;
  n_embd: number;
  n_layer: number;
  n_head: number;
  n_inner: null;
  activation_function: 'gelu_new';
  resid_pdrop: number;
  embd_pdrop: number;
  attn_pdrop: number;
  layer_norm_epsilon: number;
  initializer_range: number;
  summary_type: 'cls_index';
  summary_use_proj: boolean;
  summary_activation: null;
  summary_proj_to_labels: boolean;
  summary_first_dropout: number;
  scale_attn_weights: true;
  scale_attn_by_inverse_layer_idx: false;
  reorder_and_upcast_attn: false;
  add_cross_attention: false;
  tie_word_embeddings: true;
  use_cache: boolean;
  bos_token_id: number;
  eos_token_id: number;
  pad_token_id: number;
  torch_dtype: 'float32';
}

export function toHfConfig(c: ModelConfig): HfGpt2Config {
  validateModelConfig(c);
  return {
    architectures: ['GPT2LMHeadModel'],
    model_type: 'gpt2',
    vocab_size: c.vocabSize,
    n_positions: c.nPositions,
    // Older transformers sized the causal-mask buffer from n_ctx; keep it equal.
    n_ctx: c.nPositions,
    n_embd: c.nEmbd,
    n_layer: c.nLayer,
    n_head: c.nHead,
    n_inner: null, // HF reads null as 4 * n_embd, which is our MLP width
    activation_function: 'gelu_new',
    resid_pdrop: 0,
    embd_pdrop: 0,
    attn_pdrop: 0,
    layer_norm_epsilon: c.layerNormEps,
    initializer_range: 0.02,
    summary_type: 'cls_index',
    summary_use_proj: true,
    summary_activation: null,
    summary_proj_to_labels: true,
    summary_first_dropout: 0,
    scale_attn_weights: true,
    scale_attn_by_inverse_layer_idx: false,
    reorder_and_upcast_attn: false,
    add_cross_attention: false,
    tie_word_embeddings: true,
    use_cache: true,
    bos_token_id: T.eos,
    eos_token_id: T.eos,
    pad_token_id: T.pad,
    torch_dtype: 'float32',
  };
}

function fail(field: string, message: string): never {
  throw new Error(`config.json: ${field} ${message}`);
}

const show = (v: unknown) => (v === undefined ? 'missing' : JSON.stringify(v));

/** Parses a GPT-2 config.json object; throws a message naming the offending field. */
export function fromHfConfig(json: unknown): ModelConfig {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new Error('config.json: must be a JSON object');
  }
  const j = json as Record<string, unknown>;

  if (j.model_type !== 'gpt2') fail('model_type', `must be "gpt2" (got ${show(j.model_type)})`);
  if (j.architectures !== undefined) {
    if (!Array.isArray(j.architectures) || !j.architectures.includes('GPT2LMHeadModel')) {
      fail('architectures', `must include "GPT2LMHeadModel" (got ${show(j.architectures)})`);
    }
  }

  const int = (field: string, max: number): number => {
    const v = j[field];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) {
      fail(field, `must be an integer in [1, ${max}] (got ${show(v)})`);
    }
    return v as number;
  };
  const nLayer = int('n_layer', 48);
  const nEmbd = int('n_embd', 4096);
  const nHead = int('n_head', 64);
  const nPositions = int('n_positions', 8192);
  const vocabSize = int('vocab_size', 1 << 20);
  if (nEmbd % nHead !== 0) fail('n_embd', `(${nEmbd}) must be divisible by n_head (${nHead})`);
  if (j.n_ctx !== undefined && j.n_ctx !== nPositions) {
    fail('n_ctx', `must equal n_positions (${nPositions}) (got ${show(j.n_ctx)})`);
  }

  // Fields with HF defaults: absent means the default, which is what we compute.
  // Only an absent field takes the default: HF reads null as None, which GPT2 cannot run with.
  const eps = j.layer_norm_epsilon === undefined ? 1e-5 : j.layer_norm_epsilon;
  if (typeof eps !== 'number' || !(eps > 0 && eps < 1)) {
    fail('layer_norm_epsilon', `must be a number in (0, 1) (got ${show(j.layer_norm_epsilon)})`);
  }
  const act = j.activation_function === undefined ? 'gelu_new' : j.activation_function;
  if (act !== 'gelu_new') {
    fail('activation_function', `must be "gelu_new" (the tanh GELU this model uses) (got ${show(act)})`);
  }
  if (j.n_inner !== undefined && j.n_inner !== null && j.n_inner !== 4 * nEmbd) {
    fail('n_inner', `must be null or 4 * n_embd = ${4 * nEmbd} (got ${show(j.n_inner)})`);
  }
  const mustBe = (field: string, expected: boolean, why: string) => {
    const v = j[field];
    if (v !== undefined && v !== expected) fail(field, `must be ${expected} (${why}) (got ${show(v)})`);
  };
  mustBe('scale_attn_weights', true, 'attention scores are divided by sqrt(head size)');
  mustBe('scale_attn_by_inverse_layer_idx', false, 'no per-layer attention scaling');
  mustBe('tie_word_embeddings', true, 'the LM head is tied to transformer.wte.weight');
  mustBe('add_cross_attention', false, 'decoder-only model');
  for (const field of ['resid_pdrop', 'embd_pdrop', 'attn_pdrop']) {
    const v = j[field];
    // Dropout is off at inference, so any valid rate loads the same weights.
    if (v !== undefined && (typeof v !== 'number' || !(v >= 0 && v < 1))) {
      fail(field, `must be a number in [0, 1) (got ${show(v)})`);
    }
  }

  const config: ModelConfig = { nLayer, nEmbd, nHead, nPositions, vocabSize, layerNormEps: eps as number };
  try {
    validateModelConfig(config);
  } catch (e) {
    throw new Error(`config.json: ${(e as Error).message}`);
  }
  return config;
}
