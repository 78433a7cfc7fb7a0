/**
 * The ticked runs overlaid: a legend (one colour per run), reward, held-out accuracy and total
 * tokens on a shared step axis, one more chart of any metric the curves panel draws, and the
 * settings that differ between the runs.
 */
import { useMemo, useState } from 'react';
import { LineChart } from '../charts/LineChart';
import { type FlatConfig, configDiff, valueText } from '../runs/configDiff';
import type { KeptRun } from '../runs/keptRun';
import { type DrawnRun, OVERLAY_METRICS, heldOutNs, heldOutOverlay, overlayData, overlayMetric } from '../runs/overlay';

export interface ComparedRun extends DrawnRun {
  config: FlatConfig | null;
}

/** The charts always shown; the fourth is the user's choice. */
const FIXED = ['reward', 'tokens-total'] as const;

function MetricChart({ id, runs, smoothing }: { id: string; runs: readonly DrawnRun[]; smoothing: number }) {
  const metric = overlayMetric(id);
  const data = useMemo(() => overlayData(metric, runs), [metric, runs]);
  return <LineChart id={`runs-${id.replace(/[^\w-]/g, '_')}`} title={metric.title} data={data} yMin={metric.yMin} yMax={metric.yMax} smoothing={smoothing} legendColumns={1} />;
}

function DiffTable({ runs }: { runs: readonly ComparedRun[] }) {
  const diff = useMemo(() => configDiff(runs.map((r) => r.config)), [runs]);
  const unrecorded = diff.unrecorded.map((i) => runs[i].run.name);
  return (
    <div className="runs-diff">
      <h3>
        Settings that differ{' '}
        <span className="muted" data-testid="runs-diff-summary" data-differ={diff.rows.length}>
          {runs.length - diff.unrecorded.length < 2 ? 'fewer than two of these runs recorded their config' : `${diff.rows.length} differ${diff.rows.length === 1 ? 's' : ''}, ${diff.agreeing} agree${diff.agreeing === 1 ? 's' : ''}`}
          {unrecorded.length > 0 && ` · no config recorded for ${unrecorded.join(', ')} (import its run.json)`}
        </span>
      </h3>
      {diff.rows.length > 0 && (
        <div className="scroll-x">
          <table className="dense runs-diff-table" data-testid="runs-diff">
            <thead>
              <tr>
                <th>setting</th>
                {runs.map((r) => (
                  <th key={r.run.id}>
                    <span className="run-swatch" style={{ background: r.color }} aria-hidden="true" /> {r.run.name}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {diff.rows.map((row) => (
                <tr key={row.key} data-testid="runs-diff-row" data-key={row.key}>
                  <td className="mono">{row.key}</td>
                  {row.values.map((v, i) => (
                    <td key={runs[i].run.id} className="mono" title={v === undefined ? 'not recorded by this run' : undefined}>
                      {valueText(v)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

export function RunsCompare({ runs, smoothing }: { runs: readonly ComparedRun[]; smoothing: number }) {
  const [extra, setExtra] = useState('accuracy');
  const drawn = useMemo(() => runs.map((r) => ({ run: r.run, color: r.color })), [runs]);
  const heldOut = useMemo(() => heldOutOverlay(drawn), [drawn]);
  const last = (run: KeptRun) => run.metrics.at(-1)?.metrics.step ?? 0;
  return (
    <div className="runs-compare" data-testid="runs-compare" data-runs={runs.length}>
      <ul className="runs-legend" data-testid="runs-legend" aria-label="runs compared">
        {runs.map((r) => (
          <li key={r.run.id} data-testid="runs-legend-item" data-name={r.run.name}>
            <span className="run-swatch" style={{ background: r.color }} aria-hidden="true" /> {r.run.name} <span className="muted">({last(r.run)} steps)</span>
          </li>
        ))}
      </ul>
      <div className="charts">
        <MetricChart id={FIXED[0]} runs={drawn} smoothing={smoothing} />
        <LineChart id="runs-heldout" title="Held-out accuracy" subtitle={heldOutNs(drawn)} data={heldOut} yMin={0} yMax={1} smoothing={0} sparse legendColumns={1} />
        <MetricChart id={FIXED[1]} runs={drawn} smoothing={smoothing} />
        <div>
          <label className="small">
            chart{' '}
            <select data-testid="runs-extra-metric" value={extra} onChange={(e) => setExtra(e.target.value)}>
              {OVERLAY_METRICS.filter((m) => !(FIXED as readonly string[]).includes(m.id)).map((m) => (
                <option key={m.id} value={m.id}>
                  {m.title}
                </option>
              ))}
            </select>
          </label>
          <MetricChart id={extra} runs={drawn} smoothing={smoothing} />
        </div>
      </div>
      <DiffTable runs={runs} />
    </div>
  );
}
