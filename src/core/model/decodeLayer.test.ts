/**
 * The fused decode layer (`SelfcestDecodeLayer`, wasm) against the same decoder with each layer
 * composed of tfjs ops: same logits step by step, for the tiny preset, for a width that is not a
 * multiple of the SIMD lanes, and for weights large enough to drive GELU and softmax into their
 * tails; the kernel really runs; bad inputs get errors naming the kernel.
 */
import * as tf from '@tensorflow/tfjs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { Rng } from '../rng';
import { type ModelConfig, PRESETS } from './config';
import { BatchedDecoder } from './decode';
import { DECODE_LAYER_KERNEL, ROW_NORM_KERNEL, decodeLayer, fusedDecodeLayerAvailable, rowNorm, setFusedDecodeLayer } from './decodeLayer';
import { deriveWeights } from './decodeWeights';
import { type GPTParams, initParams, paramsFromArrays, paramsToArrays } from './params';

async function scaledParams(config: ModelConfig, seed: number, scale: number): Promise<GPTParams> {
  const base = initParams(config, seed);
  const arrays = await paramsToArrays(base);
  base.forEach((v) => v.dispose());
  for (const [name, values] of arrays) if (!name.includes('.ln_')) for (let i = 0; i < values.length; i++) values[i] *= scale;
  return paramsFromArrays(config, arrays);
}

/** Prompts, then `steps` single tokens for every slot; the logits of every feed, and which kernels ran in the last step. */
async function run(params: GPTParams, config: ModelConfig, fused: boolean, steps: number): Promise<{ logits: Float32Array[]; kernels: string[] }> {
  const was = setFusedDecodeLayer(fused);
  const rng = new Rng(5);
  const dec = new BatchedDecoder(params, config);
  try {
    const slots = Array.from({ length: 6 }, () => dec.open());
    const logits = [
      await dec.feed(
        slots,
        slots.map((_, i) => Array.from({ length: 2 + i }, () => rng.int(0, config.vocabSize - 1))),
      ),
    ];
    for (let s = 0; s < steps; s++)
      logits.push(
        await dec.feed(
          slots,
          slots.map(() => [rng.int(0, config.vocabSize - 1)]),
        ),
      );
    const info = await tf.profile(() =>
      dec.feed(
        slots,
        slots.map(() => [1]),
      ),
    );
    return { logits, kernels: info.kernelNames };
  } finally {
    dec.dispose();
    setFusedDecodeLayer(was);
  }
}

function maxRelDiff(a: Float32Array, b: Float32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]) / Math.max(1, Math.abs(b[i])));
  return m;
}

beforeAll(async () => {
  await initBackend('wasm');
});

afterEach(() => {
  setFusedDecodeLayer(true);
});

describe('SelfcestDecodeLayer (wasm)', () => {
  it('is available on wasm', () => {
    expect(fusedDecodeLayerAvailable()).toBe(true);
  });

  it.each([
    ['tiny', { ...PRESETS.tiny, nPositions: 64 }, 4],
    ['d = 18, 3 heads of 6 (scalar tails)', { ...PRESETS.tiny, nEmbd: 18, nHead: 3, nPositions: 64 }, 4],
    ['tiny, weights ×12 (GELU and softmax tails)', { ...PRESETS.tiny, nPositions: 64 }, 12],
  ] as const)('gives the composed layers’ logits at every step: %s', async (_name, config, scale) => {
    const params = await scaledParams(config, 3, scale);
    const fused = await run(params, config, true, 12);
    const composed = await run(params, config, false, 12);
    expect(fused.kernels).toContain(DECODE_LAYER_KERNEL);
    expect(fused.kernels).toContain(ROW_NORM_KERNEL);
    expect(composed.kernels).not.toContain(DECODE_LAYER_KERNEL);
    fused.logits.forEach((l, i) => expect(maxRelDiff(l, composed.logits[i]), `feed ${i}`).toBeLessThan(2e-5));
    params.forEach((v) => v.dispose());
  });

  it('rowNorm equals the composed normalisation', () => {
    const x = tf.tensor2d(
      Array.from({ length: 5 * 19 }, (_, i) => Math.sin(i * 1.7) * (i % 7) * 10),
      [5, 19],
    );
    const ours = rowNorm(x, 1e-5);
    const centred = tf.sub(x, tf.mean(x, -1, true));
    const ref = tf.mul(centred, tf.rsqrt(tf.add(tf.mean(tf.square(centred), -1, true), 1e-5)));
    expect(maxRelDiff(ours.dataSync() as Float32Array, ref.dataSync() as Float32Array)).toBeLessThan(1e-5);
    tf.dispose([x, ours, centred, ref]);
  });

  it('rejects inputs that do not fit, naming the kernel and the shapes', async () => {
    const config = { ...PRESETS.tiny, nPositions: 64 };
    const params = initParams(config, 1);
    const w = deriveWeights(params, config);
    const d = config.nEmbd;
    const keys = tf.zeros([2, 4, 32, 16]) as tf.Tensor4D;
    const values = tf.zeros([2, 4, 16, 32]) as tf.Tensor4D;
    const mask = tf.zeros([2, 1, 32]);
    const slots = tf.tensor2d([0, 0, 1, 0], [2, 2], 'int32');
    const before = tf.memory().numTensors;
    expect(() => decodeLayer(tf.zeros([3, d]) as tf.Tensor2D, w.layers[0], keys, values, mask, slots, 1e-5)).toThrow(
      /SelfcestDecodeLayer: x \[3,64\] and keys \[2,4,32,16\] do not fit/,
    );
    expect(() => decodeLayer(tf.zeros([2, d]) as tf.Tensor2D, w.layers[0], keys, tf.zeros([2, 4, 32, 16]) as tf.Tensor4D, mask, slots, 1e-5)).toThrow(
      /valuesT \[2,4,32,16\] does not match/,
    );
    expect(() => decodeLayer(tf.zeros([2, d]) as tf.Tensor2D, w.layers[0], keys, values, tf.zeros([2, 1, 16]), slots, 1e-5)).toThrow(/mask \[2,1,16\]/);
    expect(() => decodeLayer(tf.zeros([2, d]) as tf.Tensor2D, w.layers[0], keys, values, mask, tf.tensor2d([0, 0, 5, 0], [2, 2], 'int32'), 1e-5)).toThrow(
      /slot 1 \(row 5, position 0\) is outside the cache/,
    );
    expect(() => decodeLayer(tf.zeros([2, d]) as tf.Tensor2D, { ...w.layers[0], wfc: w.layers[0].wo }, keys, values, mask, slots, 1e-5)).toThrow(
      /weights do not fit d = 64/,
    );
    // Only the inputs made inside the expectations remain; nothing the kernel made is left.
    expect(tf.memory().numTensors - before).toBe(8);
    params.forEach((v) => v.dispose());
  });
});
