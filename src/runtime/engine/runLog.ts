/**
 * What a run has produced so far: every step's metrics, and the most recent episodes (capped,
 * oldest dropped) for the traces export. Exports use the CLI's run-directory formats:
 * metrics one JSON object per line (or CSV), traces JSONL with the step added.
 */
import { tracesToJsonl } from '../../core/io/traces';
import { VIOLATIONS } from '../../core/protocol/violations';
import type { StepMetrics } from '../../core/rl/grpoStep';
import type { EpisodeTrace } from '../../core/rollout/trace';

/** Episodes kept for export (about 5 kB each). */
export const TRACE_CAP = 4096;

export class RunLog {
  readonly metrics: StepMetrics[] = [];
  private traces: { step: number; trace: EpisodeTrace }[] = [];

  add(metrics: StepMetrics, traces: readonly EpisodeTrace[]): void {
    this.metrics.push(metrics);
    for (const trace of traces) this.traces.push({ step: metrics.step, trace });
    if (this.traces.length > TRACE_CAP) this.traces = this.traces.slice(this.traces.length - TRACE_CAP);
  }

  /** The history of a run that goes on (a saved session's): its rows, and its episodes oldest first. */
  restore(metrics: readonly StepMetrics[], traces: readonly { step: number; trace: EpisodeTrace }[]): void {
    this.clear();
    this.metrics.push(...metrics);
    this.traces = traces.slice(-TRACE_CAP);
  }

  clear(): void {
    this.metrics.length = 0;
    this.traces = [];
  }

  get traceCount(): number {
    return this.traces.length;
  }

  tracesJsonl(): string {
    return tracesToJsonl(this.traces.map(({ step, trace }) => ({ step, ...trace })));
  }

  metricsText(format: 'jsonl' | 'csv'): string {
    if (format === 'jsonl') return this.metrics.map((m) => JSON.stringify(m)).join('\n') + (this.metrics.length ? '\n' : '');
    return metricsCsv(this.metrics);
  }
}

/** One column per scalar metric and per violation class (`violations.<name>`). */
export function metricsCsv(rows: readonly StepMetrics[]): string {
  const scalar = (Object.keys(rows[0] ?? {}) as (keyof StepMetrics)[]).filter((k) => k !== 'violations');
  const header = [...scalar, ...VIOLATIONS.map((v) => `violations.${v}`)];
  const lines = rows.map((r) => [...scalar.map((k) => String(r[k])), ...VIOLATIONS.map((v) => String(r.violations[v] ?? 0))].join(','));
  return rows.length === 0 ? '' : [header.join(','), ...lines].join('\n') + '\n';
}
