/**
 * The live accuracy–cost frontier (d3 on SVG): one point per (weights, method, limit) with its
 * Wilson interval, log cost axis (total or critical-path tokens), the Pareto front over all
 * points, and the training run's own points joined in step order per method, so the frontier
 * can be watched moving. Drawn with attributes only, so the exported SVG stands on its own.
 */
import { axisBottom, axisLeft, format, scaleLinear, scaleLog, select, type Selection } from 'd3';
import { useEffect, useRef, useState } from 'react';
import { type FrontierPoint, paretoOf } from '../../core/eval/frontier';
import { colourOf } from '../../core/eval/frontierSvg';

export type CostAxis = 'total' | 'critical';

const W = 520;
const H = 300;
const M = { top: 20, right: 14, bottom: 38, left: 44 };
const LEGEND_H = 16;

export const costOf = (p: FrontierPoint, cost: CostAxis): number => Math.max(1, cost === 'total' ? p.meanTokens : p.meanCriticalPathTokens);

const pct = (v: number) => `${(v * 100).toFixed(1)}%`;

/** The hover text of a point: setting, n, accuracy with its interval, both costs. */
export function describePoint(p: FrontierPoint): string {
  const where = p.step !== undefined ? `step ${p.step}` : (p.checkpoint ?? '');
  return `${p.method} · limit ${p.limit}${where ? ` · ${where}` : ''}\naccuracy ${pct(p.accuracy)} [${pct(p.interval[0])}, ${pct(p.interval[1])}] · n ${p.n}\n${p.meanTokens.toFixed(1)} tokens · ${p.meanCriticalPathTokens.toFixed(1)} critical path${
    p.meanRootContextTokens === undefined ? '' : `\nroot ${(p.meanRootTokens ?? 0).toFixed(1)} tokens written · context ${p.meanRootContextTokens.toFixed(1)}`
  }`;
}

function draw(svgEl: SVGSVGElement, points: readonly FrontierPoint[], cost: CostAxis, onHover: (p: FrontierPoint | null, ev: MouseEvent | null) => void): void {
  const svg = select(svgEl).attr('viewBox', `0 0 ${W} ${H + LEGEND_H}`).attr('data-points', points.length).attr('data-cost', cost);
  svg.selectAll('*').remove();
  svg
    .append('text')
    .attr('x', 2)
    .attr('y', 12)
    .attr('font-size', 11)
    .attr('font-weight', 600)
    .attr('fill', 'currentColor')
    .text(`Accuracy vs ${cost === 'total' ? 'generated' : 'critical-path'} tokens`);
  const costs = points.map((p) => costOf(p, cost));
  const lo = Math.min(...costs, 10) / 1.4;
  const hi = Math.max(...costs, 100) * 1.4;
  const x = scaleLog().domain([lo, hi]).range([M.left, W - M.right]);
  const y = scaleLinear().domain([0, 1]).range([H - M.bottom, M.top]);
  const axisStyle = (g: Selection<SVGGElement, unknown, null, undefined>) => {
    g.attr('font-size', 9).attr('color', 'currentColor').attr('opacity', 0.75);
  };
  svg.append('g').attr('transform', `translate(0,${H - M.bottom})`).call(axisBottom(x).ticks(6, '~s')).call(axisStyle);
  svg.append('g').attr('transform', `translate(${M.left},0)`).call(axisLeft(y).ticks(5).tickFormat(format('.0%'))).call(axisStyle);
  svg
    .append('text')
    .attr('x', (M.left + W - M.right) / 2)
    .attr('y', H - 6)
    .attr('text-anchor', 'middle')
    .attr('font-size', 10)
    .attr('fill', 'currentColor')
    .attr('data-testid', 'frontier-x-label')
    .text(`${cost === 'total' ? 'generated tokens per problem (root + clones)' : 'critical-path tokens per problem (root + longest clone per round)'}, log scale`);

  // The training run's trajectory per method (points that carry a step).
  const methods = [...new Set(points.map((p) => p.method))];
  for (const m of methods) {
    const run = points.filter((p) => p.method === m && p.step !== undefined).sort((a, b) => (a.step ?? 0) - (b.step ?? 0));
    if (run.length < 2) continue;
    const d = run.map((p, i) => `${i ? 'L' : 'M'}${x(costOf(p, cost)).toFixed(1)},${y(p.accuracy).toFixed(1)}`).join('');
    svg.append('path').attr('d', d).attr('fill', 'none').attr('stroke', colourOf(m)).attr('stroke-width', 1).attr('opacity', 0.45).attr('data-testid', 'frontier-trajectory').attr('data-method', m);
  }

  const front = paretoOf(points, cost).map((i) => points[i]);
  if (front.length > 0) {
    // A staircase: accuracy holds until the next, costlier front point.
    let d = '';
    front.forEach((p, i) => {
      const px = x(costOf(p, cost)).toFixed(1);
      const py = y(p.accuracy).toFixed(1);
      d += i === 0 ? `M${px},${py}` : `H${px}V${py}`;
    });
    d += `H${W - M.right}`;
    svg.append('path').attr('d', d).attr('fill', 'none').attr('stroke', '#888').attr('stroke-dasharray', '4 3').attr('data-testid', 'frontier-pareto').attr('data-size', front.length);
  }

  const latestStep = Math.max(-1, ...points.map((p) => p.step ?? -1));
  const g = svg.append('g');
  for (const p of points) {
    const px = x(costOf(p, cost));
    const colour = colourOf(p.method);
    g.append('line').attr('x1', px).attr('x2', px).attr('y1', y(p.interval[0])).attr('y2', y(p.interval[1])).attr('stroke', colour).attr('opacity', 0.4);
    // Older points of the training run fade; the newest and every non-run point are solid.
    const faded = p.step !== undefined && p.step < latestStep;
    g.append('circle')
      .attr('cx', px)
      .attr('cy', y(p.accuracy))
      .attr('r', 4)
      .attr('fill', colour)
      .attr('fill-opacity', faded ? 0.35 : 0.9)
      .attr('stroke', p.step === undefined ? '#000' : 'none')
      .attr('stroke-width', 0.6)
      .attr('data-testid', 'frontier-point')
      .attr('data-method', p.method)
      .attr('data-limit', p.limit)
      .attr('data-label', p.checkpoint ?? '')
      .style('cursor', 'default')
      .on('mouseenter', (ev: MouseEvent) => onHover(p, ev))
      .on('mouseleave', () => onHover(null, null))
      .append('title')
      .text(describePoint(p));
  }

  methods.forEach((m, i) => {
    const lx = M.left + i * 78;
    svg.append('circle').attr('cx', lx).attr('cy', H + 6).attr('r', 4).attr('fill', colourOf(m));
    svg.append('text').attr('x', lx + 7).attr('y', H + 9).attr('font-size', 9).attr('fill', 'currentColor').text(m);
  });
  if (points.length === 0) {
    svg.append('text').attr('x', M.left + 8).attr('y', M.top + 16).attr('font-size', 10).attr('fill', 'currentColor').text('no points yet: evaluate, or train with "held-out eval every" > 0');
  }
}

export function FrontierChart({ points, cost, svgRef }: { points: readonly FrontierPoint[]; cost: CostAxis; svgRef: React.RefObject<SVGSVGElement | null> }) {
  const [hover, setHover] = useState<{ p: FrontierPoint; x: number; y: number } | null>(null);
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    setHover(null);
    if (!svgRef.current) return;
    draw(svgRef.current, points, cost, (p, ev) => {
      const r = box.current?.getBoundingClientRect();
      setHover(p && ev && r ? { p, x: ev.clientX - r.left, y: ev.clientY - r.top } : null);
    });
  }, [points, cost, svgRef]);
  return (
    <div className="frontier-chart" ref={box}>
      <svg ref={svgRef} xmlns="http://www.w3.org/2000/svg" role="img" aria-label="Accuracy–cost frontier" data-testid="frontier-svg" />
      {hover && (
        <div className="frontier-tooltip mono" data-testid="frontier-tooltip" style={{ left: hover.x + 12, top: hover.y + 8 }}>
          {describePoint(hover.p)}
        </div>
      )}
    </div>
  );
}
