import { describe, expect, it } from 'vitest';
import { episodeReward, lengthPenalty, partialCredit, unusedBudget } from './reward';
import { checkRewardConfig } from '../runConfigTargets';
import { defaultGrpoConfig } from '../runConfigTargets';
import { rewardAt } from './grpoStep';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();
const TABLE_REWARD = rewardAt(TABLE_GRPO, 0);

const root = { role: 'root' as const, budget: null, generatedTokens: 100 };
const clone = (budget: number, generatedTokens: number) => ({ role: 'clone' as const, budget, generatedTokens });

describe('reward', () => {
  it('length penalty matches hand-computed values', () => {
    expect(lengthPenalty(64, 64, 64, 0.3)).toBe(0);
    // 0.3·(1 − e^(−36/64)) = 0.3·(1 − 0.569783) = 0.129065
    expect(lengthPenalty(100, 64, 64, 0.3)).toBeCloseTo(0.1290651526, 9);
    // 0.2·(1 − e^(−8/32)) = 0.044240
    expect(lengthPenalty(40, 32, 32, 0.2)).toBeCloseTo(0.0442398434, 9);
    expect(lengthPenalty(1e9, 32, 32, 0.2)).toBeCloseTo(0.2, 12);
  });

  it('partial credit matches hand-computed values', () => {
    // 0.2 / log2(2 + 2/√14) = 0.2 / log2(2.534522) = 0.149063
    expect(partialCredit(10, 12)).toBeCloseTo(0.1490630683, 9);
    // 0.2 / log2(2 + 2/√9) = 0.141339 (truth 5, answer 7: as before)
    expect(partialCredit(7, 5)).toBeCloseTo(0.1413390105, 9);
    // Negative numbers: the scale is √(2 + max(|A|, |B|)). 0.2 / log2(2 + 8/√7) = 0.085883
    expect(partialCredit(-5, 3)).toBeCloseTo(0.0858828057, 9);
    // 0.2 / log2(2 + 1/√6) = 0.157731
    expect(partialCredit(-3, -4)).toBeCloseTo(0.1577306793, 9);
  });

  it('partial credit is unchanged for non-negative numbers and ranks negative ones (truth −2 no longer scores 0)', () => {
    const before = (a: number, b: number) => 0.2 / Math.log2(2 + Math.abs(a - b) / Math.sqrt(Math.abs(2 + Math.max(a, b))));
    for (let a = 0; a <= 40; a += 3) for (let b = 0; b <= 40; b += 7) if (a !== b) expect(partialCredit(a, b), `${a} ${b}`).toBe(before(a, b));
    expect(partialCredit(1e6, 999_000)).toBe(before(1e6, 999_000));
    // Truth −2, answer −3: the old scale √|2 + max| = 0 gave 0; now 0.2 / log2(2 + 1/√5) = 0.154902.
    expect(before(-3, -2)).toBe(0);
    expect(partialCredit(-3, -2)).toBeCloseTo(0.1549018664, 9);
    expect(partialCredit(0, -2)).toBeCloseTo(0.1261859507, 9); // 0.2 / log2(2 + 2/2)
    // Closer is better on the negative side too, and negating both numbers changes nothing.
    expect(partialCredit(-3, -2)).toBeGreaterThan(partialCredit(-5, -2));
    expect(partialCredit(-5, -2)).toBeGreaterThan(partialCredit(-12, -2));
    for (const [a, b] of [
      [3, 2],
      [5, 7],
      [-5, 3],
      [40, -1],
    ])
      expect(partialCredit(-a, -b)).toBe(partialCredit(a, b));
  });

  it('counts the reserved clone budget the clones did not use', () => {
    expect(unusedBudget([root, clone(32, 10), clone(16, 16), clone(64, 70)])).toBe(22);
    const trace = { correct: true, rounds: 1, tokens: { root: 40, longestClonePerRound: [16], total: 66 }, contexts: [root, clone(32, 10), clone(16, 16)] };
    const free = episodeReward(trace, { value: 5, truthValue: 5 }, TABLE_REWARD);
    expect(free).toEqual({ reward: 1, score: 1, rootPenalty: 0, clonePenalty: 0, callPenalty: 0, budgetPenalty: 0, tokenPenalty: 0 });
    // 1 − 0.01·(32 − 10): a budget of 32 for a 10-token answer wastes 22 reserved tokens.
    const priced = episodeReward(trace, { value: 5, truthValue: 5 }, { ...TABLE_REWARD, budgetRate: 0.01 });
    expect(priced.budgetPenalty).toBeCloseTo(0.22, 12);
    expect(priced.reward).toBeCloseTo(0.78, 12);
  });

  it('charges every generated token, root and clones, at the token rate', () => {
    // 40 root + 10 + 16 clone tokens = 66; 1 − 0.002·66 = 0.868, and the other terms unchanged.
    const trace = { correct: true, rounds: 1, tokens: { root: 40, longestClonePerRound: [16], total: 66 }, contexts: [root, clone(32, 10), clone(16, 16)] };
    const r = episodeReward(trace, { value: 5, truthValue: 5 }, { ...TABLE_REWARD, tokenRate: 0.002 });
    expect(r.tokenPenalty).toBeCloseTo(0.132, 12);
    expect(r.reward).toBeCloseTo(0.868, 12);
    expect(r.rootPenalty + r.clonePenalty + r.callPenalty + r.budgetPenalty).toBe(0);
    expect(() => checkRewardConfig({ ...TABLE_REWARD, tokenRate: -1 })).toThrow(/reward: tokenRate must be .*\(got -1\)/);
  });

  it('an episode combines score, root, critical-path clone and call penalties', () => {
    const trace = {
      correct: true,
      rounds: 3,
      tokens: { root: 100, clonesTotal: 70, longestClonePerRound: [40, 20, 10], criticalPath: 170, total: 170 },
      contexts: [root, clone(64, 40), clone(32, 20), clone(16, 10)],
    };
    const r = episodeReward(trace, { value: 5, truthValue: 5 }, TABLE_REWARD);
    // 1 − 0.129065 − max(P(40), P(20), P(10)) − max(0, 0.1·3 − 0.2) = 1 − 0.129065 − 0.044240 − 0.1
    expect(r.reward).toBeCloseTo(0.726695004, 8);
    expect(r.callPenalty).toBeCloseTo(0.1, 12);
    expect(r.budgetPenalty).toBe(0); // rate 0 by default
    const wrong = episodeReward(
      { ...trace, correct: false, rounds: 0, tokens: { ...trace.tokens, longestClonePerRound: [] } },
      { value: 10, truthValue: 12 },
      TABLE_REWARD,
    );
    expect(wrong.reward).toBeCloseTo(0.1490630683 - 0.1290651526, 8);
    const noPartial = episodeReward({ ...trace, correct: false }, { value: 10, truthValue: 12 }, { ...TABLE_REWARD, partialCredit: false });
    expect(noPartial.score).toBe(0);
    const noAnswer = episodeReward({ ...trace, correct: false }, { value: null, truthValue: 12 }, TABLE_REWARD);
    expect(noAnswer.score).toBe(0);
  });

  it('validates its configuration', () => {
    expect(() => checkRewardConfig({ ...TABLE_REWARD, rootRho: 0 })).toThrow(/rootRho must be /);
    expect(() => checkRewardConfig({ ...TABLE_REWARD, clonePmax: -1 })).toThrow(/clonePmax must be /);
    expect(() => checkRewardConfig({ ...TABLE_REWARD, budgetRate: -0.1 })).toThrow(/budgetRate must be /);
    // A config read from outside must say every field: nothing is filled in.
    const { callFree: _, ...partial } = TABLE_REWARD;
    expect(() => checkRewardConfig(partial)).toThrow('reward: callFree is missing');
    expect(() => checkRewardConfig({ ...TABLE_REWARD, partialCredit: 1 as unknown as boolean })).toThrow(/partialCredit must be true or false/);
    expect(checkRewardConfig(TABLE_REWARD)).toEqual(TABLE_REWARD);
  });
});
