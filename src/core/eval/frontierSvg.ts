/**
 * A static SVG of accuracy–cost panels (log cost axis, interval bars, Pareto front), written
 * without a DOM so the CLI's report can draw it; the page draws its live chart with d3.
 */
import { type FrontierPoint, paretoOf } from './frontier';

export interface FrontierPanel {
  title: string;
  points: FrontierPoint[];
}

const W = 360;
const H = 260;
const M = { left: 44, right: 12, top: 26, bottom: 36 };
const COLOURS: Record<string, string> = { delegate: '#1f77b4', mono: '#d62728' };
export const colourOf = (method: string): string => COLOURS[method] ?? `hsl(${30 + 25 * Number(method.slice(2))}, 70%, 42%)`;
const esc = (s: string) => s.replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c] as string);

function panel(p: FrontierPanel, x0: number, cost: 'total' | 'critical'): string {
  const costOf = (q: FrontierPoint) => Math.max(1, cost === 'total' ? q.meanTokens : q.meanCriticalPathTokens);
  const costs = p.points.map(costOf);
  const lo = Math.log10(Math.min(...costs, 10) / 1.5);
  const hi = Math.log10(Math.max(...costs, 100) * 1.5);
  const sx = (c: number) => x0 + M.left + ((Math.log10(c) - lo) / (hi - lo)) * (W - M.left - M.right);
  const sy = (a: number) => M.top + (1 - a) * (H - M.top - M.bottom);
  const parts: string[] = [`<text x="${x0 + W / 2}" y="16" text-anchor="middle" font-weight="bold">${esc(p.title)}</text>`];
  parts.push(`<line x1="${x0 + M.left}" y1="${sy(0)}" x2="${x0 + W - M.right}" y2="${sy(0)}" stroke="#444"/>`);
  parts.push(`<line x1="${x0 + M.left}" y1="${sy(0)}" x2="${x0 + M.left}" y2="${sy(1)}" stroke="#444"/>`);
  for (const a of [0, 0.25, 0.5, 0.75, 1]) parts.push(`<text x="${x0 + M.left - 4}" y="${sy(a) + 3}" text-anchor="end">${a}</text>`);
  for (let e = Math.ceil(lo); e <= Math.floor(hi); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (Math.log10(v) < lo || Math.log10(v) > hi) continue;
      parts.push(`<text x="${sx(v)}" y="${sy(0) + 14}" text-anchor="middle">${v}</text>`);
    }
  }
  parts.push(
    `<text x="${x0 + W / 2}" y="${H - 4}" text-anchor="middle">${cost === 'total' ? 'generated tokens / problem' : 'critical-path tokens / problem'} (log)</text>`,
  );
  const front = paretoOf(p.points, cost).map((i) => p.points[i]);
  if (front.length > 1) {
    const path = front.map((q, i) => `${i === 0 ? 'M' : 'L'}${sx(costOf(q)).toFixed(1)},${sy(q.accuracy).toFixed(1)}`).join('');
    parts.push(`<path d="${path}" fill="none" stroke="#999" stroke-dasharray="4 3"/>`);
  }
  for (const q of p.points) {
    const x = sx(costOf(q)).toFixed(1);
    parts.push(
      `<line x1="${x}" x2="${x}" y1="${sy(q.interval[0]).toFixed(1)}" y2="${sy(q.interval[1]).toFixed(1)}" stroke="${colourOf(q.method)}" opacity="0.5"/>`,
    );
    parts.push(
      `<circle class="point" cx="${x}" cy="${sy(q.accuracy).toFixed(1)}" r="3.5" fill="${colourOf(q.method)}"><title>${esc(`${q.checkpoint ?? ''} ${q.method} limit ${q.limit}: ${(q.accuracy * 100).toFixed(1)}% (n ${q.n}), ${q.meanTokens.toFixed(0)} tokens`)}</title></circle>`,
    );
  }
  return parts.join('\n');
}

export function frontierSvg(panels: readonly FrontierPanel[], cost: 'total' | 'critical' = 'total'): string {
  const methods = [...new Set(panels.flatMap((p) => p.points.map((q) => q.method)))];
  const width = W * Math.max(1, panels.length);
  const legend = methods
    .map((m, i) => `<circle cx="${10 + i * 80}" cy="${H + 12}" r="4" fill="${colourOf(m)}"/><text x="${18 + i * 80}" y="${H + 16}">${esc(m)}</text>`)
    .join('');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${H + 26}" font-family="sans-serif" font-size="10">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    ...panels.map((p, i) => panel(p, i * W, cost)),
    legend,
    '</svg>',
  ].join('\n');
}
