import { describe, expect, it } from 'vitest';
import { arithmetic } from '../tasks/arithmetic';
import type { Problem } from '../tasks/types';
import { meanReward } from './evaluate';
import { defaultGrpoConfig } from '../runConfigTargets';
import { rewardAt } from '../rl/grpoStep';

// The table's reward as a run's first step scores it (no token cost yet).
const REWARD = rewardAt(defaultGrpoConfig(), 0);

const problem = (truth: string): Problem => ({ task: 'arithmetic', id: truth, prompt: '1+1', truth, meta: {} });
/** Only what the reward reads. */
const episode = (answer: string | null, correct: boolean, root: number, clones: number[], rounds: number) => ({
  answer,
  correct,
  rounds,
  tokens: { root, longestClonePerRound: clones, total: root + clones.reduce((a, b) => a + b, 0) },
  contexts: [],
});

describe('meanReward on held-out episodes', () => {
  it('is the mean of the SELFCEST rewards, checked by hand', () => {
    // 1: correct, root 40 ≤ τ 64, one clone of 20 ≤ 32, one round: reward 1.
    // 2: correct, root 128: 1 − 0.3·(1 − e^{−64/64}); clone 64: − 0.2·(1 − e^{−32/32}); 3 rounds: − (0.3 − 0.2).
    // 3: no answer: 0.
    const r2 = 1 - 0.3 * (1 - Math.exp(-1)) - 0.2 * (1 - Math.exp(-1)) - 0.1;
    const got = meanReward(
      arithmetic,
      [problem('5'), problem('7'), problem('9')],
      [episode('5', true, 40, [20], 1), episode('7', true, 128, [64, 10, 5], 3), episode(null, false, 30, [], 0)],
      REWARD,
    );
    expect(got).toBeCloseTo((1 + r2 + 0) / 3, 12);
  });

  it('gives partial credit to a near miss and names a count mismatch', () => {
    const got = meanReward(arithmetic, [problem('100')], [episode('98', false, 10, [], 0)], REWARD);
    expect(got).toBeCloseTo(0.2 / Math.log2(2 + 2 / Math.sqrt(102)), 12);
    expect(() => meanReward(arithmetic, [problem('1')], [], REWARD)).toThrow(/0 episodes for 1 problems/);
  });
});
