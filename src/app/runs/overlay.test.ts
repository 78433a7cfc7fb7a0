import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { StepMetrics } from '../../core/rl/train';
import { CHARTS } from '../charts/chartSpecs';
import { contrastRatio } from '../contrast';
import type { KeptRun } from './keptRun';
import { OVERLAY_METRICS, RUN_COLOURS, alignSeries, chartLabel, heldOutNs, heldOutOverlay, overlayData, overlayMetric, runColour, runOutcome } from './overlay';

function run(name: string, rewards: [number, number][], heldOut: KeptRun['heldOut'] = []): KeptRun {
  return {
    id: name,
    name,
    keptAt: '',
    task: 'arithmetic',
    origin: { kind: 'cli', files: ['metrics.jsonl'], config: null, command: null, startedAt: null },
    counters: { policyVersion: null, grpoSteps: rewards.at(-1)?.[0] ?? 0, sftSteps: 0 },
    metrics: rewards.map(([step, meanReward]) => ({ metrics: { step, meanReward, meanTotalTokens: 10 * step } as StepMetrics, episodes: 8 })),
    heldOut,
    frontier: [],
  };
}

/** --panel of the light :root block and of the dark one in styles.css. */
function panels(): string[] {
  const css = readFileSync(new URL('../styles.css', import.meta.url), 'utf8');
  return [...css.matchAll(/--panel:\s*(#[0-9a-fA-F]{3,6})\s*;/g)].map((m) => m[1]);
}

describe('runs overlaid on one chart', () => {
  it('aligns runs on the union of their steps, NaN where a run took no such step', () => {
    const d = alignSeries([
      { label: 'a', color: '#000', steps: [1, 2, 3], values: [1, 2, 3] },
      { label: 'b', color: '#111', steps: [4, 2], values: [20, 10] },
    ]);
    expect(d.steps).toEqual([1, 2, 3, 4]);
    expect(d.series[0].values).toEqual([1, 2, 3, NaN]);
    expect(d.series[1].values).toEqual([NaN, 10, NaN, 20]);
    expect(d.series[0].intervals).toBeUndefined();
  });

  it('draws one series per run in its colour, for any metric of the curves panel', () => {
    const runs = [run('long', [[1, 0.2], [2, 0.4], [3, 0.5]]), run('short', [[1, 0.3]])].map((r, i) => ({ run: r, color: runColour(i) }));
    const reward = overlayData(overlayMetric('reward'), runs);
    expect(reward.steps).toEqual([1, 2, 3]);
    expect(reward.series.map((s) => [s.label, s.color, s.values])).toEqual([
      ['long', RUN_COLOURS[0], [0.2, 0.4, 0.5]],
      ['short', RUN_COLOURS[1], [0.3, NaN, NaN]],
    ]);
    expect(overlayData(overlayMetric('tokens-total'), runs).series[0].values).toEqual([10, 20, 30]);
    // Every series of every chart is offered once, and total tokens besides.
    expect(OVERLAY_METRICS).toHaveLength(CHARTS.reduce((n, c) => n + c.series.length, 0) + 1);
    expect(new Set(OVERLAY_METRICS.map((m) => m.id)).size).toBe(OVERLAY_METRICS.length);
    expect(overlayMetric('tokens:critical path').title).toBe('Generated tokens / episode: critical path');
    expect(() => overlayMetric('nope')).toThrow(/no overlay metric "nope" \(known: reward, accuracy,/);
  });

  it('puts the held-out readings of each run at their steps, with their intervals, and says their n', () => {
    const a = run('a', [[1, 0]], [{ step: 10, accuracy: 0.5, n: 32, interval: [0.3, 0.7] }]);
    const b = run('b', [[1, 0]], [{ step: 25, accuracy: 0.6, n: null, interval: null }]);
    const d = heldOutOverlay([
      { run: a, color: '#000' },
      { run: b, color: '#111' },
    ]);
    expect(d.steps).toEqual([10, 25]);
    expect(d.series[0]).toMatchObject({ values: [0.5, NaN], intervals: [[0.3, 0.7], null] });
    expect(d.series[1]).toMatchObject({ values: [NaN, 0.6], intervals: [null, null] });
    expect(heldOutNs([{ run: a, color: '' }])).toBe('delegate, greedy, monitor set, n = 32');
    expect(heldOutNs([{ run: a, color: '' }, { run: b, color: '' }])).toBe('delegate, greedy, monitor set, n = 32; some n not recorded');
    expect(heldOutNs([{ run: run('c', []), color: '' }])).toBe('delegate, greedy, monitor set, n = –');
  });

  it("gives a run's outcome: steps, the last smoothed reward (EMA 0.6 of 0.2, 0.4 is 0.325), the last held-out reading", () => {
    const r = run('a', [[1, 0.2], [2, 0.4]], [{ step: 2, accuracy: 0.75, n: 4, interval: null }]);
    const o = runOutcome(r, 0.6);
    expect(o.steps).toBe(2);
    expect(o.reward).toBeCloseTo(0.325, 12);
    expect(runOutcome(r, 0).reward).toBe(0.4);
    expect(o.heldOut?.accuracy).toBe(0.75);
    expect(runOutcome(run('empty', []), 0.6)).toEqual({ steps: 0, reward: NaN, heldOut: null });
  });

  it('keeps every run colour at ≥ 3:1 against the panel of both colour schemes, and cuts long names in the chart legend', () => {
    const bgs = panels();
    expect(bgs).toHaveLength(2);
    for (const c of RUN_COLOURS) for (const bg of bgs) expect(contrastRatio(c, bg), `${c} on ${bg}`).toBeGreaterThanOrEqual(3);
    expect(new Set(RUN_COLOURS).size).toBe(RUN_COLOURS.length);
    expect(runColour(RUN_COLOURS.length)).toBe(RUN_COLOURS[0]);
    expect(chartLabel('ablation-naive/gating-s1')).toBe('ablation-naive/gating-s1');
    expect(chartLabel('x'.repeat(50))).toBe(`${'x'.repeat(39)}…`);
  });
});
