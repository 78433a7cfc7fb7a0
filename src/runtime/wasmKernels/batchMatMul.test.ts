/**
 * The project's wasm matMul kernel against tfjs's own (the same backend with the kernel switched
 * off) and against the cpu backend: every transpose combination, broadcast batches, rank 4,
 * sizes that are not multiples of the SIMD blocks, more than one chunk of terms, the fused
 * product with a bias, gradients through attention, and the committed binary assembled from
 * the committed .wat.
 */
import { readFileSync } from 'node:fs';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../backend';
import { KERNELS, assemble, binaryModuleSource } from './assemble';
import { fastBatchMatMulActive, fastBatchMatMulCalls, setFastBatchMatMul } from './batchMatMul';

type Case = [number[], number[], boolean, boolean];

const CASES: Case[] = [
  [[3, 5, 7], [3, 7, 9], false, false],
  [[3, 7, 5], [3, 7, 9], true, false],
  [[3, 5, 7], [3, 9, 7], false, true],
  [[3, 7, 5], [3, 9, 7], true, true],
  [[2, 3, 17, 33], [2, 3, 33, 19], false, false], // rank 4, odd sizes: every edge loop
  [[1, 5, 7], [4, 7, 18], false, false], // A shared by the batch
  [[4, 7, 5], [1, 7, 18], true, false], // B shared, A transposed
  [[4, 6, 40], [1, 33, 40], false, true], // B shared and transposed: transposed once
  [[7, 5], [7, 9], true, false], // 2-D transposed
  [[5, 7], [9, 7], false, true],
  [[1, 64], [64, 35], false, false], // one row (a column sum)
  [[37, 600], [600, 45], false, false], // three chunks of 256 terms
  [[600, 37], [45, 600], true, true],
  [[6, 1, 32], [6, 40, 32], false, true], // one query against cached keys: dot products
  [[6, 3, 7], [6, 9, 7], false, true], // dot products with a scalar tail
  [[6, 7, 3], [1, 9, 7], true, true], // the same with A transposed and B shared
  [[1, 7, 5], [4, 7, 9], true, false], // A shared and transposed: transposed once
  [[1, 7, 6], [4, 9, 7], true, true],
  [[2, 7, 4], [2, 9, 7], true, true], // m = 4: the dot-product path's edge, A transposed
  [[2, 3, 5, 7], [7, 9], false, false], // batch dimensions of different ranks
  [[5, 7], [2, 3, 7, 9], false, false],
  [[32, 16, 32], [32, 32, 16], false, false], // attention's shapes, exact SIMD blocks
  [[32, 16, 16], [32, 16, 32], true, false],
  [[32, 16, 32], [32, 16, 32], false, true],
];

const values = (shape: number[], seed: number) => tf.randomUniform(shape, -1, 1, 'float32', seed);

function product(on: boolean, [sa, sb, ta, tb]: Case, seed: number): { shape: number[]; data: Float32Array } {
  const was = setFastBatchMatMul(on);
  try {
    return tf.tidy(() => {
      const c = tf.matMul(values(sa, seed), values(sb, seed + 1), ta, tb);
      return { shape: c.shape, data: c.dataSync() as Float32Array };
    });
  } finally {
    setFastBatchMatMul(was);
  }
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

describe('wasm BatchMatMul kernel', () => {
  beforeAll(async () => {
    await initBackend('wasm');
  });
  afterAll(() => setFastBatchMatMul(true));

  it('is installed on wasm', () => {
    expect(fastBatchMatMulActive()).toBe(true);
  });

  it.each(CASES.map((c, i) => [i, c] as const))('case %i equals tfjs’s own kernel and the cpu backend', async (i, c) => {
    const before = fastBatchMatMulCalls();
    const ours = product(true, c, 10 + i);
    expect(fastBatchMatMulCalls(), 'the project kernel computed it').toBe(before + 1);
    const theirs = product(false, c, 10 + i);
    expect(fastBatchMatMulCalls()).toBe(before + 1);
    expect(ours.shape).toEqual(theirs.shape);
    expect(maxDiff(ours.data, theirs.data)).toBeLessThan(1e-4); // sums in another order past 256 terms
    // An independent backend: tfjs's cpu kernel on the same inputs.
    const inputs = tf.tidy(() => [values(c[0], 10 + i).dataSync(), values(c[1], 11 + i).dataSync()]);
    await tf.setBackend('cpu');
    const cpu = tf.tidy(() => tf.matMul(tf.tensor(inputs[0], c[0]), tf.tensor(inputs[1], c[1]), c[2], c[3]).dataSync() as Float32Array);
    await tf.setBackend('wasm');
    expect(maxDiff(ours.data, cpu)).toBeLessThan(1e-4);
  });

  it('serves tf.fused.matMul with a bias as the cpu backend computes it', async () => {
    // Against cpu, not tfjs's wasm kernel: that one adds the bias wrongly with transposeA (its
    // rows after the first get later bias entries), which this kernel replaces.
    const fused = (activation: 'linear' | 'relu', ta: boolean) =>
      tf.tidy(() => {
        const a = (ta ? values([33, 21], 5) : values([21, 33], 5)) as tf.Tensor2D;
        const out = tf.fused.matMul({ a, b: values([33, 18], 6) as tf.Tensor2D, bias: tf.add(values([18], 7), 5) as tf.Tensor1D, activation, transposeA: ta });
        if (activation !== 'linear') return out.dataSync() as Float32Array;
        // Two rows against a transposed B: the dot-product path, with its bias.
        const few = tf.fused.matMul({
          a: values([2, 33], 8) as tf.Tensor2D,
          b: values([18, 33], 9) as tf.Tensor2D,
          bias: values([18], 7) as tf.Tensor1D,
          transposeB: true,
        });
        return new Float32Array([...out.dataSync(), ...few.dataSync()]);
      });
    for (const ta of [false, true]) {
      for (const act of ['linear', 'relu'] as const) {
        const ours = fused(act, ta);
        await tf.setBackend('cpu');
        const cpu = fused(act, ta);
        await tf.setBackend('wasm');
        // relu goes to tfjs's kernel, right without transposeA only.
        if (act === 'linear' || !ta) expect(maxDiff(ours, cpu), `${act} transposeA=${ta}`).toBeLessThan(1e-4);
      }
    }
  });

  it('gives attention’s gradients as tfjs’s own kernel does', () => {
    const grads = (on: boolean) => {
      const was = setFastBatchMatMul(on);
      try {
        return tf.tidy(() => {
          const [q, k, v] = [values([6, 12, 8], 1), values([6, 12, 8], 2), values([6, 12, 8], 3)];
          const w = values([6, 12, 8], 4);
          const f = (qq: tf.Tensor, kk: tf.Tensor, vv: tf.Tensor) => tf.sum(tf.mul(tf.matMul(tf.softmax(tf.matMul(qq, kk, false, true)), vv), w));
          return tf
            .grads(f)([q, k, v])
            .map((g) => g.dataSync() as Float32Array);
        });
      } finally {
        setFastBatchMatMul(was);
      }
    };
    const before = fastBatchMatMulCalls();
    const ours = grads(true);
    expect(fastBatchMatMulCalls()).toBeGreaterThanOrEqual(before + 6); // two products forward, four backward
    const theirs = grads(false);
    for (let i = 0; i < 3; i++) expect(maxDiff(ours[i], theirs[i])).toBeLessThan(1e-5);
    expect(Math.max(...ours[0].map(Math.abs))).toBeGreaterThan(1e-3);
  });

  it('stays right after the wasm memory has grown', () => {
    const big = tf.zeros([64, 1024, 1024]); // 256 MB: the heap grows past it
    try {
      const c: Case = [[4, 33, 9], [4, 33, 21], true, false];
      expect(maxDiff(product(true, c, 40).data, product(false, c, 40).data)).toBeLessThan(1e-4);
    } finally {
      big.dispose();
    }
  });

  it('leaves no tensors behind', () => {
    const before = tf.memory().numTensors;
    for (const c of CASES.slice(0, 4)) product(true, c, 3);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('refuses mismatched shapes with tfjs’s message', () => {
    expect(() => tf.tidy(() => tf.matMul(tf.zeros([2, 3, 4]), tf.zeros([2, 5, 6])))).toThrow(/inner shapes/);
  });

  it('ships the binary assembled from its .wat', async () => {
    for (const k of KERNELS) {
      const source = binaryModuleSource(k, await assemble(readFileSync(k.wat, 'utf8'), k.wat));
      expect(readFileSync(k.out, 'utf8'), `${k.out} is stale: run npx tsx scripts/wasmKernels.ts`).toBe(source);
    }
  });
});
