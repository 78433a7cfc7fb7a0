import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { PRESETS, parameterCount, paramSpecs } from './config';
import { cloneParams, disposeParams, initParams, paramsFromArrays, paramsToArrays } from './params';

const config = PRESETS.tiny;

beforeAll(async () => {
  await initBackend('wasm');
});

function std(values: Float32Array): number {
  const mean = values.reduce((a, v) => a + v, 0) / values.length;
  return Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / values.length);
}

describe('initParams', () => {
  it('is deterministic for a seed and differs across seeds', async () => {
    const a = await paramsToArrays(initParams(config, 42));
    const b = await paramsToArrays(initParams(config, 42));
    const c = await paramsToArrays(initParams(config, 43));
    expect([...a.keys()]).toEqual(paramSpecs(config).map((s) => s.name));
    for (const [name, values] of a) expect(b.get(name)).toEqual(values);
    expect(c.get('transformer.wte.weight')).not.toEqual(a.get('transformer.wte.weight'));
  });

  it('follows the GPT-2 scheme', async () => {
    const params = initParams(config, 1);
    const a = await paramsToArrays(params);
    expect([...a.values()].reduce((n, v) => n + v.length, 0)).toBe(parameterCount(config));
    expect(std(a.get('transformer.wte.weight') as Float32Array)).toBeCloseTo(0.02, 3);
    expect(std(a.get('transformer.h.0.mlp.c_proj.weight') as Float32Array)).toBeCloseTo(0.02 / Math.sqrt(2 * config.nLayer), 3);
    expect((a.get('transformer.h.1.ln_2.weight') as Float32Array).every((v) => v === 1)).toBe(true);
    expect((a.get('transformer.h.1.attn.c_attn.bias') as Float32Array).every((v) => v === 0)).toBe(true);
    expect(params.get('transformer.h.0.attn.c_attn.weight')?.shape).toEqual([config.nEmbd, 3 * config.nEmbd]);
    disposeParams(params);
  });
});

describe('paramsFromArrays', () => {
  it('round-trips through paramsToArrays', async () => {
    const arrays = await paramsToArrays(initParams(config, 3));
    const again = await paramsToArrays(paramsFromArrays(config, arrays));
    for (const [name, values] of arrays) expect(again.get(name)).toEqual(values);
  });

  it('names the offending tensor', async () => {
    const good = await paramsToArrays(initParams(config, 3));
    const without = new Map(good);
    without.delete('transformer.ln_f.bias');
    expect(() => paramsFromArrays(config, without)).toThrow(/missing tensor transformer\.ln_f\.bias/);
    const short = new Map(good);
    short.set('transformer.wpe.weight', new Float32Array(10));
    expect(() => paramsFromArrays(config, short)).toThrow(/transformer\.wpe\.weight must have shape \[256, 64\]/);
    const extra = new Map(good);
    extra.set('lm_head.weight', new Float32Array(4));
    expect(() => paramsFromArrays(config, extra)).toThrow(/unexpected tensor\(s\) lm_head\.weight/);
    const nan = new Map(good);
    const bad = new Float32Array(good.get('transformer.h.0.ln_1.bias') as Float32Array);
    bad[5] = Number.NaN;
    nan.set('transformer.h.0.ln_1.bias', bad);
    expect(() => paramsFromArrays(config, nan)).toThrow(/transformer\.h\.0\.ln_1\.bias has a non-finite value at index 5/);
  });
});

describe('cloneParams and disposeParams', () => {
  it('clones independently and frees every variable', async () => {
    const before = tf.memory().numTensors;
    const params = initParams(config, 9);
    const frozen = cloneParams(params, { trainable: false });
    const trainable = cloneParams(params);
    expect(frozen.get('transformer.wte.weight')?.trainable).toBe(false);
    expect(trainable.get('transformer.wte.weight')?.trainable).toBe(true);
    const original = await paramsToArrays(params);
    const wte = params.get('transformer.wte.weight') as tf.Variable;
    tf.tidy(() => wte.assign(tf.zerosLike(wte)));
    expect((await paramsToArrays(frozen)).get('transformer.wte.weight')).toEqual(original.get('transformer.wte.weight'));
    expect((await paramsToArrays(params)).get('transformer.wte.weight')?.every((v) => v === 0)).toBe(true);
    for (const p of [params, frozen, trainable]) disposeParams(p);
    expect(params.size).toBe(0);
    expect(tf.memory().numTensors).toBe(before);
  });
});
