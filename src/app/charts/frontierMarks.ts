/**
 * How the frontier chart marks its points so that none hides another. Pure; FrontierChart draws.
 *
 * - Each method has its own marker: delegate a filled disc, mono a ring around it, self-consistency
 *   a dashed ring, so a delegate point on top of a mono point still shows as a dot in a ring.
 * - Points that land within a few pixels of each other (after 10 steps delegate can equal mono
 *   exactly) are spread on a small circle around their common place, in a fixed order
 *   (method, limit, step, input order), so the picture is the same on every redraw. The hover
 *   text keeps the exact values.
 */
import type { FrontierPoint } from '../../core/eval/frontier';

export interface Marker {
  r: number;
  /** Filled disc, else a ring (stroke only) of the method's colour. */
  filled: boolean;
  strokeWidth: number;
  /** SVG dash pattern of the ring, or null for a solid one. */
  dash: string | null;
}

export function markerOf(method: string): Marker {
  if (method === 'delegate') return { r: 4, filled: true, strokeWidth: 0.8, dash: null };
  if (method === 'mono') return { r: 6.5, filled: false, strokeWidth: 2, dash: null };
  return { r: 5.5, filled: false, strokeWidth: 1.6, dash: '2.5 1.5' };
}

const METHOD_ORDER = (m: string): number => (m === 'delegate' ? 0 : m === 'mono' ? 1 : 2 + Number(m.slice(2)));

export interface Placed {
  x: number;
  y: number;
  /** Moved off its true place to stay visible (a member of a coincident group). */
  spread: boolean;
}

/**
 * Screen positions of the points: each its own (x, y), except groups whose places lie within
 * `tolerance` px (Chebyshev) of the group's first point: those go on a circle of `radius` px
 * around the group's mean place, evenly, starting at the top.
 */
export function placePoints(points: readonly FrontierPoint[], xy: readonly { x: number; y: number }[], tolerance = 3, radius = 5): Placed[] {
  const groups: number[][] = [];
  for (let i = 0; i < points.length; i++) {
    const g = groups.find((members) => Math.max(Math.abs(xy[members[0]].x - xy[i].x), Math.abs(xy[members[0]].y - xy[i].y)) <= tolerance);
    if (g) g.push(i);
    else groups.push([i]);
  }
  const out: Placed[] = xy.map((p) => ({ x: p.x, y: p.y, spread: false }));
  for (const g of groups) {
    if (g.length < 2) continue;
    const cx = g.reduce((s, i) => s + xy[i].x, 0) / g.length;
    const cy = g.reduce((s, i) => s + xy[i].y, 0) / g.length;
    const order = [...g].sort((a, b) => {
      const [p, q] = [points[a], points[b]];
      return METHOD_ORDER(p.method) - METHOD_ORDER(q.method) || p.limit - q.limit || (p.step ?? -1) - (q.step ?? -1) || a - b;
    });
    order.forEach((i, j) => {
      const angle = -Math.PI / 2 + (2 * Math.PI * j) / order.length;
      out[i] = { x: cx + radius * Math.cos(angle), y: cy + radius * Math.sin(angle), spread: true };
    });
  }
  return out;
}

/** The problem counts of the points: "n = 200", or for a mix "n = 2 (6 points), 200 (4 points)". */
export function nSummary(points: readonly Pick<FrontierPoint, 'n'>[]): string {
  const counts = new Map<number, number>();
  for (const p of points) counts.set(p.n, (counts.get(p.n) ?? 0) + 1);
  const ns = [...counts.keys()].sort((a, b) => a - b);
  if (ns.length === 0) return 'no points';
  if (ns.length === 1) return `n = ${ns[0]}`;
  return `n = ${ns.map((n) => `${n} (${counts.get(n)} point${counts.get(n) === 1 ? '' : 's'})`).join(', ')}`;
}
