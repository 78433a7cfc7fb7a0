/**
 * One live line chart (d3 on SVG: a few series of at most a few hundred points). Everything
 * is drawn with attributes, not page CSS, so the exported SVG looks the same on its own.
 */
import { axisBottom, axisLeft, extent, format, line, scaleLinear, select, type Selection } from 'd3';
import { useEffect, useRef } from 'react';
import type { MetricPoint } from '../state/store';
import { thin, type ChartSpec } from './chartSpecs';
import { exportSvg } from './svgExport';

const W = 300;
const PLOT_H = 112;
const M = { top: 18, right: 10, bottom: 18, left: 40 };
const LEGEND_ROW = 12;

function fmt(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e4) ? v.toExponential(2) : v.toFixed(a < 1 ? 3 : a < 100 ? 2 : 0);
}

function draw(svgEl: SVGSVGElement, spec: ChartSpec, all: readonly MetricPoint[]): void {
  const points = thin(all);
  const series = spec.hideZero ? spec.series.filter((s) => points.some((p) => s.value(p) !== 0)) : spec.series;
  const legendRows = Math.ceil(Math.max(1, series.length) / 2);
  const height = M.top + PLOT_H + M.bottom + legendRows * LEGEND_ROW + 4;
  const svg = select(svgEl).attr('viewBox', `0 0 ${W} ${height}`).attr('data-points', all.length);
  svg.selectAll('*').remove();
  svg.append('text').attr('x', 2).attr('y', 11).attr('font-size', 11).attr('font-weight', 600).attr('fill', 'currentColor').text(spec.title);

  const steps = points.map((p) => p.metrics.step);
  const [x0, x1] = extent(steps) as [number | undefined, number | undefined];
  const x = scaleLinear()
    .domain([x0 ?? 0, Math.max((x1 ?? 1), (x0 ?? 0) + 1)])
    .range([M.left, W - M.right]);
  const values = series.flatMap((s) => points.map((p) => s.value(p))).filter(Number.isFinite);
  let [lo, hi] = [Math.min(...values, spec.yMin ?? Infinity), Math.max(...values, spec.yMax ?? -Infinity)];
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) [lo, hi] = [spec.yMin ?? 0, spec.yMax ?? 1];
  if (hi - lo < 1e-9) [lo, hi] = [lo - 0.5, hi + 0.5];
  const y = scaleLinear().domain([lo, hi]).nice(4).range([M.top + PLOT_H, M.top]);

  const axisStyle = (g: Selection<SVGGElement, unknown, null, undefined>) => {
    g.attr('font-size', 9).attr('color', 'currentColor').attr('opacity', 0.75);
    g.selectAll('.domain').attr('stroke-opacity', 0.5);
  };
  const stepTicks = x.ticks(5).filter(Number.isInteger); // steps are whole numbers
  svg.append('g').attr('transform', `translate(0,${M.top + PLOT_H})`).call(axisBottom(x).tickValues(stepTicks).tickFormat(format('d')).tickSizeOuter(0)).call(axisStyle);
  svg.append('g').attr('transform', `translate(${M.left},0)`).call(axisLeft(y).ticks(4).tickFormat(format('~g'))).call(axisStyle);

  for (const s of series) {
    const path = line<MetricPoint>()
      .defined((p) => Number.isFinite(s.value(p)))
      .x((p) => x(p.metrics.step))
      .y((p) => y(s.value(p)));
    svg.append('path').datum(points).attr('fill', 'none').attr('stroke', s.color).attr('stroke-width', 1.4).attr('d', path).attr('data-series', s.label);
    if (points.length === 1) {
      svg.append('circle').attr('cx', x(points[0].metrics.step)).attr('cy', y(s.value(points[0]))).attr('r', 2).attr('fill', s.color);
    }
  }

  const last = all[all.length - 1];
  series.forEach((s, i) => {
    const lx = M.left - 30 + (i % 2) * (W / 2);
    const ly = M.top + PLOT_H + M.bottom + Math.floor(i / 2) * LEGEND_ROW + 8;
    svg.append('rect').attr('x', lx).attr('y', ly - 7).attr('width', 8).attr('height', 8).attr('fill', s.color);
    svg
      .append('text')
      .attr('x', lx + 11)
      .attr('y', ly)
      .attr('font-size', 9)
      .attr('fill', 'currentColor')
      .text(`${s.label}${last ? ` ${fmt(s.value(last))}` : ''}`);
  });
  if (series.length === 0) {
    svg.append('text').attr('x', M.left).attr('y', M.top + PLOT_H + M.bottom + 8).attr('font-size', 9).attr('fill', 'currentColor').text('none so far');
  }
}

export function LineChart({ spec, points }: { spec: ChartSpec; points: readonly MetricPoint[] }) {
  const ref = useRef<SVGSVGElement>(null);
  useEffect(() => {
    if (ref.current) draw(ref.current, spec, points);
  }, [spec, points]);
  return (
    <figure className="chart" data-testid={`chart-${spec.id}`}>
      <svg ref={ref} xmlns="http://www.w3.org/2000/svg" role="img" aria-label={spec.title} data-testid={`chart-svg-${spec.id}`} />
      <button type="button" className="chart-export" title="Download this chart as SVG" data-testid={`chart-export-${spec.id}`} onClick={() => ref.current && exportSvg(ref.current, `${spec.id}.svg`)}>
        SVG
      </button>
    </figure>
  );
}
