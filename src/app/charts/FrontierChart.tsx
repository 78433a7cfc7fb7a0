/**
 * The live accuracy–cost frontier (d3 on SVG): one point per (weights, method, limit) with its
 * Wilson interval, log cost axis (total or critical-path tokens), the Pareto front over all
 * points, and the training run's own points joined in step order per method, so the frontier
 * can be watched moving. Drawn with attributes only, so the exported SVG stands on its own.
 * Markers per method and the spreading of coincident points: frontierMarks.ts.
 */
import { axisBottom, axisLeft, format, scaleLinear, scaleLog, select, type Selection } from 'd3';
import { useEffect, useRef, useState } from 'react';
import { type FrontierPoint, paretoOf } from '../../core/eval/frontier';
import { colourOf } from '../../core/eval/frontierSvg';
import { type Placed, markerOf, placePoints } from './frontierMarks';

export type CostAxis = 'total' | 'critical';

const W = 520;
const H = 300;
const M = { top: 20, right: 14, bottom: 38, left: 44 };
const LEGEND_ROW = 14;

export const costOf = (p: FrontierPoint, cost: CostAxis): number => Math.max(1, cost === 'total' ? p.meanTokens : p.meanCriticalPathTokens);

const pct = (v: number) => `${(v * 100).toFixed(1)}%`;

/** The hover text of a point: setting, n, accuracy with its interval, both costs. */
export function describePoint(p: FrontierPoint): string {
  const where = p.step !== undefined ? `step ${p.step}` : (p.checkpoint ?? '');
  return `${p.method} · limit ${p.limit}${where ? ` · ${where}` : ''}\naccuracy ${pct(p.accuracy)} [${pct(p.interval[0])}, ${pct(p.interval[1])}] · n ${p.n}\n${p.meanTokens.toFixed(1)} tokens · ${p.meanCriticalPathTokens.toFixed(1)} critical path${
    p.meanRootContextTokens === undefined ? '' : `\nroot ${(p.meanRootTokens ?? 0).toFixed(1)} tokens written · context ${p.meanRootContextTokens.toFixed(1)}`
  }`;
}

/** The legend's rows: each method's marker, then the marks that need saying (only those drawn). */
function drawLegend(
  svg: Selection<SVGSVGElement, unknown, null, undefined>,
  methods: readonly string[],
  shown: { pareto: boolean; trajectory: boolean; faded: boolean; interval: boolean; spread: boolean },
): void {
  const items: { kind: string; text: string; mark: (g: Selection<SVGGElement, unknown, null, undefined>) => void }[] = methods.map((m) => ({
    kind: m,
    text: m,
    mark: (g) => marker(g.append('circle').attr('cx', 6).attr('cy', 0), m, false),
  }));
  const grey = '#6b7280';
  if (shown.pareto)
    items.push({
      kind: 'pareto',
      text: 'Pareto front (all points)',
      mark: (g) => void g.append('path').attr('d', 'M0,3H6V-3H14').attr('fill', 'none').attr('stroke', grey).attr('stroke-dasharray', '4 3'),
    });
  if (shown.trajectory)
    items.push({
      kind: 'trajectory',
      text: 'training run, in step order',
      mark: (g) => void g.append('path').attr('d', 'M0,3L6,-2L14,1').attr('fill', 'none').attr('stroke', grey).attr('opacity', 0.6),
    });
  if (shown.faded)
    items.push({
      kind: 'faded',
      text: 'older steps faded',
      mark: (g) => void g.append('circle').attr('cx', 6).attr('r', 4).attr('fill', grey).attr('fill-opacity', 0.3),
    });
  if (shown.interval)
    items.push({
      kind: 'interval',
      text: 'bar: 95% Wilson interval',
      mark: (g) => void g.append('line').attr('x1', 6).attr('x2', 6).attr('y1', -5).attr('y2', 5).attr('stroke', grey),
    });
  if (shown.spread)
    items.push({
      kind: 'spread',
      text: 'coincident points spread 5 px',
      mark: (g) => void g.append('circle').attr('cx', 6).attr('r', 5).attr('fill', 'none').attr('stroke', grey).attr('stroke-dasharray', '1 2'),
    });
  const legend = svg.append('g').attr('data-testid', 'frontier-legend');
  let lx = M.left;
  let row = 0;
  for (const item of items) {
    const width = 22 + item.text.length * 5.2; // 9 px sans: about 5 px a character
    if (lx + width > W - M.right && lx > M.left) {
      lx = M.left;
      row++;
    }
    const g = legend
      .append('g')
      .attr('transform', `translate(${lx},${H + 4 + row * LEGEND_ROW})`)
      .attr('data-testid', 'frontier-legend-item')
      .attr('data-kind', item.kind);
    item.mark(g);
    g.append('text').attr('x', 17).attr('y', 3).attr('font-size', 9).attr('fill', 'currentColor').text(item.text);
    lx += width + 8;
  }
  svg.attr('viewBox', `0 0 ${W} ${H + 6 + (row + 1) * LEGEND_ROW}`);
}

/** A method's marker on `c` (a circle): filled disc or ring, faded for older steps of a run. */
function marker<E extends SVGCircleElement>(c: Selection<E, unknown, null, undefined>, method: string, faded: boolean): Selection<E, unknown, null, undefined> {
  const m = markerOf(method);
  const colour = colourOf(method);
  const opacity = faded ? 0.35 : 0.95;
  return c
    .attr('r', m.r)
    .attr('fill', m.filled ? colour : 'none')
    .attr('fill-opacity', m.filled ? opacity : 0)
    .attr('stroke', colour)
    .attr('stroke-opacity', opacity)
    .attr('stroke-width', m.strokeWidth)
    .attr('stroke-dasharray', m.dash);
}

function draw(svgEl: SVGSVGElement, points: readonly FrontierPoint[], cost: CostAxis, onHover: (p: FrontierPoint | null, ev: MouseEvent | null) => void): void {
  const svg = select(svgEl)
    .attr('viewBox', `0 0 ${W} ${H + LEGEND_ROW}`)
    .attr('data-points', points.length)
    .attr('data-cost', cost);
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
  const x = scaleLog()
    .domain([lo, hi])
    .range([M.left, W - M.right]);
  const y = scaleLinear()
    .domain([0, 1])
    .range([H - M.bottom, M.top]);
  const axisStyle = (g: Selection<SVGGElement, unknown, null, undefined>) => {
    g.attr('font-size', 9).attr('color', 'currentColor').attr('opacity', 0.75);
  };
  svg
    .append('g')
    .attr('transform', `translate(0,${H - M.bottom})`)
    .call(axisBottom(x).ticks(6, '~s'))
    .call(axisStyle);
  svg
    .append('g')
    .attr('transform', `translate(${M.left},0)`)
    .call(axisLeft(y).ticks(5).tickFormat(format('.0%')))
    .call(axisStyle);
  svg
    .append('text')
    .attr('x', (M.left + W - M.right) / 2)
    .attr('y', H - 6)
    .attr('text-anchor', 'middle')
    .attr('font-size', 10)
    .attr('fill', 'currentColor')
    .attr('data-testid', 'frontier-x-label')
    .text(
      `${cost === 'total' ? 'generated tokens per problem (root + clones)' : 'critical-path tokens per problem (root + longest clone per round)'}, log scale`,
    );

  // Where each point is drawn: its place, or spread around it when others share it.
  const placed = placePoints(
    points,
    points.map((p) => ({ x: x(costOf(p, cost)), y: y(p.accuracy) })),
  );
  const at = new Map(points.map((p, i) => [p, placed[i]]));

  // The training run's trajectory per method (points that carry a step).
  // A mix's run evaluates each task: one trajectory per method and task.
  const lines = [...new Map(points.filter((p) => p.step !== undefined).map((p) => [`${p.method} ${p.task ?? ''}`, p] as const)).values()];
  let trajectories = 0;
  for (const { method: m, task } of lines) {
    const run = points.filter((p) => p.method === m && p.task === task && p.step !== undefined).sort((a, b) => (a.step ?? 0) - (b.step ?? 0));
    if (run.length < 2) continue;
    trajectories++;
    const d = run.map((p, i) => `${i ? 'L' : 'M'}${(at.get(p) as Placed).x.toFixed(1)},${(at.get(p) as Placed).y.toFixed(1)}`).join('');
    svg
      .append('path')
      .attr('d', d)
      .attr('fill', 'none')
      .attr('stroke', colourOf(m))
      .attr('stroke-width', 1)
      .attr('opacity', 0.45)
      .attr('data-testid', 'frontier-trajectory')
      .attr('data-method', m);
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
    svg
      .append('path')
      .attr('d', d)
      .attr('fill', 'none')
      .attr('stroke', '#888')
      .attr('stroke-dasharray', '4 3')
      .attr('data-testid', 'frontier-pareto')
      .attr('data-size', front.length);
  }

  const latestStep = Math.max(-1, ...points.map((p) => p.step ?? -1));
  let faded = 0;
  const g = svg.append('g');
  // Rings (mono, self-consistency) first, discs on top, so a disc inside a ring stays clickable.
  const drawOrder = [...points].sort((a, b) => Number(markerOf(a.method).filled) - Number(markerOf(b.method).filled));
  for (const p of drawOrder) {
    const { x: px, y: py, spread } = at.get(p) as Placed;
    const colour = colourOf(p.method);
    // Older points of the training run fade; the newest and every non-run point are solid.
    const old = p.step !== undefined && p.step < latestStep;
    if (old) faded++;
    g.append('line')
      .attr('x1', px)
      .attr('x2', px)
      .attr('y1', y(p.interval[0]))
      .attr('y2', y(p.interval[1]))
      .attr('stroke', colour)
      .attr('opacity', 0.4)
      .attr('data-testid', 'frontier-interval');
    marker(g.append('circle').attr('cx', px).attr('cy', py), p.method, old)
      .attr('data-testid', 'frontier-point')
      .attr('data-method', p.method)
      .attr('data-limit', p.limit)
      .attr('data-n', p.n)
      .attr('data-label', p.checkpoint ?? '')
      .attr('data-spread', spread ? 'true' : null)
      .style('cursor', 'default')
      .on('mouseenter', (ev: MouseEvent) => onHover(p, ev))
      .on('mouseleave', () => onHover(null, null))
      .append('title')
      .text(describePoint(p));
  }

  drawLegend(svg, [...new Set(points.map((p) => p.method))], {
    pareto: front.length > 0,
    trajectory: trajectories > 0,
    faded: faded > 0,
    interval: points.length > 0,
    spread: placed.some((q) => q.spread),
  });
  if (points.length === 0) {
    svg
      .append('text')
      .attr('x', M.left + 8)
      .attr('y', M.top + 16)
      .attr('font-size', 10)
      .attr('fill', 'currentColor')
      .text('no points yet: evaluate, or train with "held-out eval every" > 0');
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
