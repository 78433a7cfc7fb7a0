/**
 * An episode as a delegation tree: the root, and one child per clone (ordered by spawn round),
 * laid out left to right with d3's tree layout. Pure; DelegationTree.tsx draws it.
 *
 * Node labels do not overlap: the box is as wide as its widest head line plus its badge needs
 * (estimated from character widths, within [NODE_W, MAX_NODE_W]); what still does not fit is cut
 * with "…" and the full text is in the node's title.
 */
import { hierarchy, tree } from 'd3';
import type { ContextTrace, EpisodeTrace } from '../../core/rollout/trace';

export type Outcome = 'correct' | 'wrong' | 'violation' | 'gated' | 'answered' | 'running';

/**
 * Each outcome's colour. Badges are white text on it, so each has at least 4.5:1 contrast with
 * white (src/app/contrast.test.ts checks): correct 5.1, wrong 5.6, violation 6.6, gated 6.2,
 * answered 5.8, running 9.4.
 */
export const OUTCOME_COLOURS: Record<Outcome, string> = {
  correct: '#2e7d32',
  wrong: '#c62828',
  violation: '#b71c1c',
  gated: '#616161',
  answered: '#1565c0',
  running: '#6a1b9a',
};

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
  /** The width of every node box (from its labels). */
  nodeW: number;
}

/** The narrowest and widest node box. */
export const NODE_W = 200;
export const MAX_NODE_W = 260;
export const NODE_H = 62;
const GAP_Y = 10;
const GAP_X = 44;

/**
 * A gated clone is 'gated' even when it also broke the protocol (it usually did: no answer and
 * long): it carries no policy-gradient term, unlike an ungated violating clone, which does.
 */
export function outcomeOf(trace: EpisodeTrace, ctx: ContextTrace, live: ReadonlySet<number>): Outcome {
  if (live.has(ctx.id)) return 'running';
  if (ctx.role === 'clone' && ctx.credit?.gated) return 'gated';
  if (ctx.violation) return 'violation';
  if (ctx.role === 'root') return trace.correct ? 'correct' : 'wrong';
  return 'answered';
}

// Label geometry (px), shared with DelegationTree.tsx.
export const PAD_L = 10;
export const PAD_R = 6;
export const BADGE_PAD = 4;
export const HEAD_FONT = 11;
export const BADGE_FONT = 9.5;
export const TASK_FONT = 11;
export const FACTS_FONT = 10;

/**
 * Estimated width of `text` in px: per-character widths of a system sans-serif (bold: a little
 * wider), or 0.6 em per character for monospace. Generous, so a label estimated to fit does.
 */
export function textWidth(text: string, fontSize: number, font: 'sans' | 'sans-bold' | 'mono' = 'sans'): number {
  if (font === 'mono') return text.length * 0.6 * fontSize;
  let em = 0;
  for (const ch of text) em += /[il.,:;!|'·]/.test(ch) ? 0.3 : /[mwMW@#_]/.test(ch) ? 0.9 : /[A-Z0-9]/.test(ch) ? 0.66 : ch === ' ' ? 0.3 : 0.56;
  return em * fontSize * (font === 'sans-bold' ? 1.07 : 1);
}

/** `text`, cut with "…" to fit `maxWidth` px. */
export function fitText(text: string, maxWidth: number, fontSize: number, font: 'sans' | 'sans-bold' | 'mono' = 'sans'): string {
  if (textWidth(text, fontSize, font) <= maxWidth) return text;
  let n = text.length;
  while (n > 0 && textWidth(`${text.slice(0, n)}…`, fontSize, font) > maxWidth) n--;
  return `${text.slice(0, n)}…`;
}

/** The node's head line ("root #0", "clone #3 · r1 · b32") and its badge (gated, the violation, or the outcome). */
export function nodeLabels(ctx: ContextTrace, outcome: Outcome): { head: string; badge: string } {
  const head = ctx.role === 'root' ? `root #${ctx.id}` : `clone #${ctx.id} · r${ctx.round ?? '?'} · b${ctx.budget ?? '?'}`;
  const badge = outcome === 'gated' ? 'gated' : outcome === 'violation' ? (ctx.violation ?? 'violation') : outcome;
  return { head, badge };
}

/**
 * The task line of a node. A clone whose subtask names a context chunk (`<ctx>k3 ab?`, the
 * multihop task) reads "k3 ▸ ab?": which chunk it read, then what it was asked; its answer (what
 * it found) is in the facts line. Other subtasks are shown as written.
 */
export function taskLine(ctx: Pick<ContextTrace, 'role' | 'subtask'>, prompt: string): string {
  if (ctx.role === 'root') return prompt;
  const subtask = ctx.subtask ?? '';
  const keys = [...subtask.matchAll(/<ctx>([a-z0-9_]+)/g)].map((m) => m[1]);
  if (keys.length === 0) return subtask;
  const rest = subtask.replace(/<ctx>[a-z0-9_]+/g, '').trim();
  return `${keys.join(' + ')} ▸ ${rest}`;
}

/**
 * The chunk text(s) a clone read, cut from its prompt: the prompt is `<clone>`, the subtask with
 * each `<ctx>key` expanded, `<sep>`; the subtask's own text around the keys is matched literally.
 * Null for a root, a clone without a key, or a prompt that does not match its subtask.
 */
export function chunkRead(ctx: Pick<ContextTrace, 'role' | 'subtask' | 'text'>): string | null {
  const subtask = ctx.subtask ?? '';
  if (ctx.role !== 'clone' || !subtask.includes('<ctx>')) return null;
  const literal = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const parts = subtask.split(/<ctx>[a-z0-9_]+/);
  const m = new RegExp(`^<clone>${parts.map(literal).join('([\\s\\S]*?)')}<sep>`).exec(ctx.text);
  return m ? m.slice(1).join(' | ') : null;
}

export const badgeWidth = (badge: string): number => textWidth(badge, BADGE_FONT, 'sans-bold') + 2 * BADGE_PAD;

/** The box width that fits the head line, a gap and the badge, within [NODE_W, MAX_NODE_W]. */
export function nodeWidthFor(labels: readonly { head: string; badge: string }[]): number {
  const need = Math.max(0, ...labels.map((l) => PAD_L + textWidth(l.head, HEAD_FONT, 'sans-bold') + 8 + badgeWidth(l.badge) + PAD_R));
  return Math.min(MAX_NODE_W, Math.max(NODE_W, Math.ceil(need)));
}

interface Datum {
  ctx: ContextTrace;
  children?: Datum[];
}

/** `live`: contexts still generating (stepper), drawn as running. */
export function layoutTree(trace: EpisodeTrace, live: ReadonlySet<number> = new Set()): TreeLayout {
  const root = trace.contexts.find((c) => c.role === 'root');
  if (!root) return { nodes: [], links: [], width: 0, height: 0, nodeW: NODE_W };
  const clones = trace.contexts.filter((c) => c.role === 'clone').sort((a, b) => (a.round ?? 0) - (b.round ?? 0) || a.id - b.id);
  const data: Datum = { ctx: root, children: clones.map((ctx) => ({ ctx })) };
  const nodeW = nodeWidthFor([root, ...clones].map((c) => nodeLabels(c, outcomeOf(trace, c, live))));
  const h = tree<Datum>().nodeSize([NODE_H + GAP_Y, nodeW + GAP_X])(hierarchy(data));
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
    width: Math.max(...nodes.map((n) => n.x)) + nodeW,
    height: Math.max(...nodes.map((n) => n.y)) + NODE_H,
    nodeW,
  };
}
