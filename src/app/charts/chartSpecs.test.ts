import { describe, expect, it } from 'vitest';
import type { FrontierPoint } from '../../core/eval/frontier';
import { emptyViolationCounts } from '../../core/protocol/violations';
import type { StepMetrics } from '../../core/rl/grpoStep';
import type { MetricPoint } from '../state/store';
import { CHARTS, chartDataOf, heldOutDataOf, heldOutSubtitle, thinIndices, warmStartDataOf, warmStartSubtitle } from './chartSpecs';
import { sftMetricsRow } from '../../core/sft/sft';

function row(step: number, extra: Record<string, number> = {}): MetricPoint {
  const zero = {
    meanReward: 0.5,
    accuracy: 0.5,
    meanRootTokens: 20,
    meanCloneTokens: 10,
    meanCriticalPathTokens: 25,
    meanTotalTokens: 30,
    clonesPerEpisode: 1,
    delegationRate: 0.5,
    gateRate: 0,
    gatedMassShare: 0,
    gatedCloneAdvantage: NaN,
    zeroVarianceFraction: 0,
  };
  const rest = {
    groupsSampled: 4,
    groupsDropped: 0,
    loss: 0,
    kl: 0,
    clipFraction: 0,
    dualClipFraction: 0,
    approxKl: 0,
    entropy: 1,
    clipOutOfReach: 0.5,
    gradNorm: 1,
    updates: 1,
    nonFiniteSkips: 0,
    trainedTokens: 100,
    rolloutTokensPerSec: 10,
    wallSec: 1,
  };
  const metrics: StepMetrics = { step, ...zero, ...rest, violations: emptyViolationCounts() };
  return { metrics: { ...metrics, ...extra }, episodes: 16 };
}

function point(method: 'delegate' | 'mono', step: number | undefined, accuracy: number, n = 200): FrontierPoint {
  return {
    method,
    limit: 48,
    n,
    accuracy,
    meanTokens: 40,
    meanCriticalPathTokens: 30,
    interval: [accuracy - 0.05, accuracy + 0.05],
    ...(step === undefined ? {} : { step, checkpoint: `step ${step}` }),
  };
}

describe('chart data', () => {
  it('is one value per metrics row, and hides violation classes that never occur', () => {
    const rows = [row(1), row(2)];
    rows[1].metrics.violations.clone_over_budget = 8;
    const reward = chartDataOf(
      CHARTS.find((c) => c.id === 'reward')!,
      rows,
    );
    expect(reward).toEqual({ steps: [1, 2], series: [{ label: 'reward', color: '#4e79a7', values: [0.5, 0.5] }] });
    const violations = chartDataOf(
      CHARTS.find((c) => c.id === 'violations')!,
      rows,
    );
    expect(violations.series.map((s) => [s.label, s.values])).toEqual([['clone_over_budget', [0, 0.5]]]);
  });

  it('thins to at most max rows, keeping the first and the last', () => {
    expect(thinIndices(5, 10)).toEqual([0, 1, 2, 3, 4]);
    const t = thinIndices(1001, 400);
    expect(t.length).toBeLessThanOrEqual(401);
    expect(t[0]).toBe(0);
    expect(t[t.length - 1]).toBe(1000);
  });
});

describe('held-out accuracy', () => {
  it('draws the run log’s monitor evaluations only on the steps that have one', () => {
    const d = heldOutDataOf(
      [
        row(1),
        row(2, { evalAccuracy: 0.6, evalTokens: 30, evalReward: 0.4 }),
        row(3),
        row(4, { evalAccuracy: 0.7, evalTokens: 31, evalReward: 0.5, evalN: 100 }),
      ],
      [],
    );
    expect(d.steps).toEqual([2, 4]);
    expect(d.series).toHaveLength(1);
    expect(d.series[0].values).toEqual([0.6, 0.7]);
    expect(d.ns).toEqual([100]);
    expect(d.nUnrecorded).toBe(true);
    expect(heldOutSubtitle(d)).toBe('monitor set, greedy, n = 100; run log: n not recorded');
  });

  it('draws the page run’s periodic evaluations per method with their intervals; Evaluate points (no step) are not a curve', () => {
    const frontier = [
      point('delegate', 0, 0.5),
      point('mono', 0, 0.45),
      point('delegate', 10, 0.6),
      point('mono', 10, 0.6),
      point('delegate', undefined, 0.9, 2),
    ];
    const d = heldOutDataOf([row(10)], frontier);
    expect(d.steps).toEqual([0, 10]);
    expect(d.series.map((s) => [s.label, s.values])).toEqual([
      ['delegate', [0.5, 0.6]],
      ['mono', [0.45, 0.6]],
    ]);
    expect(d.series[0].intervals?.[1]?.[0]).toBeCloseTo(0.55, 12);
    expect(heldOutSubtitle(d)).toBe('monitor set, greedy, n = 200');
    // A run evaluated at two sizes says so.
    expect(heldOutSubtitle(heldOutDataOf([], [point('delegate', 1, 0.5, 2), point('delegate', 2, 0.5, 200)]))).toBe('monitor set, greedy, n = 2, 200');
  });

  it('is empty before any evaluation', () => {
    const d = heldOutDataOf([row(1)], []);
    expect(d).toMatchObject({ steps: [], series: [], ns: [] });
  });
});

describe('the warm-start curve', () => {
  it('draws the loss per warm-start step, with the lr of each step beside it, and counts the skipped steps', () => {
    const ok = { loss: 2.5, gradNorm: 1, applied: true, trainedTokens: 500, tokens: 1000 };
    const rows = [
      sftMetricsRow(41, ok, 1e-3, 1),
      sftMetricsRow(42, { ...ok, loss: 2.1 }, 2e-3, 2),
      sftMetricsRow(43, { ...ok, loss: NaN, applied: false }, 3e-3, 3),
    ];
    const { data, lr, skipped } = warmStartDataOf(rows);
    expect(data.steps).toEqual([41, 42, 43]);
    expect(data.series.map((s) => [s.label, s.values])).toEqual([['loss', [2.5, 2.1, NaN]]]);
    expect(lr).toMatchObject({ label: 'lr', values: [1e-3, 2e-3, 3e-3] });
    expect(skipped).toBe(1);
    expect(warmStartSubtitle(3, skipped)).toBe('teacher demonstrations, 3 steps, 1 skipped (non-finite: no update)');
    expect(warmStartSubtitle(1, 0)).toBe('teacher demonstrations, 1 step');
  });
});
