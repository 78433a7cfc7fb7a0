/** Which curves the charts panel draws, each as series over the step metrics. */
import { VIOLATIONS } from '../../core/protocol/violations';
import type { MetricPoint } from '../state/store';

export interface SeriesSpec {
  label: string;
  color: string;
  value: (p: MetricPoint) => number;
}

export interface ChartSpec {
  id: string;
  title: string;
  series: SeriesSpec[];
  /** Fixed y bounds where the quantity has them (rates); otherwise from the data. */
  yMin?: number;
  yMax?: number;
  /** Hide series that are zero everywhere (many violation classes never occur). */
  hideZero?: boolean;
}

// Tableau 10, in a fixed order so a class keeps its colour across charts and exports.
const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];

export const CHARTS: readonly ChartSpec[] = [
  { id: 'reward', title: 'Mean reward', series: [{ label: 'reward', color: PALETTE[0], value: (p) => p.metrics.meanReward }] },
  { id: 'accuracy', title: 'Accuracy (exact)', yMin: 0, yMax: 1, series: [{ label: 'accuracy', color: PALETTE[4], value: (p) => p.metrics.accuracy }] },
  {
    id: 'tokens',
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
    title: 'Clones / episode',
    yMin: 0,
    series: [
      { label: 'clones', color: PALETTE[1], value: (p) => p.metrics.clonesPerEpisode },
      { label: 'delegating', color: PALETTE[6], value: (p) => p.metrics.delegationRate },
    ],
  },
  {
    id: 'violations',
    title: 'Violations / episode, by class',
    yMin: 0,
    hideZero: true,
    series: VIOLATIONS.map((v, i) => ({ label: v, color: PALETTE[i % PALETTE.length], value: (p: MetricPoint) => p.metrics.violations[v] / Math.max(1, p.episodes) })),
  },
  {
    id: 'gate',
    title: 'Gate rate',
    yMin: 0,
    yMax: 1,
    series: [
      { label: 'gated contexts', color: PALETTE[9], value: (p) => p.metrics.gateRate },
      { label: 'zero-variance groups', color: PALETTE[5], value: (p) => p.metrics.zeroVarianceFraction },
    ],
  },
  {
    id: 'kl',
    title: 'KL to reference (k3)',
    series: [{ label: 'kl', color: PALETTE[3], value: (p) => p.metrics.kl }],
  },
  {
    id: 'ppo-kl',
    title: 'PPO KL (behaviour ‖ current, k3)',
    yMin: 0,
    series: [{ label: 'approx KL', color: PALETTE[6], value: (p) => p.metrics.approxKl }],
  },
  {
    id: 'entropy',
    title: 'Policy entropy (nats / token)',
    yMin: 0,
    series: [{ label: 'entropy', color: PALETTE[2], value: (p) => p.metrics.entropy }],
  },
  {
    id: 'loss',
    title: 'Loss, clip fraction',
    series: [
      { label: 'loss', color: PALETTE[8], value: (p) => p.metrics.loss },
      { label: 'clip fraction', color: PALETTE[7], value: (p) => p.metrics.clipFraction },
    ],
  },
];

/** At most `max` points per series: every k-th point, always keeping the last. */
export function thin<T>(points: readonly T[], max = 400): readonly T[] {
  if (points.length <= max) return points;
  const k = Math.ceil(points.length / max);
  const out = points.filter((_, i) => i % k === 0);
  if (out[out.length - 1] !== points[points.length - 1]) out.push(points[points.length - 1]);
  return out;
}
