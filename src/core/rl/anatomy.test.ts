import { toyPolicyModel, toyScorer } from '../policyModel';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { presetConfig } from '../model/config';
import { initParams } from '../model/params';
import { arithmetic } from '../tasks/arithmetic';
import { Tokenizer } from '../tokenizer/tokenizer';
import { tokenId } from '../tokenizer/vocab';
import { stepAnatomy } from './anatomy';
import { ADAM_MOMENTS, AdamW } from '../optim/adamw';
import { type GrpoConfig, type RewardFn, grpoStep } from './grpoStep';
import { defaultGrpoConfig } from '../runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();

const tok = Tokenizer.builtin();
const encode = (t: string) => tok.encode(t);
const config = presetConfig('tiny');

beforeAll(async () => {
  await initBackend('wasm');
});

const DIGITS = new Set([...'0123456789'].map(tokenId));
/** 1 when the root's first generated token is a digit: a reward the first update can move. */
const digitFirst: RewardFn = (trace) => {
  const root = trace.contexts[0];
  const reward = DIGITS.has(root.tokens[root.writers.indexOf('g')]) ? 1 : 0;
  return { reward, score: reward, rootPenalty: 0, clonePenalty: 0, callPenalty: 0, budgetPenalty: 0 };
};

async function anatomyOf(lr: number, seed = 3) {
  const cfg: GrpoConfig = {
    ...TABLE_GRPO,
    task: 'arithmetic',
    steps: 1,
    seed,
    group: 8,
    batch: 4,
    lr,
    rollout: { ...TABLE_GRPO.rollout, rootMaxTokens: 4 },
    loss: { ...TABLE_GRPO.loss, beta: 0 },
  };
  const params = initParams(config, seed);
  const optimizer = new AdamW(params, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr });
  try {
    const r = await grpoStep(
      { model: toyPolicyModel({ config, params }, encode), reference: null, optimizer, task: arithmetic, encode, rewardFn: digitFirst },
      cfg,
      0,
      0,
    );
    return await stepAnatomy(toyScorer(params, config), cfg, r, 0, 1);
  } finally {
    optimizer.dispose();
    params.forEach((p) => p.dispose());
  }
}

describe('stepAnatomy', () => {
  it('groups the step by prompt with the baseline the advantages use, and one after-log-prob per generated token', async () => {
    const a = await anatomyOf(1e-2);
    expect(a.groups).toHaveLength(4);
    expect(a.groups.every((g) => g.episodes.length === 8)).toBe(true);
    expect(a.traces).toHaveLength(32);
    for (const g of a.groups) {
      // Hand-computed: mean and sample std (N − 1) of the group's rewards.
      const rs = g.episodes.map((i) => a.traces[i].reward!.reward);
      const mean = rs.reduce((x, y) => x + y, 0) / rs.length;
      const std = Math.sqrt(rs.reduce((x, r) => x + (r - mean) ** 2, 0) / (rs.length - 1));
      expect(g.mean).toBeCloseTo(mean, 12);
      expect(g.std).toBeCloseTo(std, 12);
      expect(g.zeroVariance).toBe(rs.every((r) => r === rs[0]));
      expect(g.trained).toBe(!g.zeroVariance);
      for (const i of g.episodes) {
        expect(a.traces[i].problemId).toBe(g.problemId);
        const root = a.traces[i].contexts[0];
        // A trained group's root advantage is (R − mean) / (std + ε); a skipped one's is 0.
        const expected = g.zeroVariance ? 0 : (a.traces[i].reward!.reward - mean) / (std + 1e-6);
        expect(root.credit!.advantage).toBeCloseTo(expected, 9);
      }
    }
    a.traces.forEach((t, i) => t.contexts.forEach((c, j) => expect(a.after[i][j]).toHaveLength(c.logprobs.length)));
    expect(a.settings).toMatchObject({ group: 8, batch: 4, lr: 1e-2, beta: 0, stdNormalize: true });
  });

  it('reads the behaviour log-probs back unchanged when the update moves nothing (lr 0)', async () => {
    const a = await anatomyOf(0);
    let n = 0;
    a.traces.forEach((t, i) =>
      t.contexts.forEach((c, j) =>
        c.logprobs.forEach((before, k) => {
          expect(a.after[i][j][k]).toBeCloseTo(before, 4);
          n++;
        }),
      ),
    );
    expect(n).toBeGreaterThan(32);
  });

  it('shows the update raising the surrogate: Σ A·(after − before) > 0 over the trained tokens', async () => {
    const a = await anatomyOf(1e-2);
    let surrogate = 0;
    let moved = 0;
    a.traces.forEach((t, i) =>
      t.contexts.forEach((c, j) => {
        if (!c.credit || c.credit.weight === 0) return;
        c.logprobs.forEach((before, k) => {
          const d = a.after[i][j][k] - before;
          surrogate += c.credit!.advantage * d;
          if (Math.abs(d) > 1e-3) moved++;
        });
      }),
    );
    expect(a.groups.some((g) => g.trained)).toBe(true);
    expect(moved).toBeGreaterThan(0);
    expect(surrogate).toBeGreaterThan(0);
  });
});
