import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { presetConfig } from '../model/config';
import { targetLogProbs } from '../model/gpt';
import { initParams } from '../model/params';
import { Rng } from '../rng';
import { POLICY_LOSS_DEFAULTS, type PolicyLossConfig, type RlSequence, aggregationWeights, packRl, policyGradients, referenceLogprobs } from './grpo';

const config = presetConfig('tiny');
let params: ReturnType<typeof initParams>;

beforeAll(async () => {
  await initBackend('wasm');
  params = initParams(config, 3);
});

/** Random sequences whose old log-probs are the current policy's (so ρ = 1). */
async function sequences(n: number, seed: number, advantages: number[]): Promise<RlSequence[]> {
  const rng = new Rng(seed);
  const seqs: RlSequence[] = [];
  for (let i = 0; i < n; i++) {
    const len = rng.int(6, 14);
    const tokens = Array.from({ length: len }, () => rng.int(21, config.vocabSize - 1));
    const actions = tokens.slice(1).map((_, t) => (t >= 2 ? 1 : 0));
    const lp = tf.tidy(() => targetLogProbs(params, config, tf.tensor2d([tokens.slice(0, -1)], [1, len - 1], 'int32'), tf.tensor2d([tokens.slice(1)], [1, len - 1], 'int32')));
    const old = Array.from(await lp.data()).map((v, t) => (actions[t] ? v : 0));
    lp.dispose();
    seqs.push({ tokens, actions, oldLogprobs: old, advantage: advantages[i], weight: 1 });
  }
  return seqs;
}

async function grads(seqs: RlSequence[], c: PolicyLossConfig = { ...POLICY_LOSS_DEFAULTS, beta: 0 }, microTokens = 40) {
  const w = aggregationWeights(seqs, c.aggregation);
  const batches = packRl(seqs, w, microTokens);
  const refs = referenceLogprobs(null, config, batches, c);
  return policyGradients(params, config, batches, refs, c);
}

async function flat(g: Map<string, tf.Tensor>): Promise<Float32Array> {
  const parts: number[] = [];
  for (const name of params.keys()) {
    const t = g.get(name);
    const size = params.get(name)!.size;
    const d = t ? await t.data() : new Float32Array(size);
    parts.push(...d);
  }
  return Float32Array.from(parts);
}

const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);
const dispose = (g: Map<string, tf.Tensor>) => g.forEach((t) => t.dispose());

describe('policy gradient', () => {
  it('with ρ = 1 and β = 0 equals REINFORCE with the group baseline', async () => {
    const adv = [0.7, -1.2, 0.4, 1.5, -0.3];
    const seqs = await sequences(5, 1, adv);
    const r = await grads(seqs);
    // Direct: ∇ of −Σ_tokens A · log π / (trained tokens), one sequence at a time.
    const total = seqs.reduce((n, s) => n + s.actions.reduce((a, b) => a + b, 0), 0);
    const vars = [...params.values()];
    const direct = new Map<string, tf.Tensor>();
    for (const s of seqs) {
      const len = s.tokens.length - 1;
      const { grads: g, value } = tf.variableGrads(() => {
        const lp = targetLogProbs(params, config, tf.tensor2d([s.tokens.slice(0, -1)], [1, len], 'int32'), tf.tensor2d([s.tokens.slice(1)], [1, len], 'int32'));
        return tf.neg(tf.div(tf.sum(tf.mul(lp, tf.tensor2d([s.actions.map((a) => a * s.advantage)], [1, len]))), total)) as tf.Scalar;
      }, vars);
      value.dispose();
      [...params.keys()].forEach((name, i) => {
        const prev = direct.get(name);
        direct.set(name, prev ? tf.add(prev, g[vars[i].name]) : tf.clone(g[vars[i].name]));
        prev?.dispose();
      });
      Object.values(g).forEach((t) => t.dispose());
    }
    const a = await flat(r.grads);
    const b = await flat(direct);
    const scale = b.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    expect(scale).toBeGreaterThan(1e-3);
    expect(maxDiff(a, b)).toBeLessThan(1e-5 * Math.max(1, scale));
    expect(r.meanRatio).toBeCloseTo(1, 5);
    expect(r.clipFraction).toBe(0);
    dispose(r.grads);
    dispose(direct);
  });

  it('a gated clone contributes exactly zero gradient', async () => {
    const seqs = await sequences(3, 2, [0.9, -0.5, 1.3]);
    const base = await grads(seqs.slice(0, 2));
    const gated = await grads([...seqs.slice(0, 2), { ...seqs[2], weight: 0 }]);
    const changed = await grads([...seqs.slice(0, 2), { ...seqs[2], weight: 0, advantage: -40, tokens: seqs[2].tokens.map(() => 30) }]);
    const ungated = await grads(seqs);
    const g0 = await flat(base.grads);
    expect(await flat(gated.grads)).toEqual(g0);
    expect(await flat(changed.grads)).toEqual(g0);
    expect(maxDiff(await flat(ungated.grads), g0)).toBeGreaterThan(1e-4);
    for (const r of [base, gated, changed, ungated]) dispose(r.grads);
  });

  it('clips the ratio: a token far above 1 + ε with A > 0 gives no gradient', async () => {
    const [s] = await sequences(1, 3, [1]);
    // Old log-probs 1 nat lower: ρ = e ≈ 2.7 > 1.2, positive advantage → clipped branch, flat.
    const lowered = { ...s, oldLogprobs: s.oldLogprobs.map((v, t) => (s.actions[t] ? v - 1 : 0)) };
    const r = await grads([lowered]);
    expect(r.clipFraction).toBe(1);
    const g = await flat(r.grads);
    expect(g.every((x) => x === 0)).toBe(true);
    dispose(r.grads);
  });

  it('sequence-mean weights each context equally; the KL term is zero against itself', async () => {
    const seqs = await sequences(2, 4, [1, 1]);
    const w = aggregationWeights(seqs, 'sequence-mean');
    const per = w.map((row) => row.reduce((a, b) => a + b, 0));
    expect(per[0]).toBeCloseTo(0.5, 12);
    expect(per[1]).toBeCloseTo(0.5, 12);
    const c = { ...POLICY_LOSS_DEFAULTS, beta: 0.1 };
    const batches = packRl(seqs, aggregationWeights(seqs, c.aggregation), 1000);
    const refs = referenceLogprobs(params, config, batches, c);
    const r = await policyGradients(params, config, batches, refs, c);
    expect(r.kl).toBeCloseTo(0, 6);
    refs.forEach((t) => t?.dispose());
    dispose(r.grads);
  });

  it('leaves no tensors behind', async () => {
    const seqs = await sequences(3, 5, [1, -1, 0.5]);
    await grads(seqs).then((r) => dispose(r.grads));
    const before = tf.memory().numTensors;
    await grads(seqs).then((r) => dispose(r.grads));
    expect(tf.memory().numTensors).toBe(before);
  });
});
