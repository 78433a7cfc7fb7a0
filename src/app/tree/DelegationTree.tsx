/** The delegation tree of one episode (sparse marks: SVG). Click a node to read its context. */
import type { EpisodeTrace } from '../../core/rollout/trace';
import { NODE_H, NODE_W, layoutTree, type Outcome, type TreeNode } from './treeLayout';

export const OUTCOME_COLOURS: Record<Outcome, string> = {
  correct: '#2e7d32',
  wrong: '#c62828',
  violation: '#e65100',
  gated: '#757575',
  answered: '#1565c0',
  running: '#6a1b9a',
};

function clip(text: string, n: number): string {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

function signed(v: number): string {
  return `${v >= 0 ? '+' : ''}${v.toFixed(3)}`;
}

function NodeBox({ node, trace, selected, onSelect }: { node: TreeNode; trace: EpisodeTrace; selected: boolean; onSelect: (id: number) => void }) {
  const { ctx, outcome } = node;
  const colour = OUTCOME_COLOURS[outcome];
  const head = ctx.role === 'root' ? `root #${ctx.id}` : `clone #${ctx.id} · r${ctx.round ?? '?'} · b${ctx.budget ?? '?'}`;
  const task = ctx.role === 'root' ? trace.prompt : (ctx.subtask ?? '');
  const used = ctx.role === 'clone' && ctx.budget ? `${ctx.generatedTokens}/${ctx.budget}` : String(ctx.generatedTokens);
  const facts = [`tok ${used}`, `ans ${ctx.answer ?? '∅'}`];
  if (ctx.credit) facts.push(`A ${signed(ctx.credit.advantage)}`);
  if (ctx.credit?.gated) facts.push('gated');
  const verdict = ctx.violation ?? outcome;
  return (
    <g
      transform={`translate(${node.x},${node.y})`}
      data-testid="tree-node"
      data-role={ctx.role}
      data-context={ctx.id}
      data-outcome={outcome}
      className="tree-node"
      onClick={() => onSelect(ctx.id)}
      role="button"
      aria-label={`${head}: ${verdict}`}
      tabIndex={0}
      onKeyDown={(e) => (e.key === 'Enter' || e.key === ' ') && onSelect(ctx.id)}
    >
      <title>{`${head}\n${task}\n${facts.join(' · ')}\n${ctx.violationDetail ?? verdict}`}</title>
      <rect width={NODE_W} height={NODE_H} rx={3} fill={colour} fillOpacity={selected ? 0.18 : 0.07} stroke={colour} strokeWidth={selected ? 2.2 : 1} />
      <rect width={4} height={NODE_H} fill={colour} />
      <text x={10} y={14} fontSize={11} fontWeight={600} fill="currentColor">
        {head}
      </text>
      <text x={NODE_W - 6} y={14} fontSize={10} textAnchor="end" fill={colour} fontWeight={600}>
        {clip(verdict, 17)}
      </text>
      <text x={10} y={30} fontSize={11} fontFamily="ui-monospace, monospace" fill="currentColor">
        {clip(task, 29)}
      </text>
      <text x={10} y={47} fontSize={10} fill="currentColor" opacity={0.85}>
        {clip(facts.join(' · '), 38)}
      </text>
    </g>
  );
}

export function DelegationTree({ trace, live, selected, onSelect }: { trace: EpisodeTrace; live?: ReadonlySet<number>; selected: number | null; onSelect: (id: number) => void }) {
  const layout = layoutTree(trace, live);
  const pad = 4;
  return (
    <svg
      xmlns="http://www.w3.org/2000/svg"
      className="tree"
      data-testid="tree-svg"
      viewBox={`${-pad} ${-pad} ${layout.width + 2 * pad} ${layout.height + 2 * pad}`}
      width={layout.width + 2 * pad}
      height={layout.height + 2 * pad}
    >
      {layout.links.map(({ from, to }) => {
        const x0 = from.x + NODE_W;
        const y0 = from.y + NODE_H / 2;
        const x1 = to.x;
        const y1 = to.y + NODE_H / 2;
        const mx = (x0 + x1) / 2;
        return <path key={to.ctx.id} d={`M${x0},${y0} C${mx},${y0} ${mx},${y1} ${x1},${y1}`} fill="none" stroke="currentColor" strokeOpacity={0.35} />;
      })}
      {layout.nodes.map((n) => (
        <NodeBox key={n.ctx.id} node={n} trace={trace} selected={n.ctx.id === selected} onSelect={onSelect} />
      ))}
    </svg>
  );
}
