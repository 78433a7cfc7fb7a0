import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { Rng } from '../rng';
import { type ModelConfig, PRESETS, paramSpecs } from './config';
import { forwardLogits, maskedTokenLoss, targetLogProbs } from './gpt';
import { disposeParams, initParams, paramsFromArrays, paramsToArrays } from './params';

beforeAll(async () => {
  await initBackend('wasm');
});

/**
 * GPT-2 as Hugging Face's modeling_gpt2 computes it, in plain float64 loops: the reference the
 * tfjs forward must reproduce (tanh gelu_new, 1/√dh after q·k, biased LayerNorm variance).
 */
function referenceLogits(w: ReadonlyMap<string, Float32Array>, c: ModelConfig, toks: readonly number[]): number[][] {
  const d = c.nEmbd;
  const heads = c.nHead;
  const dh = d / heads;
  const get = (n: string) => w.get(n) as Float32Array;
  const dense = (x: number[][], wt: Float32Array, b: Float32Array, nIn: number, nOut: number) =>
    x.map((row) =>
      Array.from({ length: nOut }, (_, j) => {
        let s = b[j];
        for (let i = 0; i < nIn; i++) s += row[i] * wt[i * nOut + j];
        return s;
      }),
    );
  const norm = (x: number[][], g: Float32Array, b: Float32Array) =>
    x.map((row) => {
      const mean = row.reduce((a, v) => a + v, 0) / row.length;
      const variance = row.reduce((a, v) => a + (v - mean) ** 2, 0) / row.length;
      return row.map((v, i) => ((v - mean) / Math.sqrt(variance + c.layerNormEps)) * g[i] + b[i]);
    });
  const gelu = (v: number) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
  const wte = get('transformer.wte.weight');
  const wpe = get('transformer.wpe.weight');
  let x = toks.map((t, p) => Array.from({ length: d }, (_, i) => wte[t * d + i] + wpe[p * d + i]));
  for (let l = 0; l < c.nLayer; l++) {
    const p = `transformer.h.${l}`;
    const qkv = dense(norm(x, get(`${p}.ln_1.weight`), get(`${p}.ln_1.bias`)), get(`${p}.attn.c_attn.weight`), get(`${p}.attn.c_attn.bias`), d, 3 * d);
    const mixed = x.map(() => new Array<number>(d).fill(0));
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < x.length; i++) {
        const scores: number[] = [];
        for (let j = 0; j <= i; j++) {
          let s = 0;
          for (let e = 0; e < dh; e++) s += qkv[i][h * dh + e] * qkv[j][d + h * dh + e];
          scores.push(s / Math.sqrt(dh));
        }
        const max = Math.max(...scores);
        const ex = scores.map((s) => Math.exp(s - max));
        const z = ex.reduce((a, v) => a + v, 0);
        for (let j = 0; j <= i; j++) for (let e = 0; e < dh; e++) mixed[i][h * dh + e] += (ex[j] / z) * qkv[j][2 * d + h * dh + e];
      }
    }
    const attnOut = dense(mixed, get(`${p}.attn.c_proj.weight`), get(`${p}.attn.c_proj.bias`), d, d);
    x = x.map((row, i) => row.map((v, k) => v + attnOut[i][k]));
    const up = dense(norm(x, get(`${p}.ln_2.weight`), get(`${p}.ln_2.bias`)), get(`${p}.mlp.c_fc.weight`), get(`${p}.mlp.c_fc.bias`), d, 4 * d);
    const mlpOut = dense(
      up.map((r) => r.map(gelu)),
      get(`${p}.mlp.c_proj.weight`),
      get(`${p}.mlp.c_proj.bias`),
      4 * d,
      d,
    );
    x = x.map((row, i) => row.map((v, k) => v + mlpOut[i][k]));
  }
  const hidden = norm(x, get('transformer.ln_f.weight'), get('transformer.ln_f.bias'));
  return hidden.map((row) => Array.from({ length: c.vocabSize }, (_, v) => row.reduce((s, hv, i) => s + hv * wte[v * d + i], 0)));
}

/** Every parameter (LayerNorm gains and biases included) random, so each one matters. */
function randomArrays(c: ModelConfig, seed: number, std: number): Map<string, Float32Array> {
  const rng = new Rng(seed);
  const out = new Map<string, Float32Array>();
  for (const spec of paramSpecs(c)) {
    const n = spec.shape.reduce((a, b) => a * b, 1);
    const values = new Float32Array(n);
    for (let i = 0; i < n; i++) values[i] = (spec.init === 'ones' ? 1 : 0) + std * rng.normal();
    out.set(spec.name, values);
  }
  return out;
}

function int2d(rows: number[][]): tf.Tensor2D {
  return tf.tensor2d(rows, [rows.length, rows[0].length], 'int32');
}

describe('forwardLogits', () => {
  const small: ModelConfig = { nLayer: 2, nEmbd: 16, nHead: 2, nPositions: 8, vocabSize: 11, layerNormEps: 1e-5 };

  it('matches a plain-loop Hugging Face GPT-2 reference', async () => {
    const arrays = randomArrays(small, 3, 0.5);
    const params = paramsFromArrays(small, arrays);
    const seqs = [
      [1, 4, 9, 0, 3, 3, 10],
      [7, 7, 2, 5, 8, 1, 6],
    ];
    const logits = forwardLogits(params, small, int2d(seqs));
    expect(logits.shape).toEqual([2, 7, 11]);
    const got = (await logits.array()) as number[][][];
    logits.dispose();
    let maxDiff = 0;
    let maxAbs = 0;
    seqs.forEach((seq, b) => {
      referenceLogits(arrays, small, seq).forEach((row, t) =>
        row.forEach((v, k) => {
          maxDiff = Math.max(maxDiff, Math.abs(v - got[b][t][k]));
          maxAbs = Math.max(maxAbs, Math.abs(v));
        }),
      );
    });
    expect(maxAbs).toBeGreaterThan(1); // a meaningful comparison, not near-zero logits
    expect(maxDiff).toBeLessThan(1e-4);
    disposeParams(params);
  });

  it('is causal: right padding does not change the logits of earlier positions', async () => {
    const params = paramsFromArrays(small, randomArrays(small, 4, 0.5));
    const short = await forwardLogits(params, small, int2d([[3, 1, 4]])).array();
    const padded = await forwardLogits(params, small, int2d([[3, 1, 4, 0, 0, 0]])).array();
    for (let t = 0; t < 3; t++) {
      for (let k = 0; k < small.vocabSize; k++) expect(padded[0][t][k]).toBeCloseTo(short[0][t][k], 5);
    }
    disposeParams(params);
  });

  it('rejects inputs that do not fit the model', () => {
    const params = initParams(small, 1);
    expect(() => forwardLogits(params, small, int2d([[1, 2, 3, 4, 5, 6, 7, 8, 9]]))).toThrow(/nPositions/);
    expect(() => forwardLogits(params, small, tf.tensor2d([[1, 2]], [1, 2], 'float32'))).toThrow(/int32/);
    disposeParams(params);
  });
});

describe('targetLogProbs and maskedTokenLoss', () => {
  const config = PRESETS.tiny;
  const V = config.vocabSize;
  const tokens = [
    [2, 30, 31, 32, 40, 50],
    [3, 12, 13, 0, 0, 0],
  ];
  const targets = [
    [30, 31, 32, 40, 50, 1],
    [12, 13, 1, 0, 0, 0],
  ];
  const weights = [
    [1, 1, 1, 1, 1, 1],
    [1, 0.5, 1, 0, 0, 0],
  ];

  function logSoftmaxAt(row: number[], temperature: number, id: number): number {
    const s = row.map((v) => v / temperature);
    const max = Math.max(...s);
    return s[id] - max - Math.log(s.reduce((a, v) => a + Math.exp(v - max), 0));
  }

  it('equals log softmax(logits / temperature) at the targets', async () => {
    const params = initParams(config, 5);
    const logits = (await forwardLogits(params, config, int2d(tokens)).array()) as number[][][];
    for (const temperature of [1, 0.7]) {
      const lp = (await targetLogProbs(params, config, int2d(tokens), int2d(targets), temperature).array()) as number[][];
      for (let b = 0; b < 2; b++) {
        for (let t = 0; t < 6; t++) expect(lp[b][t]).toBeCloseTo(logSoftmaxAt(logits[b][t], temperature, targets[b][t]), 5);
      }
    }
    expect(() => targetLogProbs(params, config, int2d(tokens), int2d(targets), 0)).toThrow(/temperature/);
    disposeParams(params);
  });

  it('with label smoothing ε scores (1 − ε)·log p(target) + ε·mean_v log p(v), by hand', async () => {
    const params = initParams(config, 7);
    const logits = (await forwardLogits(params, config, int2d(tokens)).array()) as number[][][];
    const eps = 0.1;
    let num = 0;
    let den = 0;
    for (let b = 0; b < 2; b++) {
      for (let t = 0; t < 6; t++) {
        const mean = logits[b][t].reduce((a, _, v) => a + logSoftmaxAt(logits[b][t], 1, v), 0) / V;
        num -= weights[b][t] * ((1 - eps) * logSoftmaxAt(logits[b][t], 1, targets[b][t]) + eps * mean);
        den += weights[b][t];
      }
    }
    const loss = (e: number) =>
      tf.tidy(() => maskedTokenLoss(params, config, { tokens: int2d(tokens), targets: int2d(targets), weights: tf.tensor2d(weights) }, e).dataSync()[0]);
    expect(loss(eps)).toBeCloseTo(num / den, 5);
    // ε = 0 is the plain loss; ε outside [0, 1) is refused by name.
    expect(loss(0)).toBe(
      tf.tidy(() => maskedTokenLoss(params, config, { tokens: int2d(tokens), targets: int2d(targets), weights: tf.tensor2d(weights) }).dataSync()[0]),
    );
    expect(() => loss(1)).toThrow(/label smoothing/);
    expect(() => loss(-0.1)).toThrow(/label smoothing/);
    disposeParams(params);
  });

  it('is the weighted mean cross-entropy, blind to masked positions', async () => {
    const params = initParams(config, 6);
    const logits = (await forwardLogits(params, config, int2d(tokens)).array()) as number[][][];
    let num = 0;
    let den = 0;
    for (let b = 0; b < 2; b++) {
      for (let t = 0; t < 6; t++) {
        num -= weights[b][t] * logSoftmaxAt(logits[b][t], 1, targets[b][t]);
        den += weights[b][t];
      }
    }
    const loss = (w: number[][], tg: number[][]) =>
      tf.tidy(() => maskedTokenLoss(params, config, { tokens: int2d(tokens), targets: int2d(tg), weights: tf.tensor2d(w) }).dataSync()[0]);
    expect(loss(weights, targets)).toBeCloseTo(num / den, 5);
    // A masked target can be anything.
    const changed = targets.map((r) => [...r]);
    changed[1][4] = V - 1;
    expect(loss(weights, changed)).toBe(loss(weights, targets));
    // ...but an unmasked one matters.
    changed[1][0] = V - 1;
    expect(loss(weights, changed)).not.toBeCloseTo(loss(weights, targets), 4);
    expect(
      Math.abs(
        loss(
          [
            [0, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0],
          ],
          targets,
        ),
      ),
    ).toBe(0);
    disposeParams(params);
  });

  it('trains: Adam lowers the loss, and a step leaks no tensors', () => {
    const params = initParams(config, 7);
    const rng = new Rng(8);
    const B = 4;
    const Tn = 32;
    const seqs = Array.from({ length: B }, () => Array.from({ length: Tn + 1 }, () => rng.int(21, 40)));
    const batch = {
      tokens: int2d(seqs.map((s) => s.slice(0, Tn))),
      targets: int2d(seqs.map((s) => s.slice(1))),
      weights: tf.tensor2d(seqs.map((_, b) => Array.from({ length: Tn }, (_, t) => (b === 3 && t > 20 ? 0 : 1)))),
    };
    const optimizer = tf.train.adam(1e-2);
    const vars = [...params.values()];
    const step = (): number => {
      const { value, grads } = tf.variableGrads(() => maskedTokenLoss(params, config, batch), vars);
      optimizer.applyGradients(Object.entries(grads).map(([name, tensor]) => ({ name, tensor })));
      const loss = value.dataSync()[0];
      value.dispose();
      tf.dispose(grads);
      return loss;
    };
    const first = step(); // creates Adam's slots
    const count = tf.memory().numTensors;
    let last = first;
    for (let i = 0; i < 8; i++) {
      last = step();
      expect(tf.memory().numTensors).toBe(count);
    }
    expect(first).toBeGreaterThan(Math.log(V) - 0.5); // near-uniform at init
    expect(last).toBeLessThan(first - 0.5);
    optimizer.dispose();
    tf.dispose(batch);
    disposeParams(params);
  });
});

describe('gradients', () => {
  it('match finite differences for every parameter tensor', async () => {
    const small: ModelConfig = { nLayer: 2, nEmbd: 16, nHead: 2, nPositions: 8, vocabSize: 11, layerNormEps: 1e-5 };
    const params = paramsFromArrays(small, randomArrays(small, 12, 0.3));
    const batch = {
      tokens: int2d([
        [1, 4, 9, 0, 3, 3],
        [7, 7, 2, 5, 8, 1],
      ]),
      targets: int2d([
        [4, 9, 0, 3, 3, 2],
        [7, 2, 5, 8, 1, 6],
      ]),
      weights: tf.tensor2d([
        [1, 1, 1, 1, 1, 1],
        [1, 1, 0.5, 1, 0, 0],
      ]),
    };
    const lossValue = () => tf.tidy(() => maskedTokenLoss(params, small, batch).dataSync()[0]);
    const { value, grads } = tf.variableGrads(() => maskedTokenLoss(params, small, batch), [...params.values()]);
    value.dispose();
    const analytic = new Map<string, Float32Array>();
    for (const [name, v] of params) analytic.set(name, (await grads[v.name].data()) as Float32Array);
    tf.dispose(grads);

    const base = await paramsToArrays(params);
    const rng = new Rng(13);
    const h = 1e-2;
    for (const [name, v] of params) {
      const values = base.get(name) as Float32Array;
      for (let k = 0; k < 3; k++) {
        const i = rng.int(0, values.length - 1);
        const perturbed = values.slice();
        perturbed[i] = values[i] + h;
        tf.tidy(() => v.assign(tf.tensor(perturbed, v.shape)));
        const up = lossValue();
        perturbed[i] = values[i] - h;
        tf.tidy(() => v.assign(tf.tensor(perturbed, v.shape)));
        const down = lossValue();
        tf.tidy(() => v.assign(tf.tensor(values, v.shape)));
        const numeric = (up - down) / (2 * h);
        const g = (analytic.get(name) as Float32Array)[i];
        expect(Math.abs(numeric - g), `${name}[${i}]: numeric ${numeric} vs analytic ${g}`).toBeLessThan(2e-3 + 0.05 * Math.abs(g));
      }
    }
    tf.dispose(batch);
    disposeParams(params);
  });
});
