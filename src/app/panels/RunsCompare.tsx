/**
 * The ticked runs overlaid: a legend (one colour per run), reward, held-out accuracy and total
 * tokens on a shared x axis (GRPO step, wall time or generated tokens), one more chart of any
 * metric the curves panel draws, a crosshair reading every run on hover, and the settings that
 * differ between the runs.
 */
import { useMemo, useState } from 'react';
import { type Crosshair, LineChart } from '../charts/LineChart';
import { type FlatConfig, configDiff, valueText } from '../runs/configDiff';
import type { KeptRun } from '../runs/keptRun';
import {
  type DrawnRun,
  type OverlayAxis,
  type OverlayData,
  type OverlayX,
  OVERLAY_AXES,
  OVERLAY_METRICS,
  crosshairReader,
  heldOutNs,
  heldOutOverlay,
  overlayData,
  overlayMetric,
  overlayX,
  unplacedNote,
} from '../runs/overlay';

export interface ComparedRun extends DrawnRun {
  config: FlatConfig | null;
}

/** The charts always shown; the fourth is the user's choice. */
const FIXED = ['reward', 'tokens-total'] as const;

const AXIS_NAMES: Record<OverlayAxis, string> = { step: 'GRPO step', time: 'wall time', tokens: 'tokens' };

/** The crosshair of one chart, reading the data it draws. */
function useCrosshair(data: OverlayData, smoothing: number, x: OverlayX): Crosshair {
  return useMemo(() => ({ read: crosshairReader(data, smoothing, x.text), testId: 'runs-crosshair' }), [data, smoothing, x]);
}

function MetricChart({ id, runs, smoothing, x }: { id: string; runs: readonly DrawnRun[]; smoothing: number; x: OverlayX }) {
  const metric = overlayMetric(id);
  const data = useMemo(() => overlayData(metric, runs, x), [metric, runs, x]);
  const crosshair = useCrosshair(data, smoothing, x);
  return (
    <LineChart
      id={`runs-${id.replace(/[^\w-]/g, '_')}`}
      title={metric.title}
      data={data}
      yMin={metric.yMin}
      yMax={metric.yMax}
      smoothing={smoothing}
      legendColumns={1}
      xLabel={x.label}
      xFormat={x.tick}
      crosshair={crosshair}
    />
  );
}

function HeldOutChart({ runs, x }: { runs: readonly DrawnRun[]; x: OverlayX }) {
  const data = useMemo(() => heldOutOverlay(runs, x), [runs, x]);
  const crosshair = useCrosshair(data, 0, x);
  return (
    <LineChart
      id="runs-heldout"
      title="Held-out accuracy"
      subtitle={heldOutNs(runs)}
      data={data}
      yMin={0}
      yMax={1}
      smoothing={0}
      sparse
      legendColumns={1}
      xLabel={x.label}
      xFormat={x.tick}
      crosshair={crosshair}
    />
  );
}

function DiffTable({ runs }: { runs: readonly ComparedRun[] }) {
  const diff = useMemo(() => configDiff(runs.map((r) => r.config)), [runs]);
  const unrecorded = diff.unrecorded.map((i) => runs[i].run.name);
  return (
    <div className="runs-diff">
      <h3>
        Settings that differ{' '}
        <span className="muted" data-testid="runs-diff-summary" data-differ={diff.rows.length}>
          {runs.length - diff.unrecorded.length < 2
            ? 'fewer than two of these runs recorded their config'
            : `${diff.rows.length} differ${diff.rows.length === 1 ? 's' : ''}, ${diff.agreeing} agree${diff.agreeing === 1 ? 's' : ''}`}
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

/** `metric`: the fourth chart's first metric (a recorded study opens on what it is about). */
export function RunsCompare({ runs, smoothing, metric = 'accuracy' }: { runs: readonly ComparedRun[]; smoothing: number; metric?: string }) {
  const [extra, setExtra] = useState(metric);
  const [axis, setAxis] = useState<OverlayAxis>('step');
  const drawn = useMemo(() => runs.map((r) => ({ run: r.run, color: r.color })), [runs]);
  const x = useMemo(
    () =>
      overlayX(
        axis,
        drawn.map((r) => r.run),
      ),
    [axis, drawn],
  );
  const note =
    axis === 'step'
      ? ''
      : unplacedNote(
          x,
          drawn.map((r) => r.run.name),
        );
  const last = (run: KeptRun) => run.metrics.at(-1)?.metrics.step ?? 0;
  return (
    <div className="runs-compare" data-testid="runs-compare" data-runs={runs.length}>
      <ul className="runs-legend" data-testid="runs-legend" aria-label="runs compared">
        {runs.map((r) => (
          <li key={r.run.id} data-testid="runs-legend-item" data-name={r.run.name}>
            <span className="run-swatch" style={{ background: r.color }} aria-hidden="true" /> {r.run.name}{' '}
            <span className="muted">
              ({last(r.run)} step{last(r.run) === 1 ? '' : 's'})
            </span>
          </li>
        ))}
      </ul>
      <div className="row">
        <span className="muted">x axis</span>
        {/* A toggle: the chosen axis is pressed (drawn active), not disabled. */}
        <span className="toggle" role="group" aria-label="x axis">
          {OVERLAY_AXES.map((a) => (
            <button key={a} type="button" data-testid={`runs-x-${a}`} aria-pressed={axis === a} onClick={() => setAxis(a)}>
              {AXIS_NAMES[a]}
            </button>
          ))}
        </span>
        {note && (
          <span className="muted small" data-testid="runs-x-note">
            {note}
          </span>
        )}
      </div>
      <div className="charts">
        <MetricChart id={FIXED[0]} runs={drawn} smoothing={smoothing} x={x} />
        <HeldOutChart runs={drawn} x={x} />
        <MetricChart id={FIXED[1]} runs={drawn} smoothing={smoothing} x={x} />
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
          <MetricChart id={extra} runs={drawn} smoothing={smoothing} x={x} />
        </div>
      </div>
      {runs.length >= 2 && <DiffTable runs={runs} />}
    </div>
  );
}
