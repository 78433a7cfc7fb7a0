import { toyScorer } from '../policyModel';
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { presetConfig } from '../model/config';
import { forwardLogits, targetLogProbs } from '../model/gpt';
import { initParams } from '../model/params';
import { Rng } from '../rng';
import { type PolicyLossConfig, type RlSequence, aggregationWeights, packRl, policyGradients, withReferenceLogprobs } from './ppoLoss';
import { defaultGrpoConfig } from '../runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();

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
    const lp = tf.tidy(() =>
      targetLogProbs(params, config, tf.tensor2d([tokens.slice(0, -1)], [1, len - 1], 'int32'), tf.tensor2d([tokens.slice(1)], [1, len - 1], 'int32')),
    );
    const old = Array.from(await lp.data()).map((v, t) => (actions[t] ? v : 0));
    lp.dispose();
    seqs.push({ tokens, actions, oldLogprobs: old, advantage: advantages[i], weight: 1 });
  }
  return seqs;
}

async function grads(seqs: RlSequence[], c: PolicyLossConfig = { ...TABLE_GRPO.loss, beta: 0 }, microTokens = 40) {
  const w = aggregationWeights(seqs, c.aggregation);
  return policyGradients(toyScorer(params, config), packRl(seqs, w, microTokens), c);
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

  it('counts a clip only where it binds (verl pg_clipfrac): ρ < 1 − ε with A > 0 is not clipped', async () => {
    const [s] = await sequences(1, 6, [1]);
    // ρ = e^−1 ≈ 0.37 < 0.8: with A > 0, min(ρA, 0.8A) = ρA, the unclipped term, gradient flows.
    const raised = { ...s, oldLogprobs: s.oldLogprobs.map((v, t) => (s.actions[t] ? v + 1 : 0)) };
    const r = await grads([raised]);
    expect(r.clipFraction).toBe(0);
    expect(r.meanRatio).toBeCloseTo(Math.exp(-1), 5);
    // k3 of KL(π_old ‖ π) per token: (ρ − 1) − log ρ = e^−1 − 1 + 1.
    expect(r.approxKl).toBeCloseTo(Math.exp(-1), 5);
    expect((await flat(r.grads)).some((x) => x !== 0)).toBe(true);
    dispose(r.grads);
  });

  it('dual clip: with A < 0 the objective is at least c·A, by hand', async () => {
    const [s] = await sequences(1, 7, [-0.8]);
    // Alternate log ρ = 1.5 (ρ ≈ 4.48 > c = 3) and log ρ = −0.5 (ρ ≈ 0.61 < 1 − ε = 0.8).
    let k = 0;
    const logRatio = s.actions.map((a) => (a ? (k++ % 2 === 0 ? 1.5 : -0.5) : 0));
    const shifted = { ...s, oldLogprobs: s.oldLogprobs.map((v, t) => (s.actions[t] ? v - logRatio[t] : 0)) };
    const high = logRatio.filter((x) => x === 1.5).length;
    const low = logRatio.filter((x) => x === -0.5).length;
    const n = high + low;
    const A = -0.8;
    const c: PolicyLossConfig = { ...TABLE_GRPO.loss, beta: 0, clipLow: 0.2, clipHigh: 0.2, dualClip: null };
    // Without the dual clip: the high tokens give min(ρA, 1.2A) = ρA = −0.8·e^1.5; the low ones min(ρA, 0.8A) = 0.8A (clipped).
    const plain = await grads([shifted], c);
    expect(plain.loss).toBeCloseTo(-(high * A * Math.exp(1.5) + low * 0.8 * A) / n, 5);
    expect(plain.clipFraction).toBeCloseTo(low / n, 12);
    expect(plain.dualClipFraction).toBe(0);
    expect((await flat(plain.grads)).some((x) => x !== 0)).toBe(true);
    // With c = 3: the high tokens give max(ρA, cA) = 3A = −2.4, a constant; every term is flat now.
    const dual = await grads([shifted], { ...c, dualClip: 3 });
    expect(dual.loss).toBeCloseTo(-(high * 3 * A + low * 0.8 * A) / n, 5);
    expect(dual.clipFraction).toBeCloseTo(low / n, 12);
    expect(dual.dualClipFraction).toBeCloseTo(high / n, 12);
    expect(dual.approxKl).toBeCloseTo((high * (Math.exp(1.5) - 1 - 1.5) + low * (Math.exp(-0.5) - 1 + 0.5)) / n, 4);
    expect((await flat(dual.grads)).every((x) => x === 0)).toBe(true);
    // A > 0 never meets the floor: the dual clip changes nothing.
    const positive = { ...shifted, advantage: 0.8 };
    const a = await grads([positive], c);
    const b = await grads([positive], { ...c, dualClip: 3 });
    expect(b.loss).toBe(a.loss);
    expect(await flat(b.grads)).toEqual(await flat(a.grads));
    expect(b.dualClipFraction).toBe(0);
    await expect(grads([positive], { ...c, dualClip: 1 })).rejects.toThrow(/dualClip must be a number > 1/);
    for (const r of [plain, dual, a, b]) dispose(r.grads);
  });

  it('logs the entropy of the current policy on the trained tokens', async () => {
    const seqs = await sequences(2, 8, [1, -1]);
    const r = await grads(seqs);
    let sum = 0;
    let count = 0;
    for (const s of seqs) {
      const len = s.tokens.length - 1;
      const logits = forwardLogits(params, config, tf.tensor2d([s.tokens.slice(0, -1)], [1, len], 'int32'));
      const p = await tf.softmax(logits).data();
      logits.dispose();
      s.actions.forEach((a, t) => {
        if (!a) return;
        for (let v = 0; v < config.vocabSize; v++) {
          const q = p[t * config.vocabSize + v];
          if (q > 0) sum -= q * Math.log(q);
        }
        count++;
      });
    }
    expect(r.entropy).toBeGreaterThan(0);
    expect(r.entropy).toBeLessThanOrEqual(Math.log(config.vocabSize) + 1e-6);
    expect(r.entropy).toBeCloseTo(sum / count, 4);
    dispose(r.grads);
  });

  it('sequence-mean weights each context equally; the KL term is zero against itself', async () => {
    const seqs = await sequences(2, 4, [1, 1]);
    const w = aggregationWeights(seqs, 'sequence-mean');
    const per = w.map((row) => row.reduce((a, b) => a + b, 0));
    expect(per[0]).toBeCloseTo(0.5, 12);
    expect(per[1]).toBeCloseTo(0.5, 12);
    const c = { ...TABLE_GRPO.loss, beta: 0.1 };
    const withRef = await withReferenceLogprobs(toyScorer(params, config), seqs, c, 1000);
    // The reference is the policy itself: its log-probs are the behaviour ones (ρ = 1 sequences).
    const refDiff = withRef.flatMap((s, i) => s.actions.map((a, t) => (a ? Math.abs((s.refLogprobs as number[])[t] - seqs[i].oldLogprobs[t]) : 0)));
    expect(Math.max(...refDiff)).toBeLessThan(1e-5);
    const r = await policyGradients(toyScorer(params, config), packRl(withRef, aggregationWeights(withRef, c.aggregation), 1000), c);
    expect(r.kl).toBeCloseTo(0, 6);
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
