import { describe, expect, it } from 'vitest';
import { Rng } from '../rng';
import { sampleFromLogits, topKProbs } from './sample';

const logits = new Float32Array([0.5, 2.0, -1.0, 1.5, 0.0]);
const V = logits.length;

function logSoftmax(values: number[], id: number): number {
  const max = Math.max(...values);
  return values[id] - max - Math.log(values.reduce((a, v) => a + Math.exp(v - max), 0));
}

describe('sampleFromLogits', () => {
  it('greedy takes the argmax among allowed tokens', () => {
    const rng = new Rng(1);
    expect(sampleFromLogits(logits, 0, V, { temperature: 1, topK: 0, greedy: true }, rng).id).toBe(1);
    expect(sampleFromLogits(logits, 0, V, { temperature: 1, topK: 0, greedy: true }, rng, new Set([1])).id).toBe(3);
    // A row at an offset inside a batch of rows.
    const batch = new Float32Array([...logits, 9, 0, 0, 0, 0]);
    expect(sampleFromLogits(batch, V, V, { temperature: 1, topK: 0, greedy: true }, rng).id).toBe(0);
  });

  it('logprob is log softmax(logits / temperature) over the allowed tokens, untruncated by top-k', () => {
    const rng = new Rng(2);
    const scaled = [...logits].map((v) => v / 0.5);
    const s = sampleFromLogits(logits, 0, V, { temperature: 0.5, topK: 0 }, rng);
    expect(s.logprob).toBeCloseTo(logSoftmax(scaled, s.id), 10);
    const g = sampleFromLogits(logits, 0, V, { temperature: 0.5, topK: 2, greedy: true }, rng);
    expect(g.logprob).toBeCloseTo(logSoftmax(scaled, 1), 10);
    // Banning token 1 renormalises over the remaining four.
    const b = sampleFromLogits(logits, 0, V, { temperature: 1, topK: 0, greedy: true }, rng, new Set([1]));
    expect(b.logprob).toBeCloseTo(logSoftmax([0.5, -1.0, 1.5, 0.0], 2), 10);
    // Hand computation: logits [0, ln 3] at temperature 1 give p = [1/4, 3/4].
    const two = new Float32Array([0, Math.log(3)]);
    const h = sampleFromLogits(two, 0, 2, { temperature: 1, topK: 0, greedy: true }, rng);
    expect(h.id).toBe(1);
    expect(h.logprob).toBeCloseTo(Math.log(0.75), 6);
  });

  it('never draws banned or out-of-top-k tokens, and draws in proportion to the probabilities', () => {
    const rng = new Rng(3);
    const banned = new Set([1]);
    const counts = new Array<number>(V).fill(0);
    for (let i = 0; i < 4000; i++) counts[sampleFromLogits(logits, 0, V, { temperature: 1, topK: 0 }, rng, banned).id]++;
    expect(counts[1]).toBe(0);
    const allowed = [0, 2, 3, 4];
    const z = allowed.reduce((a, i) => a + Math.exp(logits[i]), 0);
    for (const i of allowed) expect(counts[i] / 4000).toBeCloseTo(Math.exp(logits[i]) / z, 1);

    const topCounts = new Array<number>(V).fill(0);
    for (let i = 0; i < 2000; i++) {
      const s = sampleFromLogits(logits, 0, V, { temperature: 1, topK: 2 }, rng);
      topCounts[s.id]++;
      expect(s.logprob).toBeCloseTo(logSoftmax([...logits], s.id), 6);
    }
    expect(topCounts[0] + topCounts[2] + topCounts[4]).toBe(0);
    expect(topCounts[1]).toBeGreaterThan(topCounts[3]);
  });

  it('gives the same sequence for the same seed', () => {
    const draw = (seed: number) => {
      const rng = new Rng(seed);
      return Array.from({ length: 50 }, () => sampleFromLogits(logits, 0, V, { temperature: 1.3, topK: 3 }, rng).id);
    };
    expect(draw(7)).toEqual(draw(7));
    expect(draw(7)).not.toEqual(draw(8));
  });

  it('validates its options by name', () => {
    const rng = new Rng(4);
    expect(() => sampleFromLogits(logits, 0, V, { temperature: 0, topK: 0 }, rng)).toThrow(/temperature/);
    expect(() => sampleFromLogits(logits, 0, V, { temperature: Number.NaN, topK: 0 }, rng)).toThrow(/temperature/);
    expect(() => sampleFromLogits(logits, 0, V, { temperature: 1, topK: -1 }, rng)).toThrow(/topK/);
    expect(() => sampleFromLogits(logits, 0, V, { temperature: 1, topK: 1.5 }, rng)).toThrow(/topK/);
    expect(() => sampleFromLogits(logits, 3, V, { temperature: 1, topK: 0 }, rng)).toThrow(/offset/);
    expect(() => sampleFromLogits(logits, 0, V, { temperature: 1, topK: 0 }, rng, new Set([0, 1, 2, 3, 4]))).toThrow(/banned/);
    // Greedy needs no temperature; its logprob then uses temperature 1.
    const g = sampleFromLogits(logits, 0, V, { temperature: 0, topK: 0, greedy: true }, rng);
    expect(g.logprob).toBeCloseTo(logSoftmax([...logits], 1), 10);
  });
});

describe('topKProbs', () => {
  it('lists the k most likely tokens with their tempered probabilities', () => {
    const top = topKProbs(logits, 0, V, 3, 2);
    expect(top.map((t) => t.id)).toEqual([1, 3, 0]);
    const scaled = [...logits].map((v) => v / 2);
    for (const t of top) expect(Math.log(t.prob)).toBeCloseTo(logSoftmax(scaled, t.id), 10);
    expect(topKProbs(logits, 0, V, 10, 1).reduce((a, t) => a + t.prob, 0)).toBeCloseTo(1, 10);
    expect(() => topKProbs(logits, 0, V, 0, 1)).toThrow(/k must/);
    expect(() => topKProbs(logits, 0, V, 2, -1)).toThrow(/temperature/);
  });
});
