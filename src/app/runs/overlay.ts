/**
 * Runs overlaid on one chart: one series per run, one colour per run, on the union of their
 * steps (a run has no value, NaN, at a step it did not take, so a short run simply ends). The
 * metrics offered are every series the charts panel draws, plus total tokens and the held-out
 * accuracy. Pure: kept runs → the ChartData LineChart draws.
 */
import { CHARTS, type ChartData, type ChartSeries } from '../charts/chartSpecs';
import { emaSmooth } from '../charts/smoothing';
import type { MetricPoint } from '../state/store';
import type { HeldOutReading, KeptRun } from './keptRun';

/**
 * One colour per run, in order. Each keeps ≥ 3:1 (WCAG non-text contrast) against the panel of
 * both colour schemes (overlay.test.ts computes it); hues ordered so neighbours differ most.
 */
export const RUN_COLOURS = ['#3b78d8', '#d9620b', '#2e9a4e', '#c2449b', '#a6762d', '#8a63d2', '#16948f', '#d64545'] as const;

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

/** A run's values of one quantity at its own steps. */
export interface RunSeries {
  label: string;
  color: string;
  steps: readonly number[];
  values: readonly number[];
  intervals?: readonly ([number, number] | null)[];
}

/**
 * Series of different runs on one x axis: the sorted union of their steps; each series holds its
 * value at its own steps and NaN elsewhere. A step a run logs twice keeps the later value.
 */
export function alignSeries(runs: readonly RunSeries[]): ChartData {
  const steps = [...new Set(runs.flatMap((r) => r.steps))].sort((a, b) => a - b);
  const at = new Map(steps.map((s, i) => [s, i]));
  const series: ChartSeries[] = runs.map((r) => {
    const values = steps.map(() => NaN);
    const intervals: ([number, number] | null)[] | null = r.intervals ? steps.map(() => null) : null;
    r.steps.forEach((s, j) => {
      const i = at.get(s) as number;
      values[i] = r.values[j];
      if (intervals) intervals[i] = r.intervals?.[j] ?? null;
    });
    return { label: r.label, color: r.color, values, ...(intervals ? { intervals } : {}) };
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

/** One metric of every run, aligned by step. */
export function overlayData(metric: OverlayMetric, runs: readonly DrawnRun[]): ChartData {
  return alignSeries(runs.map(({ run, color }) => ({ label: chartLabel(run.name), color, steps: run.metrics.map((p) => p.metrics.step), values: run.metrics.map(metric.value) })));
}

/** The held-out accuracy of every run (sparse: a value only at its evaluations). */
export function heldOutOverlay(runs: readonly DrawnRun[]): ChartData {
  return alignSeries(
    runs.map(({ run, color }) => ({
      label: chartLabel(run.name),
      color,
      steps: run.heldOut.map((h) => h.step),
      values: run.heldOut.map((h) => h.accuracy),
      intervals: run.heldOut.map((h) => h.interval),
    })),
  );
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
