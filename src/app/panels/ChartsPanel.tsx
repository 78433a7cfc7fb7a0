/**
 * Live training curves, one small d3 chart per quantity, fed from batched 'metrics' events, in
 * folds by group (learning, cost, protocol, optimizer; a closed fold draws nothing); the warm
 * start's loss (with its learning rate) from 'sftMetrics' rows. Each chart names the counter its
 * x axis counts: GRPO steps or warm-start steps (the status bar shows both, and the policy version).
 * The held-out charts open the page, in the story panel.
 */
import { useMemo, useState } from 'react';
import {
  CHARTS,
  CHART_GROUPS,
  GRPO_X,
  WARM_START_X,
  chartDataOf,
  heldOutDataOf,
  heldOutSubtitle,
  warmStartDataOf,
  warmStartSubtitle,
  type ChartGroup,
  type ChartSpec,
} from '../charts/chartSpecs';
import { LineChart } from '../charts/LineChart';
import { DEFAULT_SMOOTHING } from '../charts/smoothing';
import { SmoothingSelect } from '../charts/SmoothingSelect';
import { type MetricPoint, usePlayground } from '../state/store';

function SpecChart({ spec, points, smoothing }: { spec: ChartSpec; points: readonly MetricPoint[]; smoothing: number }) {
  const data = useMemo(() => chartDataOf(spec, points), [spec, points]);
  return (
    <LineChart
      id={spec.id}
      title={spec.title}
      data={data}
      yMin={spec.yMin}
      yMax={spec.yMax}
      smoothing={smoothing}
      xLabel={GRPO_X}
      legendColumns={spec.legendColumns}
    />
  );
}

export function HeldOutChart() {
  const points = usePlayground((s) => s.metrics);
  const frontier = usePlayground((s) => s.frontier);
  const data = useMemo(() => heldOutDataOf(points, frontier), [points, frontier]);
  return (
    <LineChart id="heldout" title="Held-out accuracy" subtitle={heldOutSubtitle(data)} data={data} yMin={0} yMax={1} smoothing={0} sparse xLabel={GRPO_X} />
  );
}

/** Drawn once the model has warm-start steps: the loss smoothed like the GRPO curves, the lr raw on its own axis. */
function WarmStartChart({ smoothing }: { smoothing: number }) {
  const rows = usePlayground((s) => s.sftMetrics);
  const { data, lr, skipped } = useMemo(() => warmStartDataOf(rows), [rows]);
  if (rows.length === 0) return null;
  return (
    <LineChart
      id="warmstart"
      title="Warm-start loss"
      subtitle={warmStartSubtitle(rows.length, skipped)}
      data={data}
      yMin={0}
      smoothing={smoothing}
      xLabel={WARM_START_X}
      secondary={lr}
    />
  );
}

/** The groups open when the page opens: what a run learns and what it costs. */
const OPEN_AT_START: ReadonlySet<ChartGroup> = new Set(['learning', 'cost']);

function ChartFold({ group, title, points, smoothing }: { group: ChartGroup; title: string; points: readonly MetricPoint[]; smoothing: number }) {
  const [open, setOpen] = useState(OPEN_AT_START.has(group));
  const specs = CHARTS.filter((c) => c.group === group);
  return (
    <details
      className="fold chart-fold"
      data-testid={`chart-group-${group}`}
      open={open}
      onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}
    >
      <summary>
        {title} <span className="muted small">({specs.map((c) => c.title).join(' · ')})</span>
      </summary>
      {open && (
        <div className="charts">
          {specs.map((spec) => (
            <SpecChart key={spec.id} spec={spec} points={points} smoothing={smoothing} />
          ))}
        </div>
      )}
    </details>
  );
}

export function ChartsPanel() {
  const points = usePlayground((s) => s.metrics);
  const sftRows = usePlayground((s) => s.sftMetrics.length);
  const [smoothing, setSmoothing] = useState<number>(DEFAULT_SMOOTHING);
  const last = points[points.length - 1]?.metrics;
  return (
    <section className="panel" aria-label="Training curves">
      <h2>
        Curves{' '}
        <span className="muted" data-testid="metrics-steps" data-steps={points.length}>
          {last
            ? `GRPO step ${last.step} · ${last.wallSec.toFixed(1)} s/step · ${Math.round(last.rolloutTokensPerSec)} rollout tok/s · grad norm ${last.gradNorm.toFixed(3)}${last.nonFiniteSkips ? ` · ${last.nonFiniteSkips} non-finite skips` : ''}`
            : 'no GRPO steps yet'}
        </span>
        {sftRows > 0 && (
          <span className="muted" data-testid="sft-rows" data-rows={sftRows}>
            {' '}
            · {sftRows} warm-start step{sftRows === 1 ? '' : 's'} drawn
          </span>
        )}
      </h2>
      <div className="row small">
        <SmoothingSelect
          testId="chart-smoothing"
          value={smoothing}
          onChange={setSmoothing}
          title="Exponential moving average over steps, debiased as in TensorBoard; the raw values are drawn faint behind. Legends: the last smoothed value (raw in brackets)."
        />
      </div>
      {sftRows > 0 && (
        <div className="charts">
          <WarmStartChart smoothing={smoothing} />
        </div>
      )}
      {CHART_GROUPS.map((g) => (
        <ChartFold key={g.id} group={g.id} title={g.title} points={points} smoothing={smoothing} />
      ))}
    </section>
  );
}
