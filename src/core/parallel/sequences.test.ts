import { describe, expect, it } from 'vitest';
import { type RlSequence, aggregationWeights, packRl, packRlPlan } from '../rl/ppoLoss';
import { GROUP_OVERHEAD_CELLS, bucketByLength, groupOverheadCells, lengthGroups, shareGroups } from './sequences';

describe('lengthGroups', () => {
  it('cuts the length order where padded cells plus a fixed cost a group are fewest', () => {
    expect(groupOverheadCells()).toBe(GROUP_OVERHEAD_CELLS.cpu); // these tests run on cpu
    expect(GROUP_OVERHEAD_CELLS.cpu).toBe(32);
    // One group 5 × 10 + 32 = 82 cells, against (3 × 2 + 32) + (2 × 10 + 32) = 90: one group.
    expect(lengthGroups([2, 2, 2, 10, 10], 100)).toEqual([[0, 1, 2, 3, 4]]);
    // One group 10 × 40 + 32 = 432, against (8 × 2 + 32) + (2 × 40 + 32) = 160: two.
    expect(lengthGroups([2, 2, 2, 2, 2, 2, 2, 2, 40, 40], 1000)).toEqual([
      [0, 1, 2, 3, 4, 5, 6, 7],
      [8, 9],
    ]);
    // The cap: 2 × 40 = 80 cells is over 60, so the two long ones go alone.
    expect(lengthGroups([2, 2, 2, 2, 2, 2, 2, 2, 40, 40], 60)).toEqual([[0, 1, 2, 3, 4, 5, 6, 7], [8], [9]]);
    // At most maxRows a group.
    expect(lengthGroups([3, 3, 3, 3, 3], 1000, 2).map((g) => g.length)).toEqual([1, 2, 2]);
    // With WebGPU's overhead (1024 cells) one group, 400 + 1024, beats two, 16 + 80 + 2 · 1024.
    expect(lengthGroups([2, 2, 2, 2, 2, 2, 2, 2, 40, 40], 1000, 512, GROUP_OVERHEAD_CELLS.webgpu)).toEqual([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]);
  });

  it('sorts by length then index, leaves out lengths under 1, and puts an over-long item alone', () => {
    expect(lengthGroups([5, 3, 5], 1000)).toEqual([[1, 0, 2]]);
    expect(lengthGroups([0, 3], 1000)).toEqual([[1]]);
    expect(lengthGroups([100], 50)).toEqual([[0]]);
    expect(lengthGroups([], 50)).toEqual([]);
  });

  it('pads fewer cells than a greedy fill on a warm start’s spread of lengths', () => {
    const lengths = Array.from({ length: 117 }, (_, i) => 13 + ((i * 37) % 98));
    const cells = (groups: number[][]) => groups.reduce((n, g) => n + g.length * Math.max(...g.map((i) => lengths[i])), 0);
    const real = lengths.reduce((a, b) => a + b, 0);
    const groups = lengthGroups(lengths, 2048);
    expect(groups.flat().sort((a, b) => a - b)).toEqual(lengths.map((_, i) => i));
    expect(groups.every((g) => g.length * Math.max(...g.map((i) => lengths[i])) <= 2048)).toBe(true);
    expect(cells(groups) / real).toBeLessThan(1.15);
  });
});

describe('shareGroups', () => {
  it('caps groups at a third of a share and spreads them costliest first onto the lightest share', () => {
    // Total 26 cells, 2 shares: cap ceil(26 / 6) = 5, so every item is its own group (cost
    // length + 32): 41 (item 0) → A, 39 (2) → B, 37 (1) → B (76), 35 (4) → A (76), 34 (3) →
    // A (tie: the first share). Each share's groups in length order.
    expect(shareGroups([9, 5, 7, 2, 3], 2, 1000)).toEqual([
      [[3], [4], [0]],
      [[1], [2]],
    ]);
    expect(shareGroups([4, 4, 4], 1, 1000)).toEqual([[[0, 1, 2]]]);
    expect(shareGroups([1], 3, 1000)).toEqual([[[0]], [], []]);
    expect(() => shareGroups([1], 0, 10)).toThrow(/parts must be a positive integer \(got 0\)/);
  });

  it('bucketByLength pads by the same groups', () => {
    const seqs = [5, 3, 5].map((n) => ({ tokens: Array(n + 1).fill(2), weights: Array(n).fill(1) }));
    const [b] = bucketByLength(seqs, 1000);
    expect(b.members).toEqual([1, 0, 2]);
    expect([b.rows, b.length]).toEqual([3, 5]);
  });
});

describe('packRlPlan', () => {
  const seq = (n: number, weight = 1): RlSequence => ({
    tokens: Array(n + 1).fill(3),
    actions: Array(n).fill(1),
    oldLogprobs: Array(n).fill(-1),
    advantage: 0.5,
    weight,
  });
  it('splits one update into shares whose packed weights add up to the whole update, leaving out what trains nothing', () => {
    const seqs = [seq(10), seq(4), seq(7), seq(6, 0), seq(3)];
    const weights = aggregationWeights(seqs, 'token-mean');
    const { batches, plan } = packRlPlan(seqs, weights, 2, 64);
    const shares = plan.shares.map((sh) => sh.map((g) => batches[g]));
    expect([...plan.order].sort()).toEqual(batches.map((_, i) => i));
    const members = shares.flatMap((bs) => bs.flatMap((b) => b.members));
    expect(members.sort()).toEqual([0, 1, 2, 4]); // the weight-0 context goes nowhere
    const total = (bs: readonly { weights: Float32Array }[]) => bs.reduce((n, b) => n + b.weights.reduce((a, w) => a + w, 0), 0);
    expect(total(shares[0]) + total(shares[1])).toBeCloseTo(total(packRl(seqs, weights, 64)), 6);
    const cells = shares.map((bs) => bs.reduce((n, b) => n + b.weights.reduce((a, w) => a + (w > 0 ? 1 : 0), 0), 0));
    expect(cells[0] + cells[1]).toBe(10 + 4 + 7 + 3);
    expect(Math.abs(cells[0] - cells[1])).toBeLessThanOrEqual(4);
  });
});
