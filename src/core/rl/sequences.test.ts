import { describe, expect, it } from 'vitest';
import { type RlSequence, aggregationWeights, packRl, shareSequences } from './grpo';
import { shareByLength } from './sequences';

describe('shareByLength', () => {
  it('puts the longest first onto the lightest share, each share in index order', () => {
    // By hand, longest first: 9 → A (9), 7 → B (7), 5 → B (12), 3 → A (12), 2 → A (tie: the first share).
    expect(shareByLength([9, 5, 7, 2, 3], 2)).toEqual([
      [0, 3, 4],
      [1, 2],
    ]);
    expect(shareByLength([4, 4, 4], 1)).toEqual([[0, 1, 2]]);
    expect(shareByLength([1], 3)).toEqual([[0], [], []]);
    expect(() => shareByLength([1], 0)).toThrow(/parts must be a positive integer \(got 0\)/);
  });
});

describe('shareSequences', () => {
  const seq = (n: number, weight = 1): RlSequence => ({ tokens: Array(n + 1).fill(3), actions: Array(n).fill(1), oldLogprobs: Array(n).fill(-1), advantage: 0.5, weight });
  it('splits one update into shares whose packed weights add up to the whole update, leaving out what trains nothing', () => {
    const seqs = [seq(10), seq(4), seq(7), seq(6, 0), seq(3)];
    const weights = aggregationWeights(seqs, 'token-mean');
    const shares = shareSequences(seqs, weights, 2);
    expect(shares.flatMap((s) => s.seqs)).toHaveLength(4); // the weight-0 context goes nowhere
    const total = (ws: readonly number[][]) => ws.flat().reduce((a, b) => a + b, 0);
    expect(total(shares[0].weights) + total(shares[1].weights)).toBeCloseTo(total(weights), 12);
    const packedCells = shares.map((s) => packRl(s.seqs, s.weights, 64).reduce((n, b) => n + b.weights.reduce((a, w) => a + (w > 0 ? 1 : 0), 0), 0));
    expect(packedCells[0] + packedCells[1]).toBe(10 + 4 + 7 + 3);
    expect(Math.abs(packedCells[0] - packedCells[1])).toBeLessThanOrEqual(4);
  });
});
