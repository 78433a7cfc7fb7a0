/**
 * Which curves the charts panel draws, each as series over the step metrics, and the plain
 * data (steps × series values) the line chart draws from them. Pure.
 */
import type { FrontierPoint } from '../../core/eval/frontier';
import { colourOf } from '../../core/eval/frontierSvg';
import { VIOLATIONS } from '../../core/protocol/violations';
import type { SftMetricsRow } from '../../core/sft/sft';
import type { StepMetrics } from '../../core/rl/grpoStep';
import type { HeldOutFields, MetricPoint } from '../runs/metricsRows';

export type { HeldOutFields };

export interface SeriesSpec {
  label: string;
  color: string;
  value: (p: MetricPoint) => number;
}

/** The chart groups, in the order the panel shows them (each a fold). */
export const CHART_GROUPS = [
  { id: 'learning', title: 'Learning' },
  { id: 'cost', title: 'Cost and delegation' },
  { id: 'protocol', title: 'Protocol and gating' },
  { id: 'optimizer', title: 'Optimizer' },
] as const;

export type ChartGroup = (typeof CHART_GROUPS)[number]['id'];

export interface ChartSpec {
  id: string;
  title: string;
  group: ChartGroup;
  series: SeriesSpec[];
  /** Fixed y bounds where the quantity has them (rates); otherwise from the data. */
  yMin?: number;
  yMax?: number;
  /** Hide series that are zero everywhere (many violation classes never occur). */
  hideZero?: boolean;
  /** Legend entries a row (default 2); 1 where labels and values are long enough to overlap. */
  legendColumns?: 1 | 2;
}

// Tableau 10, in a fixed order so a class keeps its colour across charts and exports.
const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];

export const CHARTS: readonly ChartSpec[] = [
  { id: 'reward', group: 'learning', title: 'Mean reward', series: [{ label: 'reward', color: PALETTE[0], value: (p) => p.metrics.meanReward }] },
  {
    id: 'accuracy',
    group: 'learning',
    title: 'Accuracy (exact)',
    yMin: 0,
    yMax: 1,
    series: [{ label: 'accuracy', color: PALETTE[4], value: (p) => p.metrics.accuracy }],
  },
  {
    id: 'tokens',
    group: 'cost',
    title: 'Generated tokens / episode',
    yMin: 0,
    series: [
      { label: 'root', color: PALETTE[0], value: (p) => p.metrics.meanRootTokens },
      { label: 'clones', color: PALETTE[1], value: (p) => p.metrics.meanCloneTokens },
      { label: 'critical path', color: PALETTE[2], value: (p) => p.metrics.meanCriticalPathTokens },
    ],
  },
  {
    id: 'clones',
    group: 'cost',
    title: 'Clones / episode',
    yMin: 0,
    series: [
      { label: 'clones', color: PALETTE[1], value: (p) => p.metrics.clonesPerEpisode },
      { label: 'delegating', color: PALETTE[6], value: (p) => p.metrics.delegationRate },
    ],
  },
  {
    id: 'violations',
    group: 'protocol',
    title: 'Violations / episode, by class',
    yMin: 0,
    hideZero: true,
    legendColumns: 1,
    series: VIOLATIONS.map((v, i) => ({
      label: v,
      color: PALETTE[i % PALETTE.length],
      value: (p: MetricPoint) => p.metrics.violations[v] / Math.max(1, p.episodes),
    })),
  },
  {
    id: 'gate',
    group: 'protocol',
    title: 'Gate rate',
    yMin: 0,
    yMax: 1,
    legendColumns: 1,
    series: [
      { label: 'gated contexts', color: PALETTE[9], value: (p) => p.metrics.gateRate },
      { label: 'gradient mass gated', color: PALETTE[2], value: (p) => p.metrics.gatedMassShare },
      { label: 'zero-variance groups', color: PALETTE[5], value: (p) => p.metrics.zeroVarianceFraction },
    ],
  },
  {
    id: 'gate-bias',
    group: 'protocol',
    title: "Gated clones' advantage, had they not been gated",
    legendColumns: 1,
    series: [{ label: 'mean advantage', color: PALETTE[6], value: (p) => p.metrics.gatedCloneAdvantage }],
  },
  {
    id: 'kl',
    group: 'optimizer',
    title: 'KL to reference (k3)',
    series: [{ label: 'kl', color: PALETTE[3], value: (p) => p.metrics.kl }],
  },
  {
    id: 'ppo-kl',
    group: 'optimizer',
    title: 'PPO KL (behaviour ‖ current, k3)',
    yMin: 0,
    series: [{ label: 'approx KL', color: PALETTE[6], value: (p) => p.metrics.approxKl }],
  },
  {
    id: 'entropy',
    group: 'optimizer',
    title: 'Policy entropy (nats / token)',
    yMin: 0,
    series: [{ label: 'entropy', color: PALETTE[2], value: (p) => p.metrics.entropy }],
  },
  {
    id: 'clip-reach',
    group: 'optimizer',
    title: 'Upper clip out of reach: A > 0 tokens with π_old ≥ 1/(1+ε), share of trained tokens',
    yMin: 0,
    yMax: 1,
    series: [{ label: 'upper clip out of reach', color: PALETTE[3], value: (p) => p.metrics.clipOutOfReach }],
  },
  {
    id: 'loss',
    group: 'optimizer',
    title: 'Loss, clip fraction',
    series: [
      { label: 'loss', color: PALETTE[8], value: (p) => p.metrics.loss },
      { label: 'clip fraction', color: PALETTE[7], value: (p) => p.metrics.clipFraction },
    ],
  },
];

/** The counter each chart's x axis counts (see core/io/provenance.ts: one policy version per GRPO step, per applied warm-start step). */
export const GRPO_X = 'GRPO step';
export const WARM_START_X = 'warm-start step';

/**
 * The warm start's curve: the teacher-forced loss per warm-start step (counted from the model's
 * origin, like the status bar's), with the learning rate of each step as a secondary series.
 */
export function warmStartDataOf(rows: readonly SftMetricsRow[]): { data: ChartData; lr: ChartSeries; skipped: number } {
  return {
    data: { steps: rows.map((r) => r.step), series: [{ label: 'loss', color: PALETTE[8], values: rows.map((r) => r.loss) }] },
    lr: { label: 'lr', color: PALETTE[3], values: rows.map((r) => r.lr) },
    skipped: rows.filter((r) => r.skipped).length,
  };
}

/** The warm-start chart's second title line: how many steps, and how many changed no weights. */
export function warmStartSubtitle(steps: number, skipped: number): string {
  return `teacher demonstrations, ${steps} step${steps === 1 ? '' : 's'}${skipped > 0 ? `, ${skipped} skipped (non-finite: no update)` : ''}`;
}

/** What a line chart draws: one x (the step) per row, and per series one value per row (NaN: none). */
export interface ChartData {
  steps: number[];
  series: ChartSeries[];
}

export interface ChartSeries {
  label: string;
  color: string;
  values: number[];
  /** Per row, a 95% interval drawn as an error bar (held-out points), or null. */
  intervals?: ([number, number] | null)[];
}

export function chartDataOf(spec: ChartSpec, points: readonly MetricPoint[]): ChartData {
  const series = spec.series.map((s) => ({ label: s.label, color: s.color, values: points.map(s.value) }));
  return {
    steps: points.map((p) => p.metrics.step),
    series: spec.hideZero ? series.filter((s) => s.values.some((v) => v !== 0)) : series,
  };
}

const finiteOr = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : NaN);

/**
 * The held-out accuracy over training: the periodic evaluations of the page's own run (frontier
 * points that carry a step, one series per method, with their Wilson intervals) and the monitor
 * evaluations recorded in metrics rows (CLI runs). Rows only where an evaluation ran; `ns` are
 * the problem counts of the points drawn (for the label).
 */
export function heldOutDataOf(points: readonly MetricPoint[], frontier: readonly FrontierPoint[]): HeldOutData {
  const rows = points.map((p) => p.metrics as StepMetrics & Partial<HeldOutFields>).filter((m) => Number.isFinite(finiteOr(m.evalAccuracy)));
  const live = frontier.filter((p): p is FrontierPoint & { step: number } => p.step !== undefined);
  const steps = [...new Set([...rows.map((m) => m.step), ...live.map((p) => p.step)])].sort((a, b) => a - b);
  const at = new Map(steps.map((s, i) => [s, i]));
  const series: ChartSeries[] = [];
  const ns = new Set<number>();
  let nUnrecorded = false;
  // A mix's run evaluates each task: one series per method and task, named by both.
  const tasks = new Set(live.map((p) => p.task));
  const lines = [...new Map(live.map((p) => [`${p.method} ${p.task ?? ''}`, p] as const)).values()];
  for (const { method, task } of lines) {
    const values = steps.map(() => NaN);
    const intervals: ([number, number] | null)[] = steps.map(() => null);
    for (const p of live) {
      if (p.method !== method || p.task !== task) continue;
      const i = at.get(p.step) as number;
      values[i] = p.accuracy;
      intervals[i] = p.interval;
      ns.add(p.n);
    }
    series.push({ label: tasks.size > 1 ? `${method} · ${task}` : method, color: colourOf(method), values, intervals });
  }
  if (rows.length > 0) {
    const values = steps.map(() => NaN);
    for (const m of rows) {
      values[at.get(m.step) as number] = finiteOr(m.evalAccuracy);
      if (Number.isInteger(m.evalN)) ns.add(m.evalN as number);
      else nUnrecorded = true;
    }
    series.push({ label: 'monitor eval (run log)', color: PALETTE[4], values });
  }
  return { steps, series, ns: [...ns].sort((a, b) => a - b), nUnrecorded };
}

export interface HeldOutData extends ChartData {
  /** The problem counts of the evaluations drawn, ascending. */
  ns: number[];
  /** Some run-log rows do not say their n. */
  nUnrecorded: boolean;
}

/** Which problems the chart shows: "n = 200", "n = 2, 200" for a mix, and where n was not recorded. */
export function heldOutSubtitle(d: Pick<HeldOutData, 'ns' | 'nUnrecorded'>): string {
  const known = d.ns.length > 0 ? `n = ${d.ns.join(', ')}` : '';
  const n = d.nUnrecorded ? (known ? `${known}; run log: n not recorded` : 'n not recorded') : known || 'n = –';
  return `monitor set, greedy, ${n}`;
}

/** Indices of at most `max` rows: every k-th, always keeping the last. */
export function thinIndices(length: number, max = 400): number[] {
  const all = Array.from({ length }, (_, i) => i);
  if (length <= max) return all;
  const k = Math.ceil(length / max);
  const out = all.filter((i) => i % k === 0);
  if (out[out.length - 1] !== length - 1) out.push(length - 1);
  return out;
}
