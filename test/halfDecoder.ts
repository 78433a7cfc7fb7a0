/**
 * A tiny Llama-family decoder (qwen3: q/k norms, grouped-query attention, an untied head) with
 * random float16 or bfloat16 weights, for the tests of 16-bit weights held 16-bit.
 */
import { type DecodedTensor, widenBits } from '../src/core/io/safetensors';
import { type DecoderConfig, decoderConfigFromHf, decoderTensorSpecs } from '../src/core/model/decoder';
import { Rng } from '../src/core/rng';

export const TINY: DecoderConfig = decoderConfigFromHf({
  model_type: 'qwen3',
  vocab_size: 48,
  hidden_size: 16,
  intermediate_size: 24,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  max_position_embeddings: 64,
  tie_word_embeddings: false,
});

/** Random 16-bit patterns of moderate values (|x| in [2^-7, 2)) for every tensor the config needs, F16 or BF16. */
export function randomHalfTensors(c: DecoderConfig, dtype: 'F16' | 'BF16', seed: number): Map<string, DecodedTensor> {
  const rng = new Rng(seed);
  const pattern = (): number => {
    const sign = rng.int(0, 1) << 15;
    // F16: exponent field 8..15 (2^-7 .. 2^0); BF16: 120..127, the same range.
    return dtype === 'F16' ? sign | (rng.int(8, 15) << 10) | rng.int(0, 1023) : sign | (rng.int(120, 127) << 7) | rng.int(0, 127);
  };
  const out = new Map<string, DecodedTensor>();
  for (const { name, shape } of decoderTensorSpecs(c)) {
    const bits = Uint16Array.from({ length: shape.reduce((a, b) => a * b, 1) }, pattern);
    out.set(name, { dtype, shape, bits, data: widenBits(dtype, bits) });
  }
  return out;
}
