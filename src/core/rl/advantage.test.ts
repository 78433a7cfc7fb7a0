import { describe, expect, it } from 'vitest';
import type { Violation } from '../protocol/violations';
import { ADVANTAGE_DEFAULTS, computeAdvantages } from './advantage';

type Ctx = { role: 'root' | 'clone'; answer: string | null; violation: Violation | null };
const root = (violation: Violation | null = null): Ctx => ({ role: 'root', answer: violation ? null : '1', violation });
const clone = (answer: string | null, violation: Violation | null = null): Ctx => ({ role: 'clone', answer, violation });

/**
 * Group A (episodes 0–2): rewards 1, 0.01, 0.5 → mean 0.503333, sample std 0.495008,
 * A = (R − mean)/(std + 1e-6) = 1.003348, −0.996614, −0.006734.
 * Group B (episodes 3–4): rewards 0.2, 0.2 → zero variance, skipped.
 */
const episodes = [
  { contexts: [root(), clone('3'), clone(null, 'clone_no_answer')] },
  { contexts: [root(), clone(null, 'clone_over_budget')] },
  { contexts: [root()] },
  { contexts: [root(), clone('2')] },
  { contexts: [root('malformed_spawn')] },
];
const rewards = [1, 0.01, 0.5, 0.2, 0.2];
const groups = [
  [0, 1, 2],
  [3, 4],
];

describe('advantages', () => {
  it('GRPO with std, ratio credit and gating equals the hand-computed values', () => {
    const { credits, stats } = computeAdvantages(episodes, rewards, groups, ADVANTAGE_DEFAULTS);
    expect(credits[0][0].advantage).toBeCloseTo(1.0033479145, 8);
    expect(credits[1][0].advantage).toBeCloseTo(-0.9966140359, 8);
    expect(credits[2][0].advantage).toBeCloseTo(-0.0067338786, 8);
    // A clone with an answer: r_clone = R, ratio 1.
    expect(credits[0][1]).toMatchObject({ weight: 1, gated: false, reward: 1 });
    expect(credits[0][1].advantage).toBeCloseTo(1.0033479145, 8);
    // Gated clones: weight 0 whatever their advantage.
    expect(credits[0][2]).toMatchObject({ weight: 0, gated: true, reward: 0 });
    expect(credits[1][1]).toMatchObject({ weight: 0, gated: true });
    // Zero-variance group: skipped and counted.
    expect(credits[3].map((c) => c.weight)).toEqual([0, 0]);
    expect(credits[4][0]).toMatchObject({ advantage: 0, weight: 0, gated: false });
    expect(stats).toEqual({ groups: 2, zeroVarianceGroups: 1, gatedContexts: 2, contexts: 9 });
  });

  it('without gating the ratio credit scales and clamps', () => {
    const { credits } = computeAdvantages(episodes, rewards, groups, { ...ADVANTAGE_DEFAULTS, gating: false });
    // Episode 0, clone without answer: r_clone = 1 − 0.05, ratio 0.95 → 1.003348·0.95 = 0.953181.
    expect(credits[0][2].advantage).toBeCloseTo(0.9531805188, 8);
    expect(credits[0][2].weight).toBe(1);
    // Episode 1: r_clone = 0.01 − 0.05 = −0.04, ratio −4 → clamped to −1.5: −0.996614·−1.5 = 1.494921.
    expect(credits[1][1].advantage).toBeCloseTo(1.4949210539, 8);
  });

  it('broadcast credit, Dr. GRPO (no std) and root gating', () => {
    const { credits } = computeAdvantages(episodes, rewards, groups, { ...ADVANTAGE_DEFAULTS, gating: false, credit: 'broadcast', stdNormalize: false });
    expect(credits[0].map((c) => c.advantage)).toEqual([credits[0][0].advantage, credits[0][0].advantage, credits[0][0].advantage]);
    expect(credits[0][0].advantage).toBeCloseTo(0.4966666667, 9);
    expect(credits[1][0].advantage).toBeCloseTo(-0.4933333333, 9);
    const gatedRoots = computeAdvantages(
      [{ contexts: [root('malformed_spawn')] }, { contexts: [root()] }],
      [0, 1],
      [[0, 1]],
      { ...ADVANTAGE_DEFAULTS, gateRoots: true },
    );
    expect(gatedRoots.credits[0][0]).toMatchObject({ gated: true, weight: 0 });
    expect(gatedRoots.credits[1][0]).toMatchObject({ gated: false, weight: 1 });
  });
});
