import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { presetConfig } from '../model/config';
import { initParams } from '../model/params';
import { arithmetic } from '../tasks/arithmetic';
import { Tokenizer } from '../tokenizer/tokenizer';
import { tokenId } from '../tokenizer/vocab';
import { ADAMW_DEFAULTS, AdamW } from './optim';
import { SFT_DEFAULTS, sftSequences, sftStep } from './sft';
import { episodeReward } from './reward';
import { GRPO_DEFAULTS, type GrpoConfig, type RewardFn, grpoStep } from './train';
import { scoredTrace } from '../rollout/trace';

const tok = Tokenizer.builtin();
const encode = (t: string) => tok.encode(t);
const config = presetConfig('tiny');
const task = arithmetic;

beforeAll(async () => {
  await initBackend('wasm');
});

const DIGITS = new Set([...'0123456789'].map(tokenId));
/** Toy objective: 1 when the root's first generated token is a digit (≈ 10/73 at random). */
const digitFirst: RewardFn = (trace) => {
  const root = trace.contexts[0];
  const first = root.tokens[root.writers.indexOf('g')];
  const reward = DIGITS.has(first) ? 1 : 0;
  return { reward, score: reward, rootPenalty: 0, clonePenalty: 0, callPenalty: 0 };
};

const toyConfig = (seed: number): GrpoConfig => ({
  ...GRPO_DEFAULTS,
  task: 'arithmetic',
  steps: 50,
  seed,
  group: 8,
  batch: 4,
  lr: 1e-2,
  rollout: { ...GRPO_DEFAULTS.rollout, rootMaxTokens: 3 },
  loss: { ...GRPO_DEFAULTS.loss, beta: 0 },
});

async function runToy(seed: number, steps: number) {
  const params = initParams(config, seed);
  const optimizer = new AdamW(params, { ...ADAMW_DEFAULTS, lr: 1e-2 });
  const cfg = toyConfig(seed);
  const rewards: number[] = [];
  const metrics = [];
  for (let s = 0; s < steps; s++) {
    const { metrics: m } = await grpoStep({ policy: { config, params }, reference: null, optimizer, task, encode, rewardFn: digitFirst }, cfg, s);
    rewards.push(m.meanReward);
    metrics.push(m);
  }
  optimizer.dispose();
  params.forEach((p) => p.dispose());
  return { rewards, metrics };
}

describe('GRPO training', () => {
  it('raises the mean reward of a toy objective within 50 steps', async () => {
    const { rewards } = await runToy(1, 50);
    const early = rewards.slice(0, 5).reduce((a, b) => a + b, 0) / 5;
    const late = rewards.slice(-5).reduce((a, b) => a + b, 0) / 5;
    expect(early).toBeLessThan(0.4);
    expect(late).toBeGreaterThan(0.8);
  });

  it('is deterministic under a fixed seed', async () => {
    const strip = (ms: { wallSec: number; rolloutTokensPerSec: number }[]) => ms.map(({ wallSec: _w, rolloutTokensPerSec: _r, ...rest }) => rest);
    const a = await runToy(7, 3);
    const b = await runToy(7, 3);
    expect(strip(a.metrics)).toEqual(strip(b.metrics));
    const c = await runToy(8, 3);
    expect(strip(c.metrics)).not.toEqual(strip(a.metrics));
  });

  it('runs a real arithmetic step and scores each episode against its own problem', async () => {
    const params = initParams(config, 2);
    const optimizer = new AdamW(params, ADAMW_DEFAULTS);
    const before = tf.memory().numTensors;
    const cfg: GrpoConfig = { ...GRPO_DEFAULTS, task: 'arithmetic', steps: 1, seed: 3, group: 2, batch: 2, rollout: { ...GRPO_DEFAULTS.rollout, rootMaxTokens: 24 } };
    const { episodes, metrics } = await grpoStep({ policy: { config, params }, reference: params, optimizer, task, encode }, cfg, 0);
    expect(tf.memory().numTensors).toBe(before);
    // Two prompts, two episodes each, in the order they were added.
    expect(episodes.map((e) => e.problem.id)).toEqual(['train-0-0', 'train-0-0', 'train-0-1', 'train-0-1']);
    for (const e of episodes) {
      expect(e.trace.problemId).toBe(e.problem.id);
      expect(e.problem.meta.operands).toBeGreaterThanOrEqual(3);
      expect(e.verdict).toEqual(arithmetic.verify(e.problem, e.trace.answer));
      expect(e.reward).toEqual(episodeReward(e.trace, e.verdict, cfg.reward));
      expect(e.credits).toHaveLength(e.trace.contexts.length);
      // The rollout's trace is left as it was; the record for traces.jsonl carries the scores.
      expect(e.trace.reward).toBeUndefined();
      expect(e.trace.contexts.every((c) => c.credit === undefined)).toBe(true);
      const record = scoredTrace(e);
      expect(record.reward).toBe(e.reward);
      expect(record.contexts.map((c) => c.credit)).toEqual(e.credits);
    }
    expect(metrics.meanReward).toBeCloseTo(episodes.reduce((a, e) => a + e.reward.reward, 0) / 4, 12);
    expect(metrics.step).toBe(1);
    expect(Object.keys(metrics.violations)).toContain('clone_over_budget');
    optimizer.dispose();
    params.forEach((p) => p.dispose());
  });
});

describe('SFT', () => {
  it('lowers the loss on the tiny preset', async () => {
    const params = initParams(config, 4);
    const optimizer = new AdamW(params, { ...ADAMW_DEFAULTS, lr: 3e-3 });
    const cfg = { ...SFT_DEFAULTS, task: 'arithmetic', steps: 30, seed: 4, batchTokens: 1024 };
    const losses: number[] = [];
    for (let s = 0; s < 30; s++) {
      const seqs = sftSequences(arithmetic, arithmetic.defaultOptions, cfg, s, encode);
      losses.push((await sftStep(params, config, optimizer, seqs, 3e-3, 1024)).loss);
    }
    expect(losses[0]).toBeGreaterThan(3.5); // ≈ ln 73 at random init
    expect(losses.slice(-3).reduce((a, b) => a + b, 0) / 3).toBeLessThan(losses[0] - 1);
    optimizer.dispose();
    params.forEach((p) => p.dispose());
  });
});
