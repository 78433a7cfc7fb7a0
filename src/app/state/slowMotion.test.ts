import { describe, expect, it } from 'vitest';
import type { StepAnatomy } from '../../core/rl/anatomy';

import type { StepMetrics } from '../../core/rl/grpoStep';
import type { ContextTrace, EpisodeTrace } from '../../core/rollout/trace';
import { sampleTrace } from '../../core/rollout/traceFixture';
import { baselineText, deltaColour, deltaScale, groupColumns, rewardTerms } from './slowMotion';
import { defaultGrpoConfig } from '../../core/runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();

const rootOf = (t: EpisodeTrace) => t.contexts[0];
const clone = (over: Partial<ContextTrace>): ContextTrace => ({
  id: 1,
  role: 'clone',
  parent: 0,
  round: 0,
  subtask: '1+2',
  budget: 8,
  tokens: [3, 22, 62, 23, 4, 10, 24, 1],
  text: '',
  writers: 'pppppggg',
  logprobs: [-1, -2, -0.5],
  generatedTokens: 3,
  answer: '3',
  violation: null,
  violationDetail: null,
  ...over,
});

/** Two episodes of one prompt: R 0.8 (with an ungated and a gated clone) and R 0.2. */
function anatomy(): StepAnatomy {
  const mean = 0.5;
  const std = Math.sqrt((0.3 ** 2 * 2) / 1);
  const A = 0.3 / (std + 1e-6);
  const reward = (r: number) => ({ reward: r, score: r + 0.1, rootPenalty: 0.05, clonePenalty: 0.05, callPenalty: 0, budgetPenalty: 0 });
  const good = sampleTrace({
    reward: reward(0.8),
    contexts: [
      { ...rootOf(sampleTrace()), credit: { advantage: A, weight: 1, gated: false, reward: 0.8 } },
      clone({ id: 1, credit: { advantage: A, weight: 1, gated: false, reward: 0.8 } }),
      clone({ id: 2, answer: null, violation: 'clone_over_budget', generatedTokens: 8, credit: { advantage: 0, weight: 1, gated: true, reward: 0 } }),
    ],
  });
  const bad = sampleTrace({
    correct: false,
    answer: '4',
    reward: reward(0.2),
    contexts: [{ ...rootOf(sampleTrace()), credit: { advantage: -A, weight: 1, gated: false, reward: 0.2 } }],
  });
  return {
    step: 1,
    policyVersionBefore: 0,
    policyVersionAfter: 1,
    metrics: { step: 1, updates: 1 } as StepMetrics,
    settings: {
      group: 2,
      batch: 1,
      miniBatch: null,
      innerEpochs: 1,
      lr: 1e-4,
      stdNormalize: true,
      credit: 'ratio',
      gating: true,
      gateMode: 'reference',
      gatedKl: true,
      ratioClamp: TABLE_GRPO.advantage.ratioClamp,
      eps: 1e-6,
      clipLow: 0.2,
      clipHigh: 0.2,
      beta: 0,
      temperature: 1,
    },
    traces: [good, bad],
    groups: [{ problemId: 'p', prompt: '1+2', truth: '3', episodes: [0, 1], mean, std, zeroVariance: false, trained: true }],
    after: [
      [
        [-0.05, -0.1, -0.2],
        [-0.5, -1.5, -0.5],
        [-1, -2, -0.5],
      ],
      [[-0.2, -0.3, -0.4]],
    ],
  };
}

describe('slow-motion view', () => {
  it('lists the reward terms so that they add up to R', () => {
    const b = { reward: 0.77, score: 1, rootPenalty: 0.1, clonePenalty: 0.05, callPenalty: 0.02, budgetPenalty: 0.03, tokenPenalty: 0.03 };
    const terms = rewardTerms(b);
    expect(terms.map((t) => t.label)).toEqual(['score', 'root length', 'clone length', 'calls', 'unused budget', 'tokens']);
    expect(terms.reduce((s, t) => s + t.value, 0)).toBeCloseTo(b.reward, 12);
  });

  it('pairs each generated token with its log-prob before and after, per context, with its credit', () => {
    const cols = groupColumns(anatomy(), 0);
    expect(cols).toHaveLength(2);
    const [good, bad] = cols;
    expect(good.advantage).toBeGreaterThan(0);
    expect(bad.advantage).toBeCloseTo(-good.advantage, 12);
    const [root, ungated, gated] = good.contexts;
    // The root's three generated tokens `<ans>`, `3`, `<eos>`, before → after.
    expect(root.tokens.map((t) => t.text)).toEqual(['<ans>', '3', '<eos>']);
    expect(root.tokens.map((t) => [t.before, t.after])).toEqual([
      [-0.1, -0.05],
      [-0.2, -0.1],
      [-0.3, -0.2],
    ]);
    expect(root.meanDelta).toBeCloseTo((0.05 + 0.1 + 0.1) / 3, 12);
    expect(root.factor).toBeNull();
    // Ungated clone: r_clone = R, factor clamp(R / R) = 1; gated: no factor, A 0.
    expect(ungated.factor).toBe(1);
    expect(ungated.meanDelta).toBeCloseTo((0.5 + 0.5 + 0) / 3, 12);
    expect(gated).toMatchObject({ gated: true, advantage: 0, factor: null, violation: 'clone_over_budget' });
    expect(gated.meanDelta).toBe(0);
    // Colour scale: the group's largest change (0.5 nats here); full colour there, none at 0.
    expect(deltaScale(cols)).toBeCloseTo(0.5, 12);
    expect(deltaColour(0.5, 0.5)).toBe('color-mix(in srgb, var(--ok) 60%, transparent)');
    expect(deltaColour(-0.25, 0.5)).toBe('color-mix(in srgb, var(--error) 30%, transparent)');
    expect(deltaColour(0, 0)).toBe('color-mix(in srgb, var(--ok) 0%, transparent)');
  });

  it('says how the baseline was formed, and names a group it cannot show', () => {
    const a = anatomy();
    expect(baselineText(a, 0)).toMatch(/^A = \(R − 0\.500\) \/ \(0\.424 \+ 0\.000001\)/);
    a.groups[0] = { ...a.groups[0], zeroVariance: true, trained: false };
    expect(baselineText(a, 0)).toMatch(/no signal, the group is skipped/);
    a.settings.stdNormalize = false;
    a.groups[0] = { ...a.groups[0], zeroVariance: false, trained: true };
    expect(baselineText(a, 0)).toMatch(/Dr\. GRPO/);
    expect(() => groupColumns(a, 3)).toThrow(/no prompt group 3/);
  });
});
