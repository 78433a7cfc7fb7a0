/**
 * GRPO metrics rows that come from outside the running page (a CLI run's metrics.jsonl, a kept
 * run read back from the browser's storage), checked field by field and completed into the
 * StepMetrics the charts draw. A field an older CLI did not log reads NaN, so a chart shows no
 * value there rather than a false 0; JSON writes a non-finite number as null, which reads NaN too.
 * Pure.
 */
import { VIOLATIONS, type Violation } from '../../core/protocol/violations';
import type { StepMetrics } from '../../core/rl/grpoStep';

/** A metrics row as the charts read it: the step's metrics and, on evaluation steps, the CLI's held-out fields. */
/**
 * The fields the CLI's `train --eval-every` adds to a metrics row on the steps where it evaluated
 * the monitor set (greedy): accuracy, mean tokens, mean reward; `evalN` where the row says it.
 */
export interface HeldOutFields {
  evalAccuracy: number;
  evalTokens: number;
  evalReward: number;
  evalN: number;
}

/** One step's metrics and how many episodes it averaged over (for violation rates). */
export interface MetricPoint {
  metrics: StepMetrics;
  episodes: number;
}

export type MetricsRow = StepMetrics & Partial<HeldOutFields>;

type NumericKey = Exclude<keyof StepMetrics, 'step' | 'violations'>;

/**
 * Every numeric field of StepMetrics, and whether it is a share in [0, 1] (a check that tells a
 * metrics file from some other JSONL). A Record, so a field added to StepMetrics must be named here.
 */
const NUMERIC_FIELDS: Record<NumericKey, 'share' | 'number'> = {
  meanReward: 'number',
  accuracy: 'share',
  meanRootTokens: 'number',
  meanCloneTokens: 'number',
  meanCriticalPathTokens: 'number',
  meanTotalTokens: 'number',
  clonesPerEpisode: 'number',
  delegationRate: 'share',
  gateRate: 'share',
  gatedMassShare: 'share',
  gatedCloneAdvantage: 'number',
  zeroVarianceFraction: 'share',
  groupsSampled: 'number',
  groupsDropped: 'number',
  loss: 'number',
  kl: 'number',
  clipFraction: 'share',
  dualClipFraction: 'share',
  approxKl: 'number',
  entropy: 'number',
  clipOutOfReach: 'share',
  gradNorm: 'number',
  updates: 'number',
  nonFiniteSkips: 'number',
  trainedTokens: 'number',
  rolloutTokensPerSec: 'number',
  wallSec: 'number',
};

const HELD_OUT_FIELDS: Record<keyof HeldOutFields, 'share' | 'number'> = { evalAccuracy: 'share', evalTokens: 'number', evalReward: 'number', evalN: 'number' };

/** A row that is not a GRPO metrics row; `message` names the field and what it should be. */
export class MetricsRowError extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const shown = (v: unknown) => (typeof v === 'number' ? String(v) : (JSON.stringify(v) ?? String(v)));

function fail(message: string): never {
  throw new MetricsRowError(message);
}

/** A number field: a number, or null/absent for "not recorded" (NaN); a share must lie in [0, 1]. */
function numberField(raw: Record<string, unknown>, key: string, kind: 'share' | 'number'): number {
  const v = raw[key];
  if (v === undefined || v === null) return NaN;
  if (typeof v !== 'number') fail(`${key} must be a number (got ${shown(v)})`);
  if (kind === 'share' && Number.isFinite(v) && (v < 0 || v > 1)) fail(`${key} must be a share in [0, 1] (got ${v})`);
  return v;
}

/**
 * One row, checked and completed: `step` a positive integer, `meanReward` a finite number (what
 * makes it a GRPO row), the other known fields numbers where present; unknown fields are dropped.
 * A warm-start (sft) row is named as such, since it is the likeliest wrong file.
 */
export function checkMetricsRow(raw: unknown): MetricsRow {
  if (!isObject(raw)) fail(`a metrics row must be a JSON object (got ${shown(raw)})`);
  if (!Number.isSafeInteger(raw.step) || (raw.step as number) < 1) fail(`step must be a positive integer (got ${shown(raw.step)})`);
  if (raw.meanReward === undefined && 'loss' in raw && 'lr' in raw) fail('this is a warm-start (sft) row (loss and lr, no meanReward): only GRPO train runs compare here');
  if (typeof raw.meanReward !== 'number' || !Number.isFinite(raw.meanReward)) fail(`meanReward must be a finite number (got ${shown(raw.meanReward)})`);
  const row: Record<string, unknown> = { step: raw.step };
  for (const [key, kind] of Object.entries(NUMERIC_FIELDS)) row[key] = numberField(raw, key, kind);
  if (raw.violations !== undefined && !isObject(raw.violations)) fail(`violations must be an object of counts by class (got ${shown(raw.violations)})`);
  const counts = (raw.violations ?? {}) as Record<string, unknown>;
  const violations = {} as Record<Violation, number>;
  for (const v of VIOLATIONS) {
    const c = counts[v];
    if (c !== undefined && c !== null && (typeof c !== 'number' || c < 0)) fail(`violations.${v} must be a count ≥ 0 (got ${shown(c)})`);
    violations[v] = typeof c === 'number' ? c : NaN;
  }
  row.violations = violations;
  // The held-out fields only on the steps that have them: their absence marks a step without an evaluation.
  for (const [key, kind] of Object.entries(HELD_OUT_FIELDS)) {
    if (raw[key] !== undefined) row[key] = numberField(raw, key, kind);
  }
  return row as unknown as MetricsRow;
}

/**
 * Rows in order: each step after the one before (a run directory's rows never repeat a step).
 * `where(i)` names row i in errors (a file's line, a stored run's index).
 */
export function checkMetricsRows(rows: readonly unknown[], where: (i: number) => string): MetricsRow[] {
  let last = 0;
  return rows.map((raw, i) => {
    let row: MetricsRow;
    try {
      row = checkMetricsRow(raw);
    } catch (e) {
      if (e instanceof MetricsRowError) throw new MetricsRowError(`${where(i)}: ${e.message}`);
      throw e;
    }
    if (row.step <= last) throw new MetricsRowError(`${where(i)}: step ${row.step} does not follow step ${last} (steps must increase)`);
    last = row.step;
    return row;
  });
}

/**
 * The episodes per step, for violation rates: prompts sampled × group where the row says how
 * many groups it sampled (dynamic sampling), else batch × group; NaN without a config.
 */
export function episodesOf(row: MetricsRow, config: { group?: unknown; batch?: unknown } | null): number {
  const group = config?.group;
  const batch = config?.batch;
  if (typeof group !== 'number') return NaN;
  if (Number.isFinite(row.groupsSampled)) return row.groupsSampled * group;
  return typeof batch === 'number' ? batch * group : NaN;
}
