/**
 * A tiny Llama-family decoder (qwen3: q/k norms, grouped-query attention, an untied head) with
 * random float16 or bfloat16 weights, and a model folder's weights as bfloat16, for the tests of
 * 16-bit weights held 16-bit.
 */
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type DecodedTensor, decodeSafetensors, encodeSafetensors, widenBits } from '../src/core/io/safetensors';
import * as tf from '@tensorflow/tfjs';
import { type DecoderConfig, type DecoderParams, decoderConfigFromHf, decoderLogits, decoderTargetScores, decoderTensorSpecs } from '../src/core/model/decoder';
import type { Lora } from '../src/core/model/lora';
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

/** A copy of the model folder `from` (its files; folders inside are left) in `to` with its float32 weights truncated to bfloat16 (how checkpoints are usually saved); other files as they are. */
export async function bfloat16Folder(from: string, to: string): Promise<void> {
  await mkdir(to, { recursive: true });
  for (const entry of await readdir(from, { withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const name = entry.name;
    const bytes = new Uint8Array(await readFile(join(from, name)));
    if (name !== 'model.safetensors') await writeFile(join(to, name), bytes);
    else {
      const tensors = [...decodeSafetensors(bytes).tensors].map(([n, t]) => ({
        name: n,
        shape: t.shape,
        dtype: 'BF16' as const,
        bits: Uint16Array.from(new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length), (w) => w >>> 16),
      }));
      await writeFile(join(to, name), encodeSafetensors(tensors));
    }
  }
}

/**
 * The next-token log-probs' sum over `ids` (rows of equal length) under the model with `lora`,
 * its gradient for each adapter matrix, and the base model's logits, all read back.
 */
export async function loraScores(
  params: DecoderParams,
  config: DecoderConfig,
  lora: Lora,
  ids: number[][],
): Promise<{ loss: number; grads: Float32Array[]; logits: Float32Array }> {
  const out = tf.tidy(() => {
    const x = tf.tensor2d(
      ids.map((r) => r.slice(0, -1)),
      undefined,
      'int32',
    );
    const y = tf.tensor2d(
      ids.map((r) => r.slice(1)),
      undefined,
      'int32',
    );
    const { value, grads } = tf.variableGrads(() => tf.sum(decoderTargetScores(params, config, x, y, 1, lora).logp) as tf.Scalar, [...lora.params.values()]);
    return { value, grads: Object.values(grads), logits: decoderLogits(params, config, x) };
  });
  const read = async (t: tf.Tensor) => (await t.data()) as Float32Array;
  const result = { loss: (await read(out.value))[0], grads: await Promise.all(out.grads.map(read)), logits: await read(out.logits) };
  tf.dispose([out.value, ...out.grads, out.logits]);
  return result;
}
