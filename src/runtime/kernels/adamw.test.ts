/**
 * The fused AdamW kernel against the same update composed from tfjs ops (the kernel switched
 * off), on cpu and wasm: several steps, with the gradient clipped (scale < 1), weight decay on
 * a matrix and none on a bias, and against a hand-computed first step. WebGPU's kernel is
 * checked in test/webgpu-node.test.ts.
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, describe, expect, it } from 'vitest';
import { fusedAdamWAvailable, setFusedAdamW } from '../../core/optim/adamwStep';
import { AdamW } from '../../core/optim/adamw';
import { initBackend } from '../backend';

/** Three AdamW steps on fixed params and gradients; the params and moments after them. */
async function run(fused: boolean): Promise<{ params: Float32Array[]; moments: Map<string, Float32Array> }> {
  const was = setFusedAdamW(fused);
  try {
    const params = new Map<string, tf.Variable>([
      ['transformer.h.0.attn.c_attn.weight', tf.variable(tf.tensor2d([0.5, -1, 2, 0.25, -0.75, 1.5], [2, 3]))],
      ['transformer.h.0.attn.c_attn.bias', tf.variable(tf.tensor1d([0.1, -0.2, 0.3]))],
    ]);
    const opt = new AdamW(params, { lr: 0.05, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.1, gradClip: 1 });
    for (const s of [1, -2, 3]) {
      const grads = new Map([...params].map(([name, p]) => [name, tf.tidy(() => tf.mul(tf.add(tf.range(0, p.size).reshape(p.shape), 1), 0.4 * s))]));
      const stats = await opt.apply(grads);
      expect(stats.applied).toBe(true);
      expect(stats.gradNorm).toBeGreaterThan(1); // clipped: scale < 1
      grads.forEach((g) => g.dispose());
    }
    const out = await Promise.all([...params.values()].map(async (p) => (await p.data()) as Float32Array));
    const moments = (await opt.state()).tensors;
    opt.dispose();
    params.forEach((p) => p.dispose());
    return { params: out, moments };
  } finally {
    setFusedAdamW(was);
  }
}

describe.each(['cpu', 'wasm'] as const)('fused AdamW on %s', (backend) => {
  afterAll(() => setFusedAdamW(true));

  it('is registered and gives the composed update', async () => {
    await initBackend(backend);
    expect(fusedAdamWAvailable()).toBe(true);
    const fused = await run(true);
    const composed = await run(false);
    for (let i = 0; i < fused.params.length; i++) {
      for (let j = 0; j < fused.params[i].length; j++) expect(fused.params[i][j]).toBeCloseTo(composed.params[i][j], 6);
    }
    for (const [k, m] of composed.moments) {
      const f = fused.moments.get(k) as Float32Array;
      m.forEach((x, j) => expect(f[j]).toBeCloseTo(x, 6));
    }
  });

  it('matches a hand-computed first step', async () => {
    await initBackend(backend);
    const p = tf.variable(tf.tensor1d([1, -2]));
    const opt = new AdamW(new Map([['transformer.h.0.mlp.c_fc.weight', p]]), { lr: 0.1, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.5, gradClip: 0 });
    const g = tf.tensor1d([0.5, 0.25]);
    await opt.apply(new Map([['transformer.h.0.mlp.c_fc.weight', g]]));
    // Step 1: m̂ = g, v̂ = g², so the update is lr·g/|g| = ±0.1, plus decay lr·wd·p = 0.05·p.
    const got = Array.from(await p.data());
    expect(got[0]).toBeCloseTo(1 - 0.1 - 0.05, 6);
    expect(got[1]).toBeCloseTo(-2 - 0.1 + 0.1, 6);
    opt.dispose();
    tf.dispose([p, g]);
  });
});
