/**
 * What the page says a run has learned so far: the held-out readings of the page's own run (the
 * periodic evaluations on the monitor set, one per method and step, each with its 95% interval),
 * the share of held-out problems the root delegated, and one sentence comparing the first reading
 * with the newest. Pure.
 */
import type { FrontierPoint, Method } from '../../core/eval/frontier';
import { wilsonInterval } from '../../core/eval/stats';
import { colourOf } from '../../core/eval/frontierSvg';
import type { ChartData, ChartSeries } from './chartSpecs';

/** One live held-out evaluation of the page's run: a method at a GRPO step (a kept run stores only the delegate method's, runs/keptRun.ts HeldOutReading). */
export interface LiveReading {
  step: number;
  method: Method;
  accuracy: number;
  lo: number;
  hi: number;
  n: number;
  /** Share of the problems whose root started a clone (absent in points from before it was recorded). */
  delegationRate?: number;
}

/** The live evaluations (points with a step), in step order, delegate before mono at a step. */
export function liveReadings(frontier: readonly FrontierPoint[]): LiveReading[] {
  const order = (m: Method) => (m === 'delegate' ? 0 : m === 'mono' ? 1 : 2);
  // The story reads one task: a mix's run evaluates each, and the first one evaluated speaks for the run.
  const task = frontier.find((p) => p.step !== undefined)?.task;
  return frontier
    .filter((p): p is FrontierPoint & { step: number } => p.step !== undefined && p.task === task)
    .map((p) => ({
      step: p.step,
      method: p.method,
      accuracy: p.accuracy,
      lo: p.interval[0],
      hi: p.interval[1],
      n: p.n,
      ...(p.delegationRate !== undefined ? { delegationRate: p.delegationRate } : {}),
    }))
    .sort((a, b) => a.step - b.step || order(a.method) - order(b.method));
}

/** The held-out share of problems delegated (delegate method), with Wilson intervals: the second chart of the story. */
export function delegationDataOf(readings: readonly LiveReading[]): ChartData {
  const rows = readings.filter((r) => r.method === 'delegate' && r.delegationRate !== undefined);
  const series: ChartSeries = {
    label: 'problems delegated',
    color: colourOf('delegate'),
    values: rows.map((r) => r.delegationRate as number),
    intervals: rows.map((r) => wilsonInterval(Math.round((r.delegationRate as number) * r.n), r.n)),
  };
  return { steps: rows.map((r) => r.step), series: rows.length > 0 ? [series] : [] };
}

const pct = (v: number) => `${Math.round(v * 100)}%`;

/**
 * One sentence on what changed between the first held-out reading of the delegate method and the
 * newest: accuracy with intervals, whether the intervals are apart, and the share delegated. Null
 * before two readings.
 */
export function storySentence(readings: readonly LiveReading[]): string | null {
  const own = readings.filter((r) => r.method === 'delegate');
  if (own.length < 2) return null;
  const a = own[0];
  const b = own[own.length - 1];
  const apart = b.lo > a.hi ? 'intervals apart: a real rise' : b.hi < a.lo ? 'intervals apart: a real fall' : 'intervals overlap: within the noise so far';
  const acc = `held-out accuracy ${pct(a.accuracy)} [${pct(a.lo)}, ${pct(a.hi)}] at step ${a.step} → ${pct(b.accuracy)} [${pct(b.lo)}, ${pct(b.hi)}] at step ${b.step} (${apart})`;
  const delegated =
    a.delegationRate !== undefined && b.delegationRate !== undefined ? `; problems delegated ${pct(a.delegationRate)} → ${pct(b.delegationRate)}` : '';
  return `${acc}${delegated}.`;
}

/** Seconds a GRPO step of the first-visit demo takes on the 2-core machine of docs/BENCHMARKS.md ("The first visit"). */
export const MEASURED_STEP_SEC = 7;

/**
 * This machine's pace while a run trains, from its newest steps' own times (up to the last
 * three) and the steps `done`: seconds a step, when the next held-out reading comes (after which step, in about how
 * long), and, where steps take more than 1.5× the demo's on the machine it was measured on, that
 * this machine is slower and the curve comes later (the run is seeded: the same readings, later). Null before a step is done
 * or with the evaluation off.
 */
export function paceSentence(stepSecs: readonly number[], done: number, evalEvery: number): string | null {
  if (stepSecs.length === 0 || evalEvery <= 0) return null;
  const recent = stepSecs.slice(-3);
  const sec = recent.reduce((a, b) => a + b, 0) / recent.length;
  const next = (Math.floor(done / evalEvery) + 1) * evalEvery;
  const wait = Math.max(1, Math.round((next - done) * sec));
  const slow =
    sec > 1.5 * MEASURED_STEP_SEC
      ? ` This machine runs slower than the 2-core one the demo was measured on (${MEASURED_STEP_SEC} s a step): the same curve comes later.`
      : '';
  return `${sec.toFixed(0)} s a GRPO step here: the next reading, after step ${next}, in about ${wait} s.${slow}`;
}
