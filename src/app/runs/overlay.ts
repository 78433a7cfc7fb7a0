/**
 * Runs overlaid on one chart: one series per run, one colour per run, on the union of their
 * x values (a run has no value, NaN, at an x it has no row at, so a short run simply ends). The
 * x axis counts GRPO steps, wall time or generated tokens (overlayX): runs that ran at different
 * speeds or lengths are compared by what they spent. The metrics offered are every series the
 * charts panel draws, plus total tokens and the held-out accuracy. A crosshair reads every run's
 * value near one x (crosshairReader). Pure: kept runs → the data LineChart draws.
 */
import { CHARTS, GRPO_X, type ChartData, type ChartSeries } from '../charts/chartSpecs';
import type { CrosshairReading } from '../charts/LineChart';
import { emaSmooth } from '../charts/smoothing';
import type { MetricPoint } from '../state/store';
import type { HeldOutReading, KeptRun } from './keptRun';

/**
 * One colour per run, in order. Each keeps ≥ 3:1 (WCAG non-text contrast) against the panel of
 * both colour schemes (overlay.test.ts computes it); hues ordered so neighbours differ most.
 */
export const RUN_COLOURS = ['#3b78d8', '#d9620b', '#2e9a4e', '#c2449b', '#a6762d', '#8a63d2', '#16948f', '#d64545', '#6b6b6b'] as const;

export const runColour = (i: number): string => RUN_COLOURS[i % RUN_COLOURS.length];

/** A quantity one overlay chart draws for every run. */
export interface OverlayMetric {
  id: string;
  title: string;
  value: (p: MetricPoint) => number;
  yMin?: number;
  yMax?: number;
}

/** Every series of the charts panel as its own metric ("Generated tokens / episode: root"), and total tokens. */
export const OVERLAY_METRICS: readonly OverlayMetric[] = [
  ...CHARTS.flatMap((spec) =>
    spec.series.map((s) => ({
      id: spec.series.length === 1 ? spec.id : `${spec.id}:${s.label}`,
      title: spec.series.length === 1 ? spec.title : `${spec.title}: ${s.label}`,
      value: s.value,
      ...(spec.yMin !== undefined ? { yMin: spec.yMin } : {}),
      ...(spec.yMax !== undefined ? { yMax: spec.yMax } : {}),
    })),
  ),
  { id: 'tokens-total', title: 'Generated tokens / episode: total', value: (p) => p.metrics.meanTotalTokens, yMin: 0 },
];

export function overlayMetric(id: string): OverlayMetric {
  const m = OVERLAY_METRICS.find((x) => x.id === id);
  if (!m) throw new Error(`no overlay metric ${JSON.stringify(id)} (known: ${OVERLAY_METRICS.map((x) => x.id).join(', ')})`);
  return m;
}

/** What the overlay's x axis counts. */
export type OverlayAxis = 'step' | 'time' | 'tokens';

export const OVERLAY_AXES: readonly OverlayAxis[] = ['step', 'time', 'tokens'];

/** The x of every metrics row of every run on one axis, and how the axis is written. */
export interface OverlayX {
  axis: OverlayAxis;
  /** The axis title with its unit: "GRPO step", "wall time (min)", "generated tokens". */
  label: string;
  /** The d3 format of its ticks ('d': whole numbers only). */
  tick: string;
  /** An x as the crosshair writes it: "step 12", "3.5 min", "12,345 tokens". */
  text: (x: number) => string;
  /** Per run, per metrics row: its x; NaN where the row cannot be placed on this axis. */
  xs: number[][];
  /** Per run, how many of its rows were left off (no wall time or no token count recorded). */
  unplaced: number[];
}

/**
 * The running sum of per-row amounts, each row's x being the total at its end (step 1's row sits
 * at the time step 1 took). A row whose amount is missing, non-finite or negative has no x (NaN,
 * not drawn) and adds nothing, so the axis counts what the run recorded: later rows sit earlier
 * by the unrecorded amount rather than vanish.
 */
export function cumulative(amounts: readonly number[]): number[] {
  let total = 0;
  return amounts.map((a) => {
    if (!(Number.isFinite(a) && a >= 0)) return NaN;
    total += a;
    return total;
  });
}

/** Up to this many seconds of the longest run the time axis counts seconds, beyond it minutes. */
export const SECONDS_AXIS_MAX = 120;

/**
 * Every run's rows on one axis: the GRPO step; the wall time (cumulative `wallSec`, in minutes
 * once the longest run passes SECONDS_AXIS_MAX seconds); or the generated tokens (cumulative
 * `meanTotalTokens × episodes`: root and clones, every episode of the step).
 */
export function overlayX(axis: OverlayAxis, runs: readonly KeptRun[]): OverlayX {
  const unplacedOf = (xs: number[][]) => xs.map((r) => r.filter((x) => !Number.isFinite(x)).length);
  if (axis === 'step') {
    const xs = runs.map((r) => r.metrics.map((p) => p.metrics.step));
    return { axis, label: GRPO_X, tick: 'd', text: (x) => `step ${x}`, xs, unplaced: unplacedOf(xs) };
  }
  if (axis === 'time') {
    const sec = runs.map((r) => cumulative(r.metrics.map((p) => p.metrics.wallSec)));
    const longest = Math.max(0, ...sec.flat().filter(Number.isFinite));
    const [unit, per] = longest > SECONDS_AXIS_MAX ? ['min', 60] : ['s', 1];
    const xs = sec.map((r) => r.map((t) => t / per));
    return { axis, label: `wall time (${unit})`, tick: '~g', text: (x) => `${x.toFixed(x < 10 ? 2 : 1)} ${unit}`, xs, unplaced: unplacedOf(xs) };
  }
  const xs = runs.map((r) => cumulative(r.metrics.map((p) => p.metrics.meanTotalTokens * p.episodes)));
  return { axis, label: 'generated tokens', tick: '~s', text: (x) => `${Math.round(x).toLocaleString('en-US')} tokens`, xs, unplaced: unplacedOf(xs) };
}

/** What the panel says of rows left off the axis ("" when none): "no wall time recorded for 3 rows of a". */
export function unplacedNote(x: OverlayX, names: readonly string[]): string {
  const what = x.axis === 'time' ? 'wall time' : 'token count';
  const parts = x.unplaced.flatMap((n, i) => (n === 0 ? [] : [`${n} row${n === 1 ? '' : 's'} of ${names[i]}`]));
  return parts.length === 0 ? '' : `no ${what} recorded for ${parts.join(', ')} (not drawn)`;
}

/** A run's values of one quantity at its own x values (steps, seconds, tokens). */
export interface RunSeries {
  label: string;
  color: string;
  steps: readonly number[];
  values: readonly number[];
  intervals?: readonly ([number, number] | null)[];
}

/** A run's series on the shared x: `rows` are the indices it has a row at, so its line joins them across other runs' rows. */
export interface OverlaySeries extends ChartSeries {
  rows: number[];
}

export interface OverlayData extends ChartData {
  series: OverlaySeries[];
}

/**
 * Series of different runs on one x axis: the sorted union of their x values; each series holds
 * its value at its own x and NaN elsewhere. An x a run logs twice keeps the later value; a
 * non-finite x (a row not placed on this axis) is left out.
 */
export function alignSeries(runs: readonly RunSeries[]): OverlayData {
  const steps = [...new Set(runs.flatMap((r) => r.steps).filter(Number.isFinite))].sort((a, b) => a - b);
  const at = new Map(steps.map((s, i) => [s, i]));
  const series: OverlaySeries[] = runs.map((r) => {
    const values = steps.map(() => NaN);
    const intervals: ([number, number] | null)[] | null = r.intervals ? steps.map(() => null) : null;
    const rows = new Set<number>();
    r.steps.forEach((s, j) => {
      const i = at.get(s);
      if (i === undefined) return;
      rows.add(i);
      values[i] = r.values[j];
      if (intervals) intervals[i] = r.intervals?.[j] ?? null;
    });
    return { label: r.label, color: r.color, values, rows: [...rows].sort((a, b) => a - b), ...(intervals ? { intervals } : {}) };
  });
  return { steps, series };
}

/** A run as it is drawn: its name and its colour. */
export interface DrawnRun {
  run: KeptRun;
  color: string;
}

/** The longest run name a chart's legend shows whole (the panel's own legend always shows it whole). */
export const CHART_LABEL_MAX = 40;

export const chartLabel = (name: string): string => (name.length <= CHART_LABEL_MAX ? name : `${name.slice(0, CHART_LABEL_MAX - 1)}…`);

/** One metric of every run, aligned on the x axis (by step when no axis is given). */
export function overlayData(metric: OverlayMetric, runs: readonly DrawnRun[], x: OverlayX = overlayX('step', runs.map((r) => r.run))): OverlayData {
  return alignSeries(runs.map(({ run, color }, i) => ({ label: chartLabel(run.name), color, steps: x.xs[i], values: run.metrics.map(metric.value) })));
}

/**
 * The held-out accuracy of every run (sparse: a value only at its evaluations). Off the step axis
 * a reading sits at the x of the run's metrics row of the same step; one without such a row (or
 * whose row is not placed) is left out.
 */
export function heldOutOverlay(runs: readonly DrawnRun[], x?: OverlayX): OverlayData {
  return alignSeries(
    runs.map(({ run, color }, i) => {
      const xOfStep = new Map(run.metrics.map((p, j) => [p.metrics.step, x?.xs[i][j] ?? NaN]));
      return {
        label: chartLabel(run.name),
        color,
        steps: run.heldOut.map((h) => (!x || x.axis === 'step' ? h.step : (xOfStep.get(h.step) ?? NaN))),
        values: run.heldOut.map((h) => h.accuracy),
        intervals: run.heldOut.map((h) => h.interval),
      };
    }),
  );
}

/** Index of the value in ascending `xs` nearest to x (the lower one on a tie); -1 when xs is empty. */
export function nearestIndex(xs: readonly number[], x: number): number {
  if (xs.length === 0) return -1;
  let [lo, hi] = [0, xs.length - 1];
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] <= x) lo = mid;
    else hi = mid;
  }
  return Math.abs(xs[hi] - x) < Math.abs(xs[lo] - x) ? hi : lo;
}

/** The median gap between consecutive values of ascending xs (0 for fewer than two). */
export function medianGap(xs: readonly number[]): number {
  const gaps = xs.slice(1).map((v, i) => v - xs[i]).sort((a, b) => a - b);
  if (gaps.length === 0) return 0;
  const m = gaps.length >> 1;
  return gaps.length % 2 ? gaps[m] : (gaps[m - 1] + gaps[m]) / 2;
}

/**
 * What the crosshair reads at a pointer's x: the x snaps to the nearest row with a value of any
 * run; each run then gives its value (smoothed as drawn, and raw) at its own row nearest that x,
 * if that row lies within the run's median row spacing of it (a run with one row: on it), else
 * NaN ("—"): past a run's end, or in a gap in its rows, it has no value near.
 */
export function crosshairReader(data: OverlayData, smoothing: number, text: (x: number) => string): (x: number) => CrosshairReading | null {
  const runs = data.series.map((s) => {
    const rows = s.rows.filter((i) => Number.isFinite(s.values[i]));
    const xs = rows.map((i) => data.steps[i]);
    return { s, rows, xs, near: medianGap(xs), smooth: emaSmooth(s.values, smoothing) };
  });
  const all = [...new Set(runs.flatMap((r) => r.xs))].sort((a, b) => a - b);
  return (pointer) => {
    const k = nearestIndex(all, pointer);
    if (k < 0) return null;
    const x = all[k];
    const rows = runs.map(({ s, rows, xs, near, smooth }) => {
      const j = nearestIndex(xs, x);
      const hit = j >= 0 && Math.abs(xs[j] - x) <= near * (1 + 1e-9);
      return { label: s.label, color: s.color, value: hit ? smooth[rows[j]] : NaN, raw: hit ? s.values[rows[j]] : NaN };
    });
    return { x, title: text(x), rows };
  };
}

/** The problem counts of the held-out readings drawn, for the chart's subtitle: "n = 32, 64" ("n not recorded" for some). */
export function heldOutNs(runs: readonly DrawnRun[]): string {
  const readings = runs.flatMap((r) => r.run.heldOut);
  const ns = [...new Set(readings.flatMap((h) => (h.n === null ? [] : [h.n])))].sort((a, b) => a - b);
  const unknown = readings.some((h) => h.n === null);
  const known = ns.length > 0 ? `n = ${ns.join(', ')}` : '';
  return `delegate, greedy, monitor set, ${known && unknown ? `${known}; some n not recorded` : known || (unknown ? 'n not recorded' : 'n = –')}`;
}

/** The last finite value of the EMA-smoothed series (NaN when there is none). */
export function lastSmoothed(values: readonly number[], weight: number): number {
  const s = emaSmooth(values, weight);
  for (let i = s.length - 1; i >= 0; i--) if (Number.isFinite(s[i])) return s[i];
  return NaN;
}

/** What the run list shows of a run's outcome: steps, the last smoothed reward, the last held-out reading. */
export interface RunOutcome {
  /** GRPO steps taken (the last step's number). */
  steps: number;
  reward: number;
  heldOut: HeldOutReading | null;
}

export function runOutcome(run: KeptRun, smoothing: number): RunOutcome {
  return {
    steps: run.counters.grpoSteps,
    reward: lastSmoothed(
      run.metrics.map((p) => p.metrics.meanReward),
      smoothing,
    ),
    heldOut: run.heldOut.at(-1) ?? null,
  };
}
