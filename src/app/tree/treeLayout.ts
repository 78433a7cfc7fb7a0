/**
 * An episode as a delegation tree: the root, and one child per clone (ordered by spawn round),
 * laid out left to right with d3's tree layout. Pure; DelegationTree.tsx draws it.
 */
import { hierarchy, tree } from 'd3';
import type { ContextTrace, EpisodeTrace } from '../../core/rollout/trace';

export type Outcome = 'correct' | 'wrong' | 'violation' | 'gated' | 'answered' | 'running';

export interface TreeNode {
  ctx: ContextTrace;
  outcome: Outcome;
  /** Top-left corner of the node's box. */
  x: number;
  y: number;
}

export interface TreeLayout {
  nodes: TreeNode[];
  links: { from: TreeNode; to: TreeNode }[];
  width: number;
  height: number;
}

export const NODE_W = 200;
export const NODE_H = 62;
const GAP_Y = 10;
const GAP_X = 44;

export function outcomeOf(trace: EpisodeTrace, ctx: ContextTrace, live: ReadonlySet<number>): Outcome {
  if (live.has(ctx.id)) return 'running';
  if (ctx.violation) return 'violation';
  if (ctx.role === 'root') return trace.correct ? 'correct' : 'wrong';
  return ctx.credit?.gated ? 'gated' : 'answered';
}

interface Datum {
  ctx: ContextTrace;
  children?: Datum[];
}

/** `live`: contexts still generating (stepper), drawn as running. */
export function layoutTree(trace: EpisodeTrace, live: ReadonlySet<number> = new Set()): TreeLayout {
  const root = trace.contexts.find((c) => c.role === 'root');
  if (!root) return { nodes: [], links: [], width: 0, height: 0 };
  const clones = trace.contexts.filter((c) => c.role === 'clone').sort((a, b) => (a.round ?? 0) - (b.round ?? 0) || a.id - b.id);
  const data: Datum = { ctx: root, children: clones.map((ctx) => ({ ctx })) };
  const h = tree<Datum>().nodeSize([NODE_H + GAP_Y, NODE_W + GAP_X])(hierarchy(data));
  const minX = Math.min(...h.descendants().map((d) => d.x));
  const byId = new Map<number, TreeNode>();
  for (const d of h.descendants()) {
    // d3 lays trees out top-down; x is the breadth axis, drawn here as the vertical one.
    byId.set(d.data.ctx.id, { ctx: d.data.ctx, outcome: outcomeOf(trace, d.data.ctx, live), x: d.y, y: d.x - minX });
  }
  const nodes = [...byId.values()];
  const rootNode = byId.get(root.id)!;
  const links = nodes.filter((n) => n !== rootNode).map((to) => ({ from: rootNode, to }));
  return {
    nodes,
    links,
    width: Math.max(...nodes.map((n) => n.x)) + NODE_W,
    height: Math.max(...nodes.map((n) => n.y)) + NODE_H,
  };
}
