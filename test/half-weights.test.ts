/**
 * 16-bit weights held 16-bit (src/core/model/halfWeights.ts): the widening kernel gives every float16 and
 * bfloat16 pattern's exact f32 value on cpu and wasm, and a decoder whose matrices are held
 * packed gives the float32-held decoder's logits, cached tokens, LoRA gradients, merged weights
 * and full-fine-tuning variables, in half the memory. (WebGPU's kernel: test/webgpu-node.test.ts.)
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, describe, expect, it } from 'vitest';
import { initBackend } from '../src/runtime/backend';
import { widenBits } from '../src/core/io/safetensors';
import { Rng } from '../src/core/rng';
import { DecoderCache, decoderLogits, decoderParamBytes, decoderParams, decoderTensorSpecs } from '../src/core/model/decoder';
import { halfFormatOf, packHalves, widenHalf, widenHalfRows } from '../src/core/model/halfWeights';
import { Lora } from '../src/core/model/lora';
import { fullPolicy } from '../src/core/policyModel';
import type { HfTokenizer } from '../src/core/tokenizer/hfTokenizer';
import { TINY, loraScores, randomHalfTensors } from './halfDecoder';

const ALL = Uint16Array.from({ length: 65536 }, (_, i) => i);

/** Equal as f32 bit patterns, NaNs equal whatever their payload. */
function sameValues(a: Float32Array, b: Float32Array): boolean {
  return a.length === b.length && a.every((x, i) => Object.is(x, b[i]) || (Number.isNaN(x) && Number.isNaN(b[i])));
}

afterAll(() => initBackend('wasm'));

for (const backend of ['cpu', 'wasm'] as const) {
  describe(`16-bit weights on ${backend}`, () => {
    it('widens every float16 and bfloat16 pattern to its exact value, element 2k from the low half', async () => {
      await initBackend(backend);
      for (const [format, dtype] of [
        ['f16', 'F16'],
        ['bf16', 'BF16'],
      ] as const) {
        const packed = tf.tensor1d(packHalves(ALL), 'int32');
        const wide = widenHalf(packed, format);
        expect(wide.dtype).toBe('float32');
        expect(wide.shape).toEqual([65536]);
        expect(sameValues((await wide.data()) as Float32Array, widenBits(dtype, ALL))).toBe(true);
        tf.dispose([packed, wide]);
      }
      // Rank 2: [rows, cols / 2] → [rows, cols].
      const m = tf.tensor2d(packHalves(Uint16Array.of(0x3c00, 0x4000, 0xc200, 0x0000)), [2, 1], 'int32');
      const w = widenHalf(m, 'f16');
      expect(w.shape).toEqual([2, 2]);
      expect(await w.array()).toEqual([
        [1, 2],
        [-3, 0],
      ]);
      tf.dispose([m, w]);
      expect(() => widenHalf(tf.tensor1d([1], 'float32'), 'f16')).toThrow(/packed patterns must be int32/);
      // Rows of a packed matrix (an embedding lookup): those rows, in order, repeats included.
      const table = tf.tensor2d(packHalves(ALL), [1024, 32], 'int32');
      const ids = tf.tensor1d([5, 1023, 0, 5], 'int32');
      const rows = widenHalfRows(table, ids, 'f16');
      expect(rows.shape).toEqual([4, 64]);
      const got = (await rows.data()) as Float32Array;
      const all = widenBits('F16', ALL);
      [5, 1023, 0, 5].forEach((id, r) => expect(sameValues(got.subarray(64 * r, 64 * (r + 1)), all.subarray(64 * id, 64 * (id + 1)))).toBe(true));
      expect(() => widenHalfRows(table, tf.tensor1d([1024], 'int32'), 'f16')).toThrow('row id 1024 is outside the 1024 rows');
      tf.dispose([table, ids, rows]);
    });

    for (const dtype of ['F16', 'BF16'] as const) {
      it(`a decoder with its ${dtype} matrices held 16-bit equals the float32-held one, in half the memory`, async () => {
        await initBackend(backend);
        const tensors = randomHalfTensors(TINY, dtype, dtype === 'F16' ? 3 : 4);
        const wide = decoderParams(TINY, tensors);
        const before = tf.memory().numBytes;
        const half = decoderParams(TINY, tensors, 'half');
        const heldBytes = tf.memory().numBytes - before;
        const lora = Lora.init(TINY, { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj', 'down_proj'] }, 1);
        const loraBytes = [...lora.params.values()].reduce((n, v) => n + v.size * 4, 0);
        try {
          // Every matrix is packed; vectors (norms) stay float32.
          const matrices = decoderTensorSpecs(TINY).filter((s) => s.shape.length === 2);
          expect(decoderParamBytes(half).halfTensors).toBe(matrices.length);
          expect(halfFormatOf(half.get('model.embed_tokens.weight') as tf.Tensor)).toBe(dtype === 'F16' ? 'f16' : 'bf16');
          expect(half.get('model.norm.weight')?.dtype).toBe('float32');
          const matrixBytes = matrices.reduce((n, s) => n + s.shape[0] * s.shape[1] * 4, 0);
          expect(decoderParamBytes(wide).bytes - decoderParamBytes(half).bytes).toBe(matrixBytes / 2);
          expect(heldBytes).toBe(decoderParamBytes(half).bytes);

          // The same logits, and the same greedy tokens through the cache.
          const rng = new Rng(9);
          const ids = Array.from({ length: 2 }, () => Array.from({ length: 7 }, () => rng.int(0, TINY.vocabSize - 1)));
          const a = await loraScores(wide, TINY, lora, ids);
          const b = await loraScores(half, TINY, lora, ids);
          expect(b.loss).toBe(a.loss);
          expect(b.grads).toEqual(a.grads);
          expect(a.grads.some((g) => g.some((v) => v !== 0))).toBe(true);
          const greedy = async (p: typeof wide) => {
            const cache = new DecoderCache(p, TINY);
            try {
              return (await cache.greedy(ids[0], 8, new Set())).ids;
            } finally {
              cache.dispose();
            }
          };
          expect(await greedy(half)).toEqual(await greedy(wide));

          // Merged weights and full fine-tuning's variables read the widened values.
          const [m32, m16] = [await lora.merged(wide), await lora.merged(half)];
          for (const [name, v] of m32) expect(sameValues(m16.get(name) as Float32Array, v)).toBe(true);
          const full = fullPolicy({ config: TINY, params: half, tokenizer: null as unknown as HfTokenizer });
          const embed = full.trainable.get('model.embed_tokens.weight') as tf.Variable;
          expect(embed.dtype).toBe('float32');
          expect(embed.shape).toEqual([TINY.vocabSize, TINY.hiddenSize]);
          expect(sameValues((await embed.data()) as Float32Array, tensors.get('model.embed_tokens.weight')!.data)).toBe(true);
          full.trainable.forEach((v) => v.dispose());
          // Nothing of the widening outlives the variables.
          expect(tf.memory().numBytes).toBe(before + heldBytes + loraBytes);

          // A forward (no gradient recorded) frees each widened matrix after its product: beyond the
          // float32-held model's own transients it holds at most one widened matrix at a time.
          const peak = async (p: typeof wide) =>
            (await tf.profile(() => tf.tidy(() => decoderLogits(p, TINY, tf.tensor2d(ids, undefined, 'int32'))).dispose())).peakBytes - tf.memory().numBytes;
          const largest = Math.max(...matrices.map((m) => m.shape[0] * m.shape[1] * 4));
          expect((await peak(half)) - (await peak(wide))).toBeLessThanOrEqual(largest);
        } finally {
          lora.dispose();
          wide.forEach((t) => t.dispose());
          half.forEach((t) => t.dispose());
        }
      });
    }
  });
}
