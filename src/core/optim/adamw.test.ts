import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { ADAM_MOMENTS, AdamW } from './adamw';

beforeAll(async () => {
  await initBackend('wasm');
});

/** Two parameters, as a model's map of variables: a [2, 3] matrix and a [3] bias. */
function makeParams(): Map<string, tf.Variable> {
  return new Map<string, tf.Variable>([
    [
      'h.0.weight',
      tf.variable(
        tf.tensor2d([
          [0.1, -0.2, 0.3],
          [0.4, 0.5, -0.6],
        ]),
      ),
    ],
    ['h.0.bias', tf.variable(tf.tensor1d([0.01, 0.02, 0.03]))],
  ]);
}

const grads = () =>
  new Map<string, tf.Tensor>([
    [
      'h.0.weight',
      tf.tensor2d([
        [0.5, -1, 0.25],
        [2, 0, -0.5],
      ]),
    ],
    ['h.0.bias', tf.tensor1d([1, -1, 0.5])],
  ]);

async function values(params: Map<string, tf.Variable>): Promise<number[][]> {
  return Promise.all([...params.values()].map(async (v) => Array.from(await v.data())));
}

const dispose = (params: Map<string, tf.Variable>) => params.forEach((v) => v.dispose());

describe('AdamW.load', () => {
  let source: AdamW;
  let sourceParams: Map<string, tf.Variable>;
  let saved: { step: number; tensors: Map<string, Float32Array> };

  beforeAll(async () => {
    sourceParams = makeParams();
    source = new AdamW(sourceParams, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    for (let i = 0; i < 2; i++) {
      const g = grads();
      await source.apply(g);
      g.forEach((t) => t.dispose());
    }
    saved = await source.state();
  });

  afterAll(() => {
    source.dispose();
    dispose(sourceParams);
  });

  it('restores the state exactly: the next update equals the uninterrupted one', async () => {
    const params = makeParams();
    // Same weights as the source after its two steps.
    const now = await values(sourceParams);
    [...params.values()].forEach((v, i) => v.assign(tf.tensor(now[i], v.shape)));
    const resumed = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    const before = tf.memory().numTensors;
    resumed.load(saved.step, saved.tensors);
    expect(tf.memory().numTensors).toBe(before);
    expect(resumed.step).toBe(2);

    const g1 = grads();
    const g2 = grads();
    await source.apply(g1);
    await resumed.apply(g2);
    [...g1.values(), ...g2.values()].forEach((t) => t.dispose());
    expect(await values(params)).toEqual(await values(sourceParams));
    resumed.dispose();
    dispose(params);
    // Later cases start from the source's new state, which is as valid as the first.
    saved = await source.state();
  });

  const withTensor = (key: string, data: Float32Array | undefined) => () => {
    const t = new Map(saved.tensors);
    if (data === undefined) t.delete(key);
    else t.set(key, data);
    return { step: saved.step, tensors: t };
  };
  const changed = (key: string, index: number, value: number) => () => {
    const data = (saved.tensors.get(key) as Float32Array).slice();
    data[index] = value;
    return withTensor(key, data)();
  };

  const cases: [string, () => { step: number; tensors: Map<string, Float32Array> }, RegExp][] = [
    ['a negative step', () => ({ ...saved, step: -1 }), /^optimizer step must be a non-negative integer \(got -1\)$/],
    ['a fractional step', () => ({ ...saved, step: 2.5 }), /^optimizer step must be a non-negative integer \(got 2.5\)$/],
    ['a NaN step', () => ({ ...saved, step: NaN }), /^optimizer step must be a non-negative integer \(got NaN\)$/],
    ['a step that is not a number', () => ({ ...saved, step: '2' as unknown as number }), /^optimizer step must be a non-negative integer \(got "2"\)$/],
    ['a missing first moment', withTensor('m.h.0.bias', undefined), /^moment tensor m.h.0.bias is missing$/],
    ['a missing second moment', withTensor('v.h.0.weight', undefined), /^moment tensor v.h.0.weight is missing$/],
    ['a moment of the wrong size', withTensor('v.h.0.bias', new Float32Array(4)), /^moment tensor v.h.0.bias has 4 values, expected 3$/],
    ['a first moment with NaN', changed('m.h.0.weight', 4, NaN), /^moment tensor m.h.0.weight contains NaN at index 4 \(first moments must be finite\)$/],
    [
      'a second moment with Infinity',
      changed('v.h.0.bias', 1, Infinity),
      /^moment tensor v.h.0.bias contains Infinity at index 1 \(second moments must be finite\)$/,
    ],
    [
      'a negative second moment',
      changed('v.h.0.weight', 2, -1e-3),
      /^moment tensor v.h.0.weight contains -0.0010000000474974513 at index 2 \(second moments must be ≥ 0\)$/,
    ],
    ['an unexpected tensor', withTensor('m.h.1.weight', new Float32Array(6)), /^unexpected moment tensor m.h.1.weight \(not a parameter of this model\)$/],
    // Finite but absurd: no run of 3 steps with gradients clipped to 1 writes these.
    [
      'a first moment of 3e38',
      changed('m.h.0.weight', 0, 3e38),
      /^moment tensor m.h.0.weight holds 3.* at index 0, past what 3 optimizer steps can write \(\|m\| ≤ 0.2710 with gradients clipped to 1\): it was not written by this optimizer$/,
    ],
    [
      'a second moment past the clip',
      changed('v.h.0.bias', 2, 5),
      /^moment tensor v.h.0.bias holds 5 at index 2, past what 3 optimizer steps can write \(v ≤ 0.02970 with gradients clipped to 1\)/,
    ],
    [
      'a first moment too large for its second',
      changed('v.h.0.weight', 1, 0),
      /^moment tensor m.h.0.weight holds -?[\d.e-]+ at index 1 with v = 0 there: \|m\| ≤ 2.345·√v for any gradients \(β1 0.9, β2 0.99\)/,
    ],
  ];

  it.each(cases)('rejects %s, naming it, and leaves the optimizer untouched', async (_label, make, message) => {
    const params = makeParams();
    const opt = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    const { step, tensors } = make();
    const before = tf.memory().numTensors;
    expect(() => opt.load(step, tensors)).toThrow(message);
    expect(tf.memory().numTensors).toBe(before);
    const after = await opt.state();
    expect(after.step).toBe(0);
    for (const data of after.tensors.values()) expect(Array.from(data).every((x) => x === 0)).toBe(true);
    opt.dispose();
    dispose(params);
  });

  it('takes what real updates write: a hundred steps of gradients far past the clip, tiny ones, zeros, and a restart', async () => {
    const params = makeParams();
    const opt = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 0.5 });
    for (let i = 0; i < 100; i++) {
      const scale = i % 3 === 0 ? 1e4 : i % 3 === 1 ? 1e-21 : 0;
      const g = new Map<string, tf.Tensor>([...grads()].map(([k, t]) => [k, tf.tidy(() => tf.mul(t, scale * (i % 7 === 0 ? -1 : 1)))]));
      await opt.apply(g);
      g.forEach((t) => t.dispose());
      if (i % 10 === 9) {
        const { step, tensors } = await opt.state();
        const again = new AdamW(makeParams(), { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 0.5 });
        expect(() => again.load(step, tensors)).not.toThrow();
        again.dispose();
      }
    }
    opt.dispose();
    dispose(params);
  });

  it('rejects a tensor table that is not a Map with a named error, not a TypeError', () => {
    const params = makeParams();
    const opt = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    expect(() => opt.load(0, null as unknown as Map<string, Float32Array>)).toThrow(/^moment tensors must be a map of name → Float32Array$/);
    opt.dispose();
    dispose(params);
  });
});
