import { describe, expect, it } from 'vitest';
import type { FrontierPoint } from '../../core/eval/frontier';
import { loadEvent, recordSteps, trainingSettings } from '../../core/io/provenance';
import type { StepMetrics } from '../../core/rl/grpoStep';
import { PAGE_DEFAULTS } from '../../core/runConfig';
import { emptyViolationCounts } from '../../core/protocol/violations';
import { checkRunName, fromKeptRecord, pageHeldOut, pageRunOf, suggestedRunName, toKeptRecord, uniqueRunName } from './keptRun';

const config = { ...PAGE_DEFAULTS, preset: 'tiny' as const, lr: 3e-5 };
const fullRow = (step: number): StepMetrics => ({
  step,
  meanReward: step / 4,
  accuracy: 0.5,
  meanRootTokens: 30,
  meanCloneTokens: 10,
  meanCriticalPathTokens: 35,
  meanTotalTokens: 40,
  clonesPerEpisode: 1,
  delegationRate: 0.5,
  violations: { ...emptyViolationCounts(), root_over_max: step },
  gateRate: 0.1,
  gatedMassShare: 0.05,
  gatedCloneAdvantage: -0.4,
  zeroVarianceFraction: 0.25,
  groupsSampled: 2,
  groupsDropped: 0,
  loss: -0.01,
  kl: 1e-4,
  clipFraction: 0,
  dualClipFraction: 0,
  approxKl: 1e-5,
  entropy: 0.3,
  clipOutOfReach: 0.9,
  gradNorm: 0.5,
  updates: 1,
  nonFiniteSkips: 0,
  trainedTokens: 100,
  rolloutTokensPerSec: 500,
  wallSec: 3,
});
const point = (method: FrontierPoint['method'], step: number | undefined, accuracy: number): FrontierPoint => ({ method, limit: 48, n: 32, accuracy, meanTokens: 30, meanCriticalPathTokens: 25, interval: [accuracy - 0.1, accuracy + 0.1], ...(step === undefined ? {} : { step }) });

function state() {
  const rows = [1, 2, 3].map(fullRow);
  const provenance = recordSteps([loadEvent('/checkpoints/warmstart-tiny/', 'tiny')], 'grpo', rows.map((r) => ({ step: r.step, applied: true })), trainingSettings('grpo', config));
  return {
    config: { ...config },
    model: { preset: 'tiny', parameters: 1234, policyVersion: 3, source: '/checkpoints/warmstart-tiny/' },
    metrics: rows.map((metrics) => ({ metrics, episodes: 4 })),
    sftMetrics: [],
    frontier: [point('delegate', 0, 0.4), point('mono', 0, 0.3), point('delegate', 2, 0.5), point('delegate', undefined, 0.9)],
    provenance,
    policyVersion: 3,
  };
}
const meta = { id: 'k1', name: '  tiny lr 3e-5  ', keptAt: '2026-01-01T00:00:00.000Z', hash: 'preset=tiny&lr=0.00003' };

describe('a kept run of the page', () => {
  it('holds the config and hash, provenance, curves, held-out readings, frontier and counters; not the weights', () => {
    const s = state();
    const run = pageRunOf(s, meta);
    expect(run.name).toBe('tiny lr 3e-5');
    expect(run.task).toBe('arithmetic');
    expect(run.counters).toEqual({ policyVersion: 3, grpoSteps: 3, sftSteps: 0 });
    expect(run.origin).toMatchObject({ kind: 'page', hash: meta.hash, model: { preset: 'tiny', source: '/checkpoints/warmstart-tiny/' } });
    expect(run.origin.kind === 'page' && run.origin.config.lr).toBe(3e-5);
    expect(run.origin.kind === 'page' && run.origin.provenance.map((e) => e.kind)).toEqual(['load', 'grpo']);
    expect(run.metrics.map((p) => p.metrics.meanReward)).toEqual([0.25, 0.5, 0.75]);
    // Held-out: the periodic delegate evaluations (with a step); a mono point or a manual evaluation is not one.
    expect(run.heldOut).toEqual([
      { step: 0, accuracy: 0.4, n: 32, interval: [0.30000000000000004, 0.5] },
      { step: 2, accuracy: 0.5, n: 32, interval: [0.4, 0.6] },
    ]);
    expect(run.frontier).toHaveLength(4);
    expect(Object.keys(run)).not.toContain('weights');
    // A copy: the page's later changes do not reach it.
    s.metrics[0].metrics.meanReward = 9;
    s.config.lr = 1;
    expect(run.metrics[0].metrics.meanReward).toBe(0.25);
    expect(run.origin.kind === 'page' && run.origin.config.lr).toBe(3e-5);
    expect(() => pageRunOf({ ...state(), model: null }, meta)).toThrow('there is no model loaded, so no run to keep');
  });

  it('reads back equal from its record, and a damaged record is refused naming the field', () => {
    const run = pageRunOf(state(), meta);
    const record = structuredClone(toKeptRecord(run));
    expect(fromKeptRecord(record, 'run-k1')).toEqual(run);
    const damaged = (change: (r: Record<string, unknown>) => void) => {
      const r = structuredClone(toKeptRecord(run)) as unknown as Record<string, unknown>;
      change(r);
      return () => fromKeptRecord(r, 'run-k1');
    };
    expect(damaged((r) => (r.version = 7))).toThrow('kept run run-k1: version 7 is not one this build reads (1)');
    expect(damaged((r) => ((r.origin as { config: { batch: number } }).config.batch = 0))).toThrow('kept run run-k1: origin.config: batch must be an integer in [1, 1024] (got 0)');
    expect(damaged((r) => ((r.metrics as { metrics: { step: number } }[])[1].metrics.step = 1))).toThrow('kept run run-k1: metrics[1]: step 1 does not follow step 1 (steps must increase)');
    expect(damaged((r) => ((r.heldOut as unknown[])[0] = { step: 1 }))).toThrow('kept run run-k1: heldOut[0] must hold step, accuracy, n (or null) and interval (two numbers, or null)');
    expect(damaged((r) => ((r.origin as { kind: string }).kind = 'tar'))).toThrow('kept run run-k1: origin.kind must be "page" or "cli" (got "tar")');
    expect(damaged((r) => ((r.counters as { grpoSteps: number }).grpoSteps = -1))).toThrow(/^kept run run-k1: counters must hold grpoSteps/);
    expect(() => fromKeptRecord('x', 'run-k1')).toThrow('kept run run-k1: the record is not an object');
  });

  it('names runs: trimmed, not empty, not too long; a taken name gets a number; the suggestion says model, task, lr, gating and step', () => {
    expect(() => checkRunName('   ')).toThrow('a run needs a name (got an empty one)');
    expect(() => checkRunName('x'.repeat(81))).toThrow("a run's name must be at most 80 characters (got 81)");
    expect(uniqueRunName('a', ['b'])).toBe('a');
    expect(uniqueRunName('a', ['a', 'a (2)'])).toBe('a (3)');
    expect(uniqueRunName('x'.repeat(80), ['x'.repeat(80)])).toBe(`${'x'.repeat(76)} (2)`);
    expect(suggestedRunName(state())).toBe('tiny arithmetic, lr 0.00003, step 3');
    expect(suggestedRunName({ ...state(), config: { ...config, gating: false } })).toBe('tiny arithmetic, lr 0.00003, no gating, step 3');
    expect(pageHeldOut([point('delegate', 5, 0.1), point('delegate', 5, 0.2)])).toEqual([{ step: 5, accuracy: 0.2, n: 32, interval: [0.1, 0.30000000000000004] }]);
  });
});
