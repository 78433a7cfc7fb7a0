import { describe, expect, it } from 'vitest';
import { REWARD_DEFAULTS, episodeReward, lengthPenalty, partialCredit, validateRewardConfig } from './reward';

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
    // 0.2 / log2(2 + 8/√5) = 0.080656
    expect(partialCredit(-5, 3)).toBeCloseTo(0.0806558089, 9);
    // max(−3, −4) = −3: √|2 − 3| = 1, so 0.2 / log2(3) = 0.126186
    expect(partialCredit(-3, -4)).toBeCloseTo(0.1261859507, 9);
  });

  it('an episode combines score, root, critical-path clone and call penalties', () => {
    const trace = { correct: true, rounds: 3, tokens: { root: 100, clonesTotal: 70, longestClonePerRound: [40, 20, 10], criticalPath: 170, total: 170 } };
    const r = episodeReward(trace, { value: 5, truthValue: 5 }, REWARD_DEFAULTS);
    // 1 − 0.129065 − max(P(40), P(20), P(10)) − max(0, 0.1·3 − 0.2) = 1 − 0.129065 − 0.044240 − 0.1
    expect(r.reward).toBeCloseTo(0.726695004, 8);
    expect(r.callPenalty).toBeCloseTo(0.1, 12);
    const wrong = episodeReward({ ...trace, correct: false, rounds: 0, tokens: { ...trace.tokens, longestClonePerRound: [] } }, { value: 10, truthValue: 12 }, REWARD_DEFAULTS);
    expect(wrong.reward).toBeCloseTo(0.1490630683 - 0.1290651526, 8);
    const noPartial = episodeReward({ ...trace, correct: false }, { value: 10, truthValue: 12 }, { ...REWARD_DEFAULTS, partialCredit: false });
    expect(noPartial.score).toBe(0);
    const noAnswer = episodeReward({ ...trace, correct: false }, { value: null, truthValue: 12 }, REWARD_DEFAULTS);
    expect(noAnswer.score).toBe(0);
  });

  it('validates its configuration', () => {
    expect(() => validateRewardConfig({ rootRho: 0 })).toThrow(/rootRho must be a finite number > 0/);
    expect(() => validateRewardConfig({ clonePmax: -1 })).toThrow(/clonePmax must be a finite number ≥ 0/);
  });
});
