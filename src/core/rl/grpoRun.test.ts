import { toyPolicyModel } from '../policyModel';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { presetConfig } from '../model/config';
import { initParams } from '../model/params';
import { PolicyDecoder } from '../rollout';
import { heldOutProblems, meanReward, runProblems, summarize } from '../eval/evaluate';
import { HELD_OUT_SEED } from '../eval/splits';
import { arithmetic } from '../tasks/arithmetic';
import { multihop } from '../tasks/multihop';
import type { AnyTask } from '../tasks';
import { Tokenizer } from '../tokenizer/tokenizer';
import { GrpoRun, type HeldOutPoint, heldOutRowFields } from './grpoRun';
import { ADAM_MOMENTS, AdamW } from '../optim/adamw';
import { type GrpoConfig, rewardAt } from './grpoStep';
import { defaultGrpoConfig } from '../runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();

const tok = Tokenizer.builtin();
const encode = (t: string) => tok.encode(t);
const config = presetConfig('tiny');

beforeAll(async () => {
  await initBackend('wasm');
});

const mix = [
  { task: arithmetic as AnyTask, opts: arithmetic.defaultOptions, weight: 1 },
  { task: multihop as AnyTask, opts: multihop.defaultOptions, weight: 1 },
];
const limits = { arithmetic: { rootMaxTokens: 6 }, multihop: { rootMaxTokens: 8 } };

describe('GrpoRun', () => {
  it('counts steps and versions, restarts the optimizer exactly where the cost starts, and evaluates on its schedule', async () => {
    const cfg: GrpoConfig = {
      ...TABLE_GRPO,
      task: 'arithmetic',
      steps: 3,
      seed: 2,
      group: 2,
      batch: 1,
      reward: { ...TABLE_GRPO.reward, tokenRate: 0.01 },
      tokenRateAfter: 2,
      restartOptimizer: true,
      rollout: { ...TABLE_GRPO.rollout, rootMaxTokens: 6 },
    };
    const params = initParams(config, 1);
    let optimizer = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    const run = new GrpoRun(cfg, [mix[0]], { every: 2, n: 4, methods: ['delegate'] }, 0, 5);
    const restartedAt: number[] = [];
    const versions: number[] = [];
    while (!run.done) {
      const { metrics, episodes } = await run.step({ model: toyPolicyModel({ config, params }, encode), reference: null, optimizer, encode }, () => {
        restartedAt.push(run.steps);
        optimizer.dispose();
        optimizer = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
        return optimizer;
      });
      expect(metrics.step).toBe(run.steps);
      versions.push(...new Set(episodes.map((e) => e.trace.policyVersion)));
    }
    expect(run.steps).toBe(3);
    expect(run.version).toBe(8);
    // The version each step's rollouts were sampled under: the one before the step.
    expect(versions).toEqual([5, 6, 7]);
    expect(restartedAt).toEqual([2]);
    // Every 2 steps, and after the last step of the bounded run.
    expect([0, 1, 2, 3, 4].map((s) => run.evaluatesAt(s))).toEqual([true, false, true, true, true]);
    expect(new GrpoRun(cfg, [mix[0]], { every: 0, n: 4, methods: ['delegate'] }).evaluatesAt(3)).toBe(false);
    optimizer.dispose();
    params.forEach((p) => p.dispose());
  });

  it('evaluates every task of a mix on the monitor set from HELD_OUT_SEED at its own limit, as runProblems and meanReward score it by hand', async () => {
    const cfg: GrpoConfig = { ...TABLE_GRPO, task: 'arithmetic,multihop', taskRollout: limits, steps: 10, seed: 5, group: 2, batch: 2 };
    const params = initParams(config, 3);
    const run = new GrpoRun(cfg, mix, { every: 1, n: 6, methods: ['delegate', 'mono'] }, 4);
    const decoder = new PolicyDecoder({ config, params });
    const seen: HeldOutPoint[] = [];
    const points = await run.evaluate(decoder, encode, (p) => seen.push(p));
    expect(seen).toEqual(points);
    expect(points.map((p) => `${p.task} ${p.method} ${p.limit} ${p.step} ${p.n}`)).toEqual([
      'arithmetic delegate 6 4 6',
      'arithmetic mono 6 4 6',
      'multihop delegate 8 4 6',
      'multihop mono 8 4 6',
    ]);
    for (const { task, opts } of mix) {
      const problems = heldOutProblems(task, opts, 6, HELD_OUT_SEED, 'monitor');
      const traces = await runProblems(decoder, task, problems, { ...cfg.rollout, ...limits[task.name as 'arithmetic'], greedy: true }, 0, encode);
      const p = points.find((q) => q.task === task.name && q.method === 'delegate')!;
      expect(p.accuracy).toBe(summarize(traces).accuracy);
      expect(p.meanTokens).toBe(summarize(traces).meanTokens);
      expect(p.meanReward).toBeCloseTo(meanReward(task, problems, traces, rewardAt(cfg, 3)), 12);
    }
    // The same weights give the same readings: the set is fixed.
    expect(await run.evaluate(decoder, encode)).toEqual(points);
    decoder.dispose();
    params.forEach((p) => p.dispose());
  });

  it("writes a CLI row's held-out fields from the delegate points: the mean over the tasks, and each task's own", () => {
    const point = (task: string, method: 'delegate' | 'mono', accuracy: number, meanTokens: number, meanReward: number): HeldOutPoint => ({
      task,
      method,
      limit: 48,
      n: 64,
      accuracy,
      meanTokens,
      meanCriticalPathTokens: meanTokens,
      interval: [0, 1],
      step: 10,
      meanReward,
    });
    expect(heldOutRowFields([point('arithmetic', 'delegate', 0.5, 40, 0.4), point('arithmetic', 'mono', 0.9, 30, 0.9)])).toEqual({
      evalAccuracy: 0.5,
      evalTokens: 40,
      evalReward: 0.4,
      evalN: 64,
    });
    expect(heldOutRowFields([point('arithmetic', 'delegate', 0.5, 40, 0.4), point('multihop', 'delegate', 0.25, 100, 0.2)])).toEqual({
      evalAccuracy: 0.375,
      evalTokens: 70,
      evalReward: 0.30000000000000004,
      evalN: 64,
      evalAccuracy_arithmetic: 0.5,
      evalTokens_arithmetic: 40,
      evalReward_arithmetic: 0.4,
      evalAccuracy_multihop: 0.25,
      evalTokens_multihop: 100,
      evalReward_multihop: 0.2,
    });
    expect(heldOutRowFields([])).toEqual({});
  });
});
