import { toyPolicyModel, toyScorer } from '../policyModel';
import { splitOf } from '../eval/splits';
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { presetConfig } from '../model/config';
import { causalMask } from '../model/gpt';
import { cloneParams, initParams } from '../model/params';
import { arithmetic } from '../tasks/arithmetic';
import { Tokenizer } from '../tokenizer/tokenizer';
import { tokenId } from '../tokenizer/vocab';
import { ADAM_MOMENTS, AdamW } from '../optim/adamw';
import { type TaskMixEntry, sftSequences, sftStep } from '../sft/sft';
import type { AnyTask } from '../tasks';
import { multihop } from '../tasks/multihop';
import { episodeReward } from './reward';
import { aggregationWeights, packRl, policyGradients, withReferenceLogprobs } from './ppoLoss';
import {
  type GrpoConfig,
  type RewardFn,
  type ScoredEpisode,
  type StepMetrics,
  type StepProgress,
  clipOutOfReach,
  episodeSequences,
  grpoStep,
  lrAt,
  restartsOptimizerAt,
  rewardAt,
} from './grpoStep';
import { scoredTrace } from '../rollout/trace';
import { defaultGrpoConfig, defaultSftConfig } from '../runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();
const TABLE_SFT = defaultSftConfig();

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
  return { reward, score: reward, rootPenalty: 0, clonePenalty: 0, callPenalty: 0, budgetPenalty: 0 };
};

const toyConfig = (seed: number): GrpoConfig => ({
  ...TABLE_GRPO,
  task: 'arithmetic',
  steps: 50,
  seed,
  group: 8,
  batch: 4,
  lr: 1e-2,
  rollout: { ...TABLE_GRPO.rollout, rootMaxTokens: 3 },
  loss: { ...TABLE_GRPO.loss, beta: 0 },
});

async function runToy(seed: number, steps: number) {
  const params = initParams(config, seed);
  const optimizer = new AdamW(params, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: 1e-2 });
  const cfg = toyConfig(seed);
  const rewards: number[] = [];
  const metrics = [];
  for (let s = 0; s < steps; s++) {
    const { metrics: m } = await grpoStep(
      { model: toyPolicyModel({ config, params }, encode), reference: null, optimizer, task, encode, rewardFn: digitFirst },
      cfg,
      s,
    );
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
    const optimizer = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    const before = tf.memory().numTensors;
    const cfg: GrpoConfig = {
      ...TABLE_GRPO,
      task: 'arithmetic',
      steps: 1,
      seed: 3,
      group: 2,
      batch: 2,
      rollout: { ...TABLE_GRPO.rollout, rootMaxTokens: 24 },
    };
    const { episodes, metrics } = await grpoStep(
      { model: toyPolicyModel({ config, params }, encode), reference: toyScorer(params, config), optimizer, task, encode },
      cfg,
      0,
    );
    expect(tf.memory().numTensors).toBe(before);
    // Two prompts, two episodes each, in the order they were added.
    expect(episodes.map((e) => e.problem.id)).toEqual(['train-0-0', 'train-0-0', 'train-0-1', 'train-0-1']);
    // Training prompts come from the training set only (src/core/eval/splits.ts).
    expect(episodes.every((e) => splitOf(e.problem) === 'train')).toBe(true);
    for (const e of episodes) {
      expect(e.trace.problemId).toBe(e.problem.id);
      expect(e.problem.meta.operands).toBeGreaterThanOrEqual(3);
      expect(e.verdict).toEqual(arithmetic.verify(e.problem, e.trace.answer));
      expect(e.reward).toEqual(episodeReward(e.trace, e.verdict, rewardAt(cfg, 0)));
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

  it('scores the first tokenRateAfter steps without the token cost, every later step with it', async () => {
    const cfg: GrpoConfig = {
      ...TABLE_GRPO,
      task: 'arithmetic',
      steps: 3,
      seed: 3,
      group: 2,
      batch: 1,
      reward: { ...TABLE_GRPO.reward, tokenRate: 0.01 },
      tokenRateAfter: 2,
      restartOptimizer: false,
      rollout: { ...TABLE_GRPO.rollout, rootMaxTokens: 24 },
    };
    expect([0, 1, 2, 3].map((s) => rewardAt(cfg, s).tokenRate)).toEqual([0, 0, 0.01, 0.01]);
    // Everything else of the reward is the run's, and no schedule is the rate from the first step.
    expect({ ...rewardAt(cfg, 0), tokenRate: 0.01 }).toEqual(cfg.reward);
    expect(rewardAt({ ...cfg, tokenRateAfter: 0 }, 0)).toBe(cfg.reward);
    // Adam restarts only when asked, once, before the first step under the cost (0-based step 2).
    expect([0, 1, 2, 3].map((s) => restartsOptimizerAt({ ...cfg, restartOptimizer: true }, s))).toEqual([false, false, true, false]);
    expect([0, 1, 2, 3].some((s) => restartsOptimizerAt(cfg, s))).toBe(false);
    expect(restartsOptimizerAt({ ...cfg, restartOptimizer: true, tokenRateAfter: 0 }, 0)).toBe(false);
    // With no token cost there is no switch, so nothing restarts (the defaults ask for the restart).
    expect([0, 1, 2, 3].some((s) => restartsOptimizerAt({ ...cfg, restartOptimizer: true, reward: { ...cfg.reward, tokenRate: 0 } }, s))).toBe(false);
    const params = initParams(config, 2);
    const optimizer = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    for (const step of [1, 2]) {
      const { episodes } = await grpoStep({ model: toyPolicyModel({ config, params }, encode), reference: null, optimizer, task, encode }, cfg, step);
      for (const e of episodes) {
        expect(e.reward).toEqual(episodeReward(e.trace, e.verdict, rewardAt(cfg, step)));
        // By hand: the cost is rate × every generated token, root and clones.
        expect(e.reward.tokenPenalty).toBeCloseTo(step < 2 ? 0 : 0.01 * e.trace.tokens.total, 12);
      }
    }
    optimizer.dispose();
    params.forEach((p) => p.dispose());
  });
});

describe('learning-rate warm-up and the reach of the clip', () => {
  it('warms the learning rate up linearly over lrWarmup steps, then holds it', () => {
    const lrs = [0, 1, 2, 3, 4, 10].map((s) => lrAt({ lr: 4e-5, lrWarmup: 4 }, s));
    [1e-5, 2e-5, 3e-5, 4e-5, 4e-5, 4e-5].forEach((lr, i) => expect(lrs[i]).toBeCloseTo(lr, 15));
    expect(lrAt({ lr: 4e-5 }, 0)).toBe(4e-5);
    expect(lrAt({ lr: 4e-5, lrWarmup: 0 }, 0)).toBe(4e-5);
  });

  it('counts the trained A > 0 tokens whose behaviour probability puts 1 + ε beyond ρ ≤ 1 / π_old', () => {
    // ε = 0.2: the bound is π_old ≥ 1/1.2 ≈ 0.833.
    const seq = (advantage: number, weight: number, probs: number[], actions = probs.map(() => 1)) => ({
      tokens: [0, ...probs.map(() => 0)],
      actions,
      oldLogprobs: probs.map(Math.log),
      advantage,
      weight,
    });
    const seqs = [
      seq(1, 1, [0.99, 0.9, 0.84, 0.83, 0.5]), // 3 out of reach (0.99, 0.9, 0.84)
      seq(-1, 1, [0.99, 0.99]), // A < 0: the lower clip is reachable
      seq(1, 0, [0.99]), // not trained
      seq(2, 1, [0.99, 0.95], [1, 0]), // the injected position does not count
    ];
    expect(clipOutOfReach(seqs, 0.2)).toBe(4);
    expect(clipOutOfReach(seqs, 0.02)).toBe(2); // π_old ≥ 1/1.02 ≈ 0.980: the two trained 0.99s
  });
});

describe('GRPO on a task mix', () => {
  it("draws each prompt's task by weight, rolls it out under its own limits and verifies it with its own task", async () => {
    const params = initParams(config, 4);
    const optimizer = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    const mix = [
      { task: arithmetic as AnyTask, opts: arithmetic.defaultOptions, weight: 1 },
      { task: multihop as AnyTask, opts: multihop.defaultOptions, weight: 1 },
    ];
    const limits = { arithmetic: { rootMaxTokens: 2 }, multihop: { rootMaxTokens: 5 } };
    const cfg: GrpoConfig = { ...TABLE_GRPO, task: 'arithmetic,multihop', taskRollout: limits, steps: 1, seed: 5, group: 2, batch: 8 };
    const { episodes } = await grpoStep({ model: toyPolicyModel({ config, params }, encode), reference: null, optimizer, mix, encode }, cfg, 0);
    const byTask = (name: string) => episodes.filter((e) => e.problem.task === name);
    expect(byTask('arithmetic').length).toBeGreaterThan(0);
    expect(byTask('multihop').length).toBeGreaterThan(0);
    expect(byTask('arithmetic').length + byTask('multihop').length).toBe(16);
    for (const [name, t] of [
      ['arithmetic', arithmetic],
      ['multihop', multihop],
    ] as const) {
      const max = limits[name].rootMaxTokens;
      const roots = byTask(name).map((e) => e.trace.contexts[0].generatedTokens);
      expect(Math.max(...roots)).toBe(max);
      for (const e of byTask(name)) expect(e.verdict).toEqual((t as AnyTask).verify(e.problem, e.trace.answer));
    }
    // A one-task mix is the plain task: the same prompts, the same step.
    const one = await toySteps(6, { ...toyConfig(6), steps: 2 }, 2);
    const viaMix = await toySteps(6, { ...toyConfig(6), steps: 2 }, 2, digitFirst, false, [
      { task: arithmetic as AnyTask, opts: arithmetic.validateOptions({}) },
    ]);
    expect(untimed(viaMix.metrics)).toEqual(untimed(one.metrics));
    expect(viaMix.episodes.flat().map((e) => e.problem.id)).toEqual(one.episodes.flat().map((e) => e.problem.id));
    optimizer.dispose();
    params.forEach((p) => p.dispose());
  });
});

/** Toy steps from a fresh tiny model (init seed `init`) under `cfg`. */
async function toySteps(init: number, cfg: GrpoConfig, steps: number, rewardFn: RewardFn = digitFirst, withReference = false, mix?: readonly TaskMixEntry[]) {
  const params = initParams(config, init);
  const reference = withReference ? cloneParams(params, { trainable: false }) : null;
  const optimizer = new AdamW(params, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: cfg.lr });
  const metrics: StepMetrics[] = [];
  const episodes: ScoredEpisode[][] = [];
  for (let s = 0; s < steps; s++) {
    const r = await grpoStep(
      {
        model: toyPolicyModel({ config, params }, encode),
        reference: reference === null ? null : toyScorer(reference, config),
        optimizer,
        ...(mix ? { mix } : { task }),
        encode,
        rewardFn,
      },
      cfg,
      s,
    );
    metrics.push(r.metrics);
    episodes.push(r.episodes);
  }
  const weights = await Promise.all([...params.values()].map((p) => p.data()));
  optimizer.dispose();
  params.forEach((p) => p.dispose());
  reference?.forEach((p) => p.dispose());
  return { metrics, episodes, weights };
}

/** The episodes of a step by prompt id, in sampling order. */
function groupsOf(episodes: readonly ScoredEpisode[]): Map<string, ScoredEpisode[]> {
  const out = new Map<string, ScoredEpisode[]>();
  for (const e of episodes) out.set(e.problem.id, [...(out.get(e.problem.id) ?? []), e]);
  return out;
}

const untimed = (ms: readonly StepMetrics[]) => ms.map(({ wallSec: _w, rolloutTokensPerSec: _r, ...rest }) => rest);

describe('PPO mini-batches', () => {
  it('one mini-batch of the whole batch is the full-batch update, bit for bit', async () => {
    const params = initParams(config, 5);
    const before = cloneParams(params);
    const reference = cloneParams(params, { trainable: false });
    const cfg: GrpoConfig = { ...toyConfig(5), miniBatch: 4, loss: { ...toyConfig(5).loss, beta: 0.01 } };
    const optimizer = new AdamW(params, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: cfg.lr });
    const { episodes, metrics } = await grpoStep(
      {
        model: toyPolicyModel({ config, params }, encode),
        reference: reference === null ? null : toyScorer(reference, config),
        optimizer,
        task,
        encode,
        rewardFn: digitFirst,
      },
      cfg,
      0,
    );
    // The update as it was before mini-batches: every context of the batch weighted together, one Adam step.
    const seqs = await withReferenceLogprobs(
      toyScorer(reference, config),
      episodes.flatMap((e) => episodeSequences(e.trace, e.credits)),
      cfg.loss,
      cfg.microTokens,
    );
    const full = await policyGradients(toyScorer(before, config), packRl(seqs, aggregationWeights(seqs, cfg.loss.aggregation), cfg.microTokens), cfg.loss);
    const optimizer2 = new AdamW(before, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: cfg.lr });
    const stats = await optimizer2.apply(full.grads, cfg.lr);
    expect(full.trainedTokens).toBeGreaterThan(0);
    expect(metrics).toMatchObject({
      updates: 1,
      loss: full.loss,
      kl: full.kl,
      clipFraction: full.clipFraction,
      approxKl: full.approxKl,
      entropy: full.entropy,
      gradNorm: stats.gradNorm,
      trainedTokens: full.trainedTokens,
    });
    let diff = 0;
    for (const [name, p] of params) {
      const a = await p.data();
      const b = await before.get(name)!.data();
      a.forEach((x, i) => (diff = Math.max(diff, Math.abs(x - b[i]))));
    }
    expect(diff).toBe(0);
    full.grads.forEach((g) => g.dispose());
    for (const o of [optimizer, optimizer2]) o.dispose();
    for (const m of [params, before, reference]) m.forEach((p) => p.dispose());
  });

  it('mini-batches of one prompt give several updates per rollout batch, and the clip binds', async () => {
    const cfg: GrpoConfig = { ...toyConfig(1), miniBatch: 1, innerEpochs: 2 };
    const { metrics } = await toySteps(1, cfg, 3);
    for (const m of metrics) {
      // One update per prompt group with a signal, per epoch.
      const signalGroups = Math.round(m.groupsSampled * (1 - m.zeroVarianceFraction));
      expect(m.updates).toBe(2 * signalGroups);
    }
    expect(metrics.reduce((n, m) => n + m.updates, 0)).toBeGreaterThan(6);
    expect(Math.max(...metrics.map((m) => m.clipFraction))).toBeGreaterThan(0.05);
    expect(Math.max(...metrics.map((m) => m.approxKl))).toBeGreaterThan(1e-3);
    expect(metrics.every((m) => m.entropy > 0 && m.entropy <= Math.log(config.vocabSize) + 1e-6)).toBe(true);
    // One full-batch update per rollout batch: ρ = 1 up to decode rounding, nothing clipped.
    const full = await toySteps(1, toyConfig(1), 3);
    expect(full.metrics.every((m) => m.clipFraction === 0 && m.updates <= 1 && m.approxKl < 1e-5)).toBe(true);
  });

  it('tells its progress: episodes finished of the batch, then updates applied of those planned', async () => {
    const cfg: GrpoConfig = { ...toyConfig(2), miniBatch: 1, innerEpochs: 2 };
    const seen: StepProgress[] = [];
    const params = initParams(config, 2);
    const optimizer = new AdamW(params, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: cfg.lr });
    await grpoStep(
      { model: toyPolicyModel({ config, params }, encode), reference: null, optimizer, task, encode, rewardFn: digitFirst, onProgress: (p) => seen.push(p) },
      cfg,
      0,
    );
    optimizer.dispose();
    params.forEach((p) => p.dispose());
    const rollouts = seen.filter((p) => p.phase === 'rollouts');
    const updates = seen.filter((p) => p.phase === 'update');
    // Rollouts first, rising to B × G; then one report per mini-batch of each epoch (4 prompts × 2).
    expect(seen.findIndex((p) => p.phase === 'update')).toBe(rollouts.length);
    expect(rollouts.map((p) => p.done)).toEqual([...rollouts.map((p) => p.done)].sort((a, b) => a - b));
    expect(rollouts.at(-1)).toEqual({ phase: 'rollouts', done: 32, total: 32 });
    expect(updates.map((p) => p.done)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(updates.every((p) => p.total === 8)).toBe(true);
  });

  it('shuffles the mini-batches by (seed, step, epoch): same seed, same run', async () => {
    const cfg: GrpoConfig = { ...toyConfig(2), miniBatch: 2, innerEpochs: 2, loss: { ...toyConfig(2).loss, dualClip: 3 } };
    const a = await toySteps(2, cfg, 2);
    const b = await toySteps(2, cfg, 2);
    expect(untimed(a.metrics)).toEqual(untimed(b.metrics));
    expect(a.weights).toEqual(b.weights);
    const c = await toySteps(2, { ...cfg, seed: 3 }, 2);
    expect(c.weights).not.toEqual(a.weights);
  });

  it('leaves no tensors behind with every option on', async () => {
    const cfg: GrpoConfig = {
      ...toyConfig(4),
      miniBatch: 2,
      innerEpochs: 2,
      dynamicSampling: { factor: 1.5, maxRounds: 2 },
      loss: { ...toyConfig(4).loss, beta: 0.01, dualClip: 3 },
    };
    const params = initParams(config, 4);
    const reference = cloneParams(params, { trainable: false });
    const optimizer = new AdamW(params, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: cfg.lr });
    const deps = {
      model: toyPolicyModel({ config, params }, encode),
      reference: reference === null ? null : toyScorer(reference, config),
      optimizer,
      task,
      encode,
      rewardFn: digitFirst,
    };
    await grpoStep(deps, cfg, 0);
    // Fill the causal-mask cache (16 lengths, least recently used out): a new length then
    // replaces an entry instead of adding one.
    for (let t = 1; t <= 16; t++) causalMask(t);
    const before = tf.memory().numTensors;
    const { metrics } = await grpoStep(deps, cfg, 1);
    expect(metrics.updates).toBeGreaterThan(0);
    expect(tf.memory().numTensors).toBe(before);
    optimizer.dispose();
    for (const m of [params, reference]) m.forEach((p) => p.dispose());
  });
});

describe('dynamic sampling', () => {
  const dynamic = (seed: number): GrpoConfig => ({ ...toyConfig(seed), dynamicSampling: { factor: 2, maxRounds: 3 } });

  it('trains only on groups whose rewards differ, fills the batch with B of them and counts the rest', async () => {
    const { metrics, episodes } = await toySteps(3, dynamic(3), 2);
    for (const [s, m] of metrics.entries()) {
      const groups = [...groupsOf(episodes[s]).values()];
      expect(groups.every((g) => g.length === 8)).toBe(true); // G = 8
      expect([...groupsOf(episodes[s]).keys()]).toEqual(groups.map((_, k) => `train-${s}-${k}`));
      const differ = (g: ScoredEpisode[]) => g.some((e) => e.reward.reward !== g[0].reward.reward);
      const trained = groups.filter((g) => g.some((e) => e.credits.some((c) => c.weight > 0)));
      expect(trained.every(differ)).toBe(true);
      expect(trained).toHaveLength(Math.min(4, groups.filter(differ).length));
      expect(m.groupsSampled).toBe(groups.length);
      expect(m.groupsSampled).toBeGreaterThanOrEqual(8);
      expect(m.groupsDropped).toBe(groups.length - trained.length);
      expect(m.zeroVarianceFraction).toBeCloseTo(groups.filter((g) => !differ(g)).length / groups.length, 12);
    }
    // The toy reward is rare (≈ 1 in 7): some groups are all zero, so something was dropped.
    expect(metrics.some((m) => m.groupsDropped > 0)).toBe(true);
  });

  it('draws its prompts from (seed, step): the first round is the plain step, later rounds do not depend on the policy', async () => {
    const plain = await toySteps(3, toyConfig(3), 1);
    const dyn = await toySteps(3, dynamic(3), 1);
    const prompts = (eps: readonly ScoredEpisode[]) => new Map(eps.map((e) => [e.problem.id, e.problem.prompt]));
    const p0 = prompts(plain.episodes[0]);
    const d0 = prompts(dyn.episodes[0]);
    for (const [id, text] of p0) expect(d0.get(id)).toBe(text);
    // Every group equal (a constant reward): all three rounds run, nothing is kept, nothing trains.
    const constant: RewardFn = () => ({ reward: 1, score: 1, rootPenalty: 0, clonePenalty: 0, callPenalty: 0, budgetPenalty: 0 });
    const none = await toySteps(9, dynamic(3), 1, constant);
    expect(none.metrics[0]).toMatchObject({ groupsSampled: 24, groupsDropped: 24, zeroVarianceFraction: 1, updates: 0, trainedTokens: 0, nonFiniteSkips: 0 });
    // Another policy (init 9), the same prompts under the same ids.
    const n0 = prompts(none.episodes[0]);
    for (const [id, text] of d0) expect(n0.get(id)).toBe(text);
    expect(new Set(n0.values()).size).toBeGreaterThan(20);
    // Same seed and config, same step again.
    const again = await toySteps(3, dynamic(3), 1);
    expect(untimed(again.metrics)).toEqual(untimed(dyn.metrics));
  });
});

describe('SFT', () => {
  it('lowers the loss on the tiny preset', async () => {
    const params = initParams(config, 4);
    const optimizer = new AdamW(params, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: 3e-3 });
    const cfg = { ...TABLE_SFT, task: 'arithmetic', steps: 30, seed: 4, batchTokens: 1024 };
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
