/**
 * A small decoder of a Hugging Face family made from scratch: its config.json (the family's
 * transformers config, Qwen2Config / LlamaConfig / GPT2Config fields) and seeded random weights,
 * initialised as transformers' `_init_weights` does: every linear layer and embedding drawn from
 * normal(0, initializer_range), biases zero, norms one; GPT-2's residual projections (attn.c_proj,
 * mlp.c_proj) from normal(0, initializer_range / √(2·layers)) as GPT-2's paper scheme, so the
 * residual stream does not grow with depth. Embeddings are tied (the vocabulary is a large share
 * of a model this small).
 */
import type { FolderParts } from '../io/hfFolderParts';
import { Rng } from '../rng';
import type { PromptSetName } from '../protocol/prompts';
import { IM_END, PAD_TOKEN, protocolTokenizerConfig, protocolTokenizerJson } from '../tokenizer/protocolTokenizer';
import { decoderConfigFromHf, decoderTensorSpecs } from './decoder';

export const INIT_FAMILIES = ['qwen2', 'llama', 'gpt2'] as const;
export type InitFamily = (typeof INIT_FAMILIES)[number];

export interface InitSizes {
  layers: number;
  hiddenSize: number;
  heads: number;
  /** Key/value heads (grouped-query attention); GPT-2 has one per head. */
  kvHeads: number;
  intermediateSize: number;
  maxPositions: number;
}

/** About 3.3M parameters with the protocol tokenizer (13 MB as float32): a few million, as a model learning the protocol from scratch wants. */
export const INIT_DEFAULT_SIZES: Readonly<InitSizes> = { layers: 4, hiddenSize: 256, heads: 4, kvHeads: 2, intermediateSize: 768, maxPositions: 2048 };

/** GPT-2's MLP is 4 × hidden unless told (n_inner null), and it has no key/value heads of its own. */
export const GPT2_DEFAULT_SIZES: Readonly<InitSizes> = {
  ...INIT_DEFAULT_SIZES,
  kvHeads: INIT_DEFAULT_SIZES.heads,
  intermediateSize: 4 * INIT_DEFAULT_SIZES.hiddenSize,
};

/** The size fields a family does not have: given, they are refused rather than ignored. */
export const FAMILY_LACKS: Readonly<Record<InitFamily, readonly (keyof InitSizes)[]>> = { qwen2: [], llama: [], gpt2: ['kvHeads'] };

/** transformers' default initializer_range for all three families. */
export const INITIALIZER_RANGE = 0.02;

export interface SpecialIds {
  bos: number;
  eos: number;
  pad: number;
}

/**
 * Why sizes do not fit their family (heads dividing the width, kv heads the heads, an even head
 * size for rotary positions), each size called by `name` (the CLI names its flags); null when they fit.
 */
export function initSizesError(family: InitFamily, s: InitSizes, name: (field: keyof InitSizes) => string = (f) => f): string | null {
  if (s.hiddenSize % s.heads !== 0) return `${name('hiddenSize')} ${s.hiddenSize} must be a multiple of ${name('heads')} ${s.heads}`;
  if (family === 'gpt2') return null;
  if (s.heads % s.kvHeads !== 0) return `${name('heads')} ${s.heads} must be a multiple of ${name('kvHeads')} ${s.kvHeads}`;
  if ((s.hiddenSize / s.heads) % 2 !== 0)
    return `the head size ${name('hiddenSize')} / ${name('heads')} = ${s.hiddenSize / s.heads} must be even (rotary positions turn pairs)`;
  return null;
}

/** The family's config.json for these sizes and tokenizer. */
export function initHfConfig(family: InitFamily, s: InitSizes, vocabSize: number, ids: SpecialIds): Record<string, unknown> {
  const error = initSizesError(family, s);
  if (error !== null) throw new Error(error);
  const common = {
    vocab_size: vocabSize,
    bos_token_id: ids.bos,
    eos_token_id: ids.eos,
    pad_token_id: ids.pad,
    tie_word_embeddings: true,
    initializer_range: INITIALIZER_RANGE,
    use_cache: true,
    torch_dtype: 'float32',
  };
  if (family === 'gpt2') {
    return {
      model_type: 'gpt2',
      architectures: ['GPT2LMHeadModel'],
      n_embd: s.hiddenSize,
      n_layer: s.layers,
      n_head: s.heads,
      n_inner: s.intermediateSize,
      n_positions: s.maxPositions,
      activation_function: 'gelu_new',
      layer_norm_epsilon: 1e-5,
      // The trainer here has no dropout; a model that had it in transformers would train differently.
      resid_pdrop: 0,
      embd_pdrop: 0,
      attn_pdrop: 0,
      scale_attn_weights: true,
      ...common,
    };
  }
  const attention = {
    hidden_size: s.hiddenSize,
    intermediate_size: s.intermediateSize,
    num_hidden_layers: s.layers,
    num_attention_heads: s.heads,
    num_key_value_heads: s.kvHeads,
    head_dim: s.hiddenSize / s.heads,
    max_position_embeddings: s.maxPositions,
    hidden_act: 'silu',
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    attention_dropout: 0,
  };
  if (family === 'qwen2') return { model_type: 'qwen2', architectures: ['Qwen2ForCausalLM'], ...attention, use_sliding_window: false, ...common };
  return { model_type: 'llama', architectures: ['LlamaForCausalLM'], ...attention, attention_bias: false, mlp_bias: false, ...common };
}

/** The weights a config needs, seeded, as transformers initialises them (see the file's head). */
export function initHfTensors(config: Record<string, unknown>, seed: number): { name: string; shape: number[]; data: Float32Array }[] {
  const c = decoderConfigFromHf(config);
  const rng = new Rng(seed);
  const residual = INITIALIZER_RANGE / Math.sqrt(2 * c.layers);
  return decoderTensorSpecs(c).map(({ name, shape }) => {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    const isNorm = /norm\.weight$|ln_[12f]\.weight$/.test(name);
    if (isNorm) data.fill(1);
    else if (!name.endsWith('.bias')) {
      const std = c.family === 'gpt2' && name.endsWith('c_proj.weight') ? residual : INITIALIZER_RANGE;
      for (let i = 0; i < data.length; i++) data[i] = std * rng.normal();
    }
    return { name, shape, data };
  });
}

/**
 * The whole folder: the protocol tokenizer (tokenizer/protocolTokenizer.ts) with its chat template,
 * the family's config sized to its vocabulary, the seeded weights, and a generation config that
 * stops at the end of a turn.
 */
export function initHfFolder(family: InitFamily, sizes: InitSizes, seed: number, prompts: PromptSetName = 'short'): FolderParts {
  const tokenizer = protocolTokenizerJson();
  const vocab = (tokenizer.model as { vocab: Record<string, number> }).vocab;
  const ids: SpecialIds = { bos: vocab[PAD_TOKEN], eos: vocab[IM_END], pad: vocab[PAD_TOKEN] };
  const config = initHfConfig(family, sizes, Object.keys(vocab).length, ids);
  return {
    config,
    tokenizer,
    tokenizerConfig: protocolTokenizerConfig(sizes.maxPositions, prompts),
    generationConfig: { bos_token_id: ids.bos, eos_token_id: ids.eos, pad_token_id: ids.pad },
    tensors: new Map(initHfTensors(config, seed).map(({ name, ...t }) => [name, t])),
  };
}

/** Parameters of a set of tensors. */
export const tensorParameterCount = (tensors: readonly { shape: readonly number[] }[]): number =>
  tensors.reduce((n, t) => n + t.shape.reduce((a, b) => a * b, 1), 0);
