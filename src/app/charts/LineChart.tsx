/**
 * One live line chart (d3 on SVG: a few series of at most a few hundred points). Everything
 * is drawn with attributes, not page CSS, so the exported SVG looks the same on its own.
 *
 * With smoothing, each series is drawn twice: the raw values faint behind, the debiased EMA
 * (smoothing.ts) on top. Sparse charts (held-out evaluations) draw a dot per value, joined
 * across the steps without one, with the value's interval as an error bar; they are not smoothed.
 * A secondary series (the warm start's learning rate under its loss) has its own scale on a right
 * axis, drawn dashed and raw: a schedule is not noise.
 *
 * Opt-in (the runs overlay): series that own only some rows of the x (runs on a time axis), whose
 * lines join their own rows; and a crosshair that reads every series at the x under the pointer,
 * drawn as HTML over the SVG so an exported chart never carries it.
 */
import { type NumberValue, type ScaleLinear, axisBottom, axisLeft, axisRight, extent, format, line, scaleLinear, select, type Selection } from 'd3';
import { type PointerEvent, useEffect, useRef, useState } from 'react';
import { type ChartData, type ChartSeries, thinIndices } from './chartSpecs';
import { emaSmooth } from './smoothing';
import { exportSvg } from './svgExport';
import { queueDraw } from './drawQueue';

const W = 300;
const PLOT_H = 112;
const M = { top: 18, right: 10, bottom: 18, left: 40 };
const LEGEND_ROW = 12;
const SUBTITLE_H = 11;
/** Room for the right axis' tick labels when there is a secondary series. */
const RIGHT_AXIS_W = 34;

/** A series that may own only some rows of the x: its line joins `rows` (ascending), skipping the other series' rows. */
export interface LineSeries extends ChartSeries {
  rows?: readonly number[];
}

export interface LineData extends ChartData {
  series: LineSeries[];
}

/** What the crosshair shows at one x: a title ("step 12") and each series' value there (NaN: none near, "—"). */
export interface CrosshairReading {
  x: number;
  title: string;
  rows: { label: string; color: string; value: number; raw: number }[];
}

export interface Crosshair {
  /** The reading nearest a data x (the line is drawn at its `x`), or null where there is none. */
  read: (x: number) => CrosshairReading | null;
  /** data-testid of the tooltip; the line's is `${testId}-line`, a row's `${testId}-row`. */
  testId: string;
}

export interface LineChartProps {
  id: string;
  title: string;
  /** A second, smaller title line (e.g. which problems and how many). */
  subtitle?: string;
  data: LineData;
  yMin?: number;
  yMax?: number;
  /** EMA weight in [0, 1); 0 draws the raw values only. */
  smoothing: number;
  /** Dots per value (held-out evaluations), never smoothed. */
  sparse?: boolean;
  /** Legend entries per row (default 2); 1 leaves room for long labels (run names). */
  legendColumns?: 1 | 2;
  /** Which counter the x axis counts ("GRPO step", "warm-start step"), written at the top right. */
  xLabel?: string;
  /** One more series on its own scale (right axis), never smoothed; its values are per row of `data`. */
  secondary?: ChartSeries;
  /** The d3 format of the x ticks; 'd' (the default) shows whole steps only. */
  xFormat?: string;
  /** A crosshair on hover (off by default). */
  crosshair?: Crosshair;
}

/** Where draw() put the plot, in viewBox units, for the crosshair. */
interface Geometry {
  x: ScaleLinear<number, number>;
  top: number;
  right: number;
  height: number;
}

function fmt(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e4) ? v.toExponential(2) : v.toFixed(a < 1 ? 3 : a < 100 ? 2 : 0);
}

const lastFinite = (values: readonly number[]): number => {
  for (let i = values.length - 1; i >= 0; i--) if (Number.isFinite(values[i])) return values[i];
  return NaN;
};

function draw(svgEl: SVGSVGElement, p: LineChartProps): Geometry {
  const { data, sparse } = p;
  const smoothing = sparse ? 0 : p.smoothing;
  const rows = thinIndices(data.steps.length);
  // The x label shares the subtitle's row, right-aligned, clear of the SVG button over the title row.
  const top = M.top + (p.subtitle || p.xLabel ? SUBTITLE_H : 0);
  const cols = p.legendColumns ?? 2;
  const secondary = p.secondary ?? null;
  const right = secondary ? RIGHT_AXIS_W : M.right;
  const legendRows = Math.ceil(Math.max(1, data.series.length + (secondary ? 1 : 0)) / cols);
  const height = top + PLOT_H + M.bottom + legendRows * LEGEND_ROW + 4;
  const svg = select(svgEl).attr('viewBox', `0 0 ${W} ${height}`).attr('data-points', data.steps.length).attr('data-smoothing', smoothing);
  svg.selectAll('*').remove();
  svg.append('text').attr('x', 2).attr('y', 11).attr('font-size', 11).attr('font-weight', 600).attr('fill', 'currentColor').text(p.title);
  if (p.xLabel)
    svg
      .append('text')
      .attr('x', W - 2)
      .attr('y', 22)
      .attr('text-anchor', 'end')
      .attr('font-size', 9)
      .attr('fill', 'currentColor')
      .attr('data-testid', `chart-xlabel-${p.id}`)
      .text(`x: ${p.xLabel}`);
  if (p.subtitle)
    svg
      .append('text')
      .attr('x', 2)
      .attr('y', 22)
      .attr('font-size', 9)
      .attr('fill', 'currentColor')
      .attr('data-testid', `chart-subtitle-${p.id}`)
      .text(p.subtitle);

  const steps = rows.map((i) => data.steps[i]);
  const [x0, x1] = extent(steps) as [number | undefined, number | undefined];
  const x = scaleLinear()
    .domain([x0 ?? 0, Math.max(x1 ?? 1, (x0 ?? 0) + 1)])
    .range([M.left, W - right]);
  // A series with its own rows is thinned over them, so thinning the union cannot skip all of its rows.
  const drawn = data.series.map((s) => ({
    ...s,
    idx: s.rows ? thinIndices(s.rows.length).map((k) => s.rows?.[k] as number) : rows,
    smooth: emaSmooth(s.values, smoothing),
  }));
  const values = drawn.flatMap((s) => [...s.idx.map((i) => s.values[i]), ...s.idx.flatMap((i) => s.intervals?.[i] ?? [])]).filter(Number.isFinite);
  let [lo, hi] = [Math.min(...values, p.yMin ?? Infinity), Math.max(...values, p.yMax ?? -Infinity)];
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) [lo, hi] = [p.yMin ?? 0, p.yMax ?? 1];
  if (hi - lo < 1e-9) [lo, hi] = [lo - 0.5, hi + 0.5];
  const y = scaleLinear()
    .domain([lo, hi])
    .nice(4)
    .range([top + PLOT_H, top]);

  const axisStyle = (g: Selection<SVGGElement, unknown, null, undefined>) => {
    g.attr('font-size', 9).attr('color', 'currentColor').attr('opacity', 0.75);
    g.selectAll('.domain').attr('stroke-opacity', 0.5);
  };
  const xFormat = p.xFormat ?? 'd';
  const xTicks = xFormat === 'd' ? x.ticks(5).filter(Number.isInteger) : x.ticks(5); // steps are whole numbers
  svg
    .append('g')
    .attr('transform', `translate(0,${top + PLOT_H})`)
    .call(axisBottom(x).tickValues(xTicks).tickFormat(format(xFormat)).tickSizeOuter(0))
    .call(axisStyle);
  svg
    .append('g')
    .attr('transform', `translate(${M.left},0)`)
    .call(axisLeft(y).ticks(4).tickFormat(format('~g')))
    .call(axisStyle);
  // The secondary scale starts at 0 (a learning rate is read against none at all).
  const v2 = secondary ? rows.map((i) => secondary.values[i]).filter(Number.isFinite) : [];
  const hi2 = Math.max(0, ...v2);
  const y2 = scaleLinear()
    .domain([Math.min(0, ...v2), hi2 > 0 ? hi2 : 1])
    .nice(4)
    .range([top + PLOT_H, top]);
  if (secondary) {
    const tick = (v: NumberValue) => (Number(v) === 0 ? '0' : format('.1~e')(v));
    svg
      .append('g')
      .attr('transform', `translate(${W - right},0)`)
      .attr('data-testid', `chart-right-axis-${p.id}`)
      .call(axisRight(y2).ticks(4).tickFormat(tick))
      .call(axisStyle);
  }

  const pathOf = (vs: readonly number[], idx: readonly number[]) =>
    line<number>()
      .defined((i) => Number.isFinite(vs[i]))
      .x((i) => x(data.steps[i]))
      .y((i) => y(vs[i]))(idx) ?? '';
  for (const s of drawn) {
    if (sparse) {
      const at = s.idx.filter((i) => Number.isFinite(s.values[i]));
      svg.append('path').attr('fill', 'none').attr('stroke', s.color).attr('stroke-width', 1.2).attr('d', pathOf(s.values, at)).attr('data-series', s.label);
      for (const i of at) {
        const iv = s.intervals?.[i];
        if (iv)
          svg
            .append('line')
            .attr('x1', x(data.steps[i]))
            .attr('x2', x(data.steps[i]))
            .attr('y1', y(iv[0]))
            .attr('y2', y(iv[1]))
            .attr('stroke', s.color)
            .attr('stroke-opacity', 0.45);
        svg
          .append('circle')
          .attr('cx', x(data.steps[i]))
          .attr('cy', y(s.values[i]))
          .attr('r', 2.4)
          .attr('fill', s.color)
          .attr('data-testid', `chart-dot-${p.id}`)
          .append('title')
          .text(`step ${data.steps[i]}: ${s.label} ${fmt(s.values[i])}${iv ? ` [${fmt(iv[0])}, ${fmt(iv[1])}]` : ''}`);
      }
      continue;
    }
    // The raw values faint behind the smoothed line; the line named by data-series is the one read.
    if (smoothing > 0)
      svg
        .append('path')
        .attr('fill', 'none')
        .attr('stroke', s.color)
        .attr('stroke-width', 1)
        .attr('stroke-opacity', 0.25)
        .attr('d', pathOf(s.values, s.idx))
        .attr('data-raw', s.label);
    svg.append('path').attr('fill', 'none').attr('stroke', s.color).attr('stroke-width', 1.4).attr('d', pathOf(s.smooth, s.idx)).attr('data-series', s.label);
    // A line through one value draws nothing: a single value (a one-step run) is a dot.
    const only = s.idx.filter((i) => Number.isFinite(s.values[i]));
    if (only.length === 1) svg.append('circle').attr('cx', x(data.steps[only[0]])).attr('cy', y(s.smooth[only[0]])).attr('r', 2).attr('fill', s.color);
  }

  if (secondary) {
    const path =
      line<number>()
        .defined((i) => Number.isFinite(secondary.values[i]))
        .x((i) => x(data.steps[i]))
        .y((i) => y2(secondary.values[i]))(rows) ?? '';
    svg
      .append('path')
      .attr('fill', 'none')
      .attr('stroke', secondary.color)
      .attr('stroke-width', 1.2)
      .attr('stroke-dasharray', '3 2')
      .attr('d', path)
      .attr('data-series', secondary.label);
  }

  // The secondary series is last in the legend, with a dashed swatch like its line and its raw value.
  const legend = [
    ...drawn.map((s) => ({ ...s, dashed: false, smoothing })),
    ...(secondary ? [{ ...secondary, label: `${secondary.label} (right axis)`, smooth: secondary.values, dashed: true, smoothing: 0 }] : []),
  ];
  legend.forEach((s, i) => {
    const lx = M.left - 30 + (i % cols) * (W / cols);
    const ly = top + PLOT_H + M.bottom + Math.floor(i / cols) * LEGEND_ROW + 8;
    const raw = lastFinite(s.values);
    const smooth = lastFinite(s.smooth);
    // The smoothed value, and the raw one in brackets where they differ.
    const value = Number.isFinite(raw) ? ` ${fmt(smooth)}${s.smoothing > 0 && fmt(smooth) !== fmt(raw) ? ` (${fmt(raw)})` : ''}` : '';
    if (s.dashed)
      svg
        .append('line')
        .attr('x1', lx)
        .attr('x2', lx + 8)
        .attr('y1', ly - 3)
        .attr('y2', ly - 3)
        .attr('stroke', s.color)
        .attr('stroke-width', 1.5)
        .attr('stroke-dasharray', '3 2');
    else
      svg
        .append('rect')
        .attr('x', lx)
        .attr('y', ly - 7)
        .attr('width', 8)
        .attr('height', 8)
        .attr('fill', s.color);
    svg
      .append('text')
      .attr('x', lx + 11)
      .attr('y', ly)
      .attr('font-size', 9)
      .attr('fill', 'currentColor')
      .text(`${s.label}${value}`);
  });
  if (drawn.length === 0) {
    svg
      .append('text')
      .attr('x', M.left)
      .attr('y', top + PLOT_H + M.bottom + 8)
      .attr('font-size', 9)
      .attr('fill', 'currentColor')
      .text(sparse ? 'no evaluations yet' : 'none so far');
  }
  return { x, top, right, height };
}

/** The pointer in viewBox units, or null off the plot (the crosshair reads the plot only). */
function pointerIn(e: PointerEvent<SVGSVGElement>, g: Geometry): { vx: number; vy: number } | null {
  const r = e.currentTarget.getBoundingClientRect();
  if (r.width === 0 || r.height === 0) return null;
  const vx = ((e.clientX - r.left) * W) / r.width;
  const vy = ((e.clientY - r.top) * g.height) / r.height;
  const inside = vx >= M.left - 4 && vx <= W - g.right + 4 && vy >= g.top - 4 && vy <= g.top + PLOT_H + 4;
  return inside ? { vx, vy } : null;
}

/** The crosshair's line and tooltip, in percent of the chart so they follow its CSS size. */
function CrosshairView({ reading, g, vx, smoothing, testId }: { reading: CrosshairReading; g: Geometry; vx: number; smoothing: number; testId: string }) {
  const left = (g.x(reading.x) / W) * 100;
  // The tooltip opens away from the nearer edge, so it stays on the chart.
  const side = vx > W / 2 ? { right: `${100 - (vx / W) * 100 + 2}%` } : { left: `${(vx / W) * 100 + 2}%` };
  const text = (v: number, raw: number) => (!Number.isFinite(v) ? '—' : `${fmt(v)}${smoothing > 0 && fmt(v) !== fmt(raw) ? ` (${fmt(raw)})` : ''}`);
  return (
    <>
      <div
        aria-hidden="true"
        data-testid={`${testId}-line`}
        data-x={reading.x}
        style={{
          position: 'absolute',
          left: `${left}%`,
          top: `${(g.top / g.height) * 100}%`,
          height: `${(PLOT_H / g.height) * 100}%`,
          width: 0,
          borderLeft: '1px dashed currentColor',
          opacity: 0.6,
          pointerEvents: 'none',
        }}
      />
      <div
        role="status"
        data-testid={testId}
        style={{
          position: 'absolute',
          top: `${(g.top / g.height) * 100}%`,
          ...side,
          zIndex: 3,
          maxWidth: '90%',
          padding: '2px 5px',
          fontSize: 10.5,
          lineHeight: 1.35,
          background: 'var(--panel)',
          border: '1px solid var(--border)',
          borderRadius: 3,
          boxShadow: '0 1px 3px rgba(0,0,0,0.18)',
          pointerEvents: 'none',
          whiteSpace: 'nowrap',
        }}
      >
        <div style={{ fontWeight: 600 }}>{reading.title}</div>
        {reading.rows.map((r) => (
          <div key={r.label} data-testid={`${testId}-row`} data-name={r.label} style={{ display: 'flex', gap: 4, alignItems: 'center' }}>
            <span className="run-swatch" style={{ background: r.color, flex: 'none' }} aria-hidden="true" />
            <span style={{ overflow: 'hidden', textOverflow: 'ellipsis', minWidth: 0 }}>{r.label}</span>
            <span className="mono" style={{ marginLeft: 'auto', paddingLeft: 6 }}>
              {text(r.value, r.raw)}
            </span>
          </div>
        ))}
      </div>
    </>
  );
}

export function LineChart(props: LineChartProps) {
  const ref = useRef<SVGSVGElement>(null);
  const geometry = useRef<Geometry | null>(null);
  const [hover, setHover] = useState<{ vx: number; vy: number } | null>(null);
  const { id, title, subtitle, data, yMin, yMax, smoothing, sparse, legendColumns, xLabel, secondary, xFormat, crosshair } = props;
  useEffect(() => {
    const svg = ref.current;
    if (!svg) return;
    return queueDraw(svg, () => {
      geometry.current = draw(svg, { id, title, subtitle, data, yMin, yMax, smoothing, sparse, legendColumns, xLabel, secondary, xFormat });
    });
  }, [id, title, subtitle, data, yMin, yMax, smoothing, sparse, legendColumns, xLabel, secondary, xFormat]);
  const g = geometry.current;
  // Read at render, so a chart that redraws under a still pointer (a live run) shows fresh values.
  const reading = crosshair && hover && g ? crosshair.read(g.x.invert(hover.vx)) : null;
  const onMove = (e: PointerEvent<SVGSVGElement>) => setHover(geometry.current && pointerIn(e, geometry.current));
  return (
    <figure className="chart" data-testid={`chart-${id}`}>
      <svg
        ref={ref}
        xmlns="http://www.w3.org/2000/svg"
        role="img"
        aria-label={title}
        data-testid={`chart-svg-${id}`}
        {...(crosshair ? { onPointerMove: onMove, onPointerDown: onMove, onPointerLeave: () => setHover(null) } : {})}
      />
      {crosshair && reading && g && hover && (
        <CrosshairView reading={reading} g={g} vx={hover.vx} smoothing={sparse ? 0 : smoothing} testId={crosshair.testId} />
      )}
      <button
        type="button"
        className="chart-export"
        title="Download this chart as SVG"
        data-testid={`chart-export-${id}`}
        onClick={() => ref.current && exportSvg(ref.current, `${id}.svg`)}
      >
        SVG
      </button>
    </figure>
  );
}
