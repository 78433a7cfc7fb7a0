import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { StepMetrics } from '../../core/rl/grpoStep';
import { CHARTS } from '../charts/chartSpecs';
import { contrastRatio } from '../contrast';
import type { KeptRun } from './keptRun';
import { OVERLAY_METRICS, RUN_COLOURS, SECONDS_AXIS_MAX, alignSeries, chartLabel, crosshairReader, cumulative, heldOutNs, heldOutOverlay, medianGap, nearestIndex, overlayData, overlayMetric, overlayX, runColour, runOutcome, unplacedNote } from './overlay';

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

/** A run whose rows took `wallSec` each: reward step / 10, meanTotalTokens 10 · step, `episodes` per step. */
function timed(name: string, wallSec: number[], episodes = 8): KeptRun {
  const r = run(name, wallSec.map((_, i) => [i + 1, (i + 1) / 10]));
  r.metrics = r.metrics.map((p, i) => ({ metrics: { ...p.metrics, wallSec: wallSec[i] }, episodes }));
  return r;
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

describe('the overlay x axis: step, wall time, tokens', () => {
  it('sums per-row amounts; a missing, non-finite or negative one has no x and adds nothing', () => {
    expect(cumulative([10.5, 8, NaN, 6, -1, Infinity, 2])).toEqual([10.5, 18.5, NaN, 24.5, NaN, NaN, 26.5]);
    expect(cumulative([])).toEqual([]);
  });

  it('counts seconds up to SECONDS_AXIS_MAX of the longest run, minutes beyond', () => {
    const a = timed('a', [30, 40, 50]);
    const s = overlayX('time', [a]);
    expect(SECONDS_AXIS_MAX).toBe(120);
    expect(s).toMatchObject({ label: 'wall time (s)', xs: [[30, 70, 120]], unplaced: [0] });
    expect(s.text(70)).toBe('70.0 s');
    // 60 + 70 = 130 s > 120: both runs in minutes.
    const m = overlayX('time', [a, timed('b', [60, 70])]);
    expect(m.label).toBe('wall time (min)');
    expect(m.xs[0]).toEqual([0.5, 70 / 60, 2]);
    expect(m.xs[1]).toEqual([1, 130 / 60]);
    expect(m.text(130 / 60)).toBe('2.17 min');
  });

  it('leaves rows without a wall time off the time axis and says so', () => {
    const x = overlayX('time', [timed('a', [5, NaN, 5]), timed('b', [1])]);
    expect(x.xs).toEqual([[5, NaN, 10], [1]]);
    expect(x.unplaced).toEqual([1, 0]);
    expect(unplacedNote(x, ['a', 'b'])).toBe('no wall time recorded for 1 row of a (not drawn)');
    expect(unplacedNote(overlayX('time', [timed('a', [1])]), ['a'])).toBe('');
  });

  it('counts generated tokens as meanTotalTokens × episodes, summed', () => {
    // Rows of 10, 20, 30 tokens per episode, 8 episodes: 80, 80 + 160, 240 + 240.
    const x = overlayX('tokens', [timed('a', [1, 1, 1]), timed('b', [1, 1], NaN)]);
    expect(x).toMatchObject({ label: 'generated tokens', tick: '~s', xs: [[80, 240, 480], [NaN, NaN]], unplaced: [0, 2] });
    expect(x.text(12345.4)).toBe('12,345 tokens');
    expect(unplacedNote(x, ['a', 'b'])).toBe('no token count recorded for 2 rows of b (not drawn)');
    expect(overlayX('step', [timed('a', [1, 1])])).toMatchObject({ label: 'GRPO step', tick: 'd', xs: [[1, 2]], unplaced: [0] });
  });

  it('overlays runs on their own x values, each series naming the rows it owns', () => {
    const runs = [timed('a', [10, 10]), timed('b', [15])].map((r, i) => ({ run: r, color: runColour(i) }));
    const d = overlayData(overlayMetric('reward'), runs, overlayX('time', runs.map((r) => r.run)));
    expect(d.steps).toEqual([10, 15, 20]);
    expect(d.series.map((s) => [s.values, s.rows])).toEqual([
      [[0.1, NaN, 0.2], [0, 2]],
      [[NaN, 0.1, NaN], [1]],
    ]);
    // A row without an x is not drawn.
    const gap = overlayData(overlayMetric('reward'), [{ run: timed('c', [1, NaN, 1]), color: '' }], overlayX('time', [timed('c', [1, NaN, 1])]));
    expect(gap.steps).toEqual([1, 2]);
    expect(gap.series[0]).toMatchObject({ values: [0.1, 0.3], rows: [0, 1] });
  });

  it('puts a held-out reading at the x of its step, and leaves out one without a row', () => {
    const r = timed('a', [10, 20, 30]);
    r.heldOut = [
      { step: 2, accuracy: 0.5, n: 8, interval: [0.2, 0.8] },
      { step: 9, accuracy: 0.7, n: 8, interval: null },
    ];
    const runs = [{ run: r, color: '' }];
    const d = heldOutOverlay(runs, overlayX('time', [r]));
    expect(d.steps).toEqual([30]);
    expect(d.series[0]).toMatchObject({ values: [0.5], intervals: [[0.2, 0.8]], rows: [0] });
    // On the step axis every reading keeps its step, as before.
    expect(heldOutOverlay(runs, overlayX('step', [r])).steps).toEqual([2, 9]);
  });
});

describe('the crosshair', () => {
  it('finds the nearest of ascending values, the lower on a tie', () => {
    expect(nearestIndex([1, 3, 7], 2)).toBe(0);
    expect(nearestIndex([1, 3, 7], 2.1)).toBe(1);
    expect(nearestIndex([1, 3, 7], 5.5)).toBe(2);
    expect(nearestIndex([1, 3, 7], 100)).toBe(2);
    expect(nearestIndex([1, 3, 7], -5)).toBe(0);
    expect(nearestIndex([4], 9)).toBe(0);
    expect(nearestIndex([], 1)).toBe(-1);
  });

  it('takes the median gap between consecutive values', () => {
    expect(medianGap([0, 1, 2, 10])).toBe(1);
    expect(medianGap([0, 2, 3, 7])).toBe(2);
    expect(medianGap([0, 1, 3, 6, 10])).toBe(2.5);
    expect(medianGap([5])).toBe(0);
  });

  it("snaps to the nearest row of any run and reads each run's nearest row, — past its end", () => {
    const runs = [run('long', [[1, 0.2], [2, 0.4], [3, 0.5]]), run('short', [[1, 0.3]])].map((r, i) => ({ run: r, color: runColour(i) }));
    const read = crosshairReader(overlayData(overlayMetric('reward'), runs), 0, (x) => `step ${x}`);
    expect(read(1.2)).toEqual({
      x: 1,
      title: 'step 1',
      rows: [
        { label: 'long', color: RUN_COLOURS[0], value: 0.2, raw: 0.2 },
        { label: 'short', color: RUN_COLOURS[1], value: 0.3, raw: 0.3 },
      ],
    });
    expect(read(2.6)?.rows.map((r) => [r.label, r.value])).toEqual([
      ['long', 0.5],
      ['short', NaN],
    ]);
    // Smoothed as drawn (EMA 0.6 of 0.2, 0.4 is 0.325), with the raw value besides.
    const smooth = crosshairReader(overlayData(overlayMetric('reward'), runs), 0.6, String);
    expect(smooth(2)?.rows[0].value).toBeCloseTo(0.325, 12);
    expect(smooth(2)?.rows[0].raw).toBe(0.4);
    expect(crosshairReader({ steps: [], series: [] }, 0, String)(3)).toBeNull();
  });

  it('gives — in a gap wider than the run’s median row spacing', () => {
    const full = run('full', Array.from({ length: 10 }, (_, i): [number, number] => [i + 1, i]));
    const gappy = run('gappy', [[1, 1], [2, 2], [3, 3], [10, 10]]);
    const read = crosshairReader(overlayData(overlayMetric('reward'), [full, gappy].map((r) => ({ run: r, color: '' }))), 0, String);
    // At step 6 gappy's nearest row (3) is 3 steps off, its spacing is 1.
    expect(read(6)?.rows.map((r) => r.value)).toEqual([5, NaN]);
    expect(read(8.4)?.rows.map((r) => r.value)).toEqual([7, NaN]);
    // One spacing from its row at 10 it has a value again.
    expect(read(9.4)?.rows.map((r) => r.value)).toEqual([8, 10]);
  });
});
