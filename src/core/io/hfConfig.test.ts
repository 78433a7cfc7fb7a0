import { describe, expect, it } from 'vitest';
import { PRESETS, type ModelConfig } from '../model/config';
import { T, VOCAB_SIZE } from '../tokenizer/vocab';
import { fromHfConfig, toHfConfig } from './hfConfig';

const config: ModelConfig = { nLayer: 3, nEmbd: 48, nHead: 6, nPositions: 40, vocabSize: VOCAB_SIZE, layerNormEps: 1e-5 };

describe('toHfConfig', () => {
  it('writes the GPT-2 fields transformers needs to rebuild the same forward pass', () => {
    const hf = toHfConfig(config);
    expect(hf).toMatchObject({
      model_type: 'gpt2',
      architectures: ['GPT2LMHeadModel'],
      n_layer: 3,
      n_embd: 48,
      n_head: 6,
      n_positions: 40,
      n_ctx: 40,
      vocab_size: VOCAB_SIZE,
      n_inner: null,
      activation_function: 'gelu_new',
      layer_norm_epsilon: 1e-5,
      resid_pdrop: 0,
      embd_pdrop: 0,
      attn_pdrop: 0,
      tie_word_embeddings: true,
      scale_attn_weights: true,
      scale_attn_by_inverse_layer_idx: false,
      reorder_and_upcast_attn: false,
      bos_token_id: T.eos,
      eos_token_id: T.eos,
      pad_token_id: 0,
    });
    // Survives a JSON round trip unchanged (what config.json stores).
    expect(JSON.parse(JSON.stringify(hf))).toEqual(hf);
  });

  it('round-trips every preset and a custom config', () => {
    for (const c of [...Object.values(PRESETS), config, { ...config, layerNormEps: 1e-6 }]) {
      expect(fromHfConfig(JSON.parse(JSON.stringify(toHfConfig(c))))).toEqual(c);
    }
  });
});

describe('fromHfConfig', () => {
  const base = () => toHfConfig(config) as unknown as Record<string, unknown>;

  it('fills HF defaults for absent optional fields', () => {
    const minimal = { model_type: 'gpt2', n_layer: 3, n_embd: 48, n_head: 6, n_positions: 40, vocab_size: VOCAB_SIZE };
    expect(fromHfConfig(minimal)).toEqual(config);
  });

  it('accepts n_inner = 4 * n_embd and any dropout rate (dropout is off at inference)', () => {
    expect(fromHfConfig({ ...base(), n_inner: 192, attn_pdrop: 0.1, resid_pdrop: 0.1 })).toEqual(config);
  });

  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['a non-GPT-2 model', { model_type: 'llama' }, /config.json: model_type must be "gpt2" \(got "llama"\)/],
    ['another activation', { activation_function: 'relu' }, /config.json: activation_function must be "gelu_new" .*\(got "relu"\)/],
    ['exact gelu', { activation_function: 'gelu' }, /activation_function must be "gelu_new"/],
    ['a different MLP width', { n_inner: 100 }, /config.json: n_inner must be null or 4 \* n_embd = 192 \(got 100\)/],
    ['a missing n_layer', { n_layer: undefined }, /config.json: n_layer must be an integer in \[1, 48\] \(got missing\)/],
    ['a fractional n_embd', { n_embd: 47.5 }, /config.json: n_embd must be an integer in \[1, 4096\] \(got 47.5\)/],
    ['a string vocab_size', { vocab_size: '53' }, /config.json: vocab_size must be an integer .*\(got "53"\)/],
    ['n_embd not divisible by n_head', { n_head: 5 }, /config.json: n_embd \(48\) must be divisible by n_head \(5\)/],
    ['n_ctx different from n_positions', { n_ctx: 1024 }, /config.json: n_ctx must equal n_positions \(40\) \(got 1024\)/],
    ['a bad epsilon', { layer_norm_epsilon: 0 }, /config.json: layer_norm_epsilon must be a number in \(0, 1\) \(got 0\)/],
    ['an untied head', { tie_word_embeddings: false }, /config.json: tie_word_embeddings must be true/],
    ['unscaled attention', { scale_attn_weights: false }, /config.json: scale_attn_weights must be true/],
    ['per-layer attention scaling', { scale_attn_by_inverse_layer_idx: true }, /scale_attn_by_inverse_layer_idx must be false/],
    ['a bad dropout', { attn_pdrop: 2 }, /config.json: attn_pdrop must be a number in \[0, 1\) \(got 2\)/],
    ['a wrong architecture', { architectures: ['GPT2Model'] }, /config.json: architectures must include "GPT2LMHeadModel"/],
    ['too many layers', { n_layer: 100 }, /config.json: n_layer must be an integer in \[1, 48\] \(got 100\)/],
  ];
  it.each(cases)('rejects %s, naming the field', (_label, patch, message) => {
    expect(() => fromHfConfig({ ...base(), ...patch })).toThrow(message);
  });

  it('rejects a config.json that is not an object', () => {
    expect(() => fromHfConfig([1])).toThrow(/config.json: must be a JSON object/);
  });
});
