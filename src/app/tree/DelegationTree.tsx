/**
 * The delegation tree of one episode (sparse marks: SVG). Click a node to read its context.
 * A gated clone is greyed and hatched with a "gated" badge (no policy-gradient term); an ungated
 * violating context has a thick red outline and the violation's name: the two never look alike.
 */
import { useId } from 'react';
import type { EpisodeTrace } from '../../core/rollout/trace';
import {
  BADGE_FONT,
  BADGE_PAD,
  FACTS_FONT,
  HEAD_FONT,
  NODE_H,
  OUTCOME_COLOURS,
  PAD_L,
  PAD_R,
  TASK_FONT,
  badgeWidth,
  chunkRead,
  fitText,
  layoutTree,
  nodeLabels,
  type Outcome,
  taskLine,
  type TreeNode,
} from './treeLayout';

function signed(v: number): string {
  return `${v >= 0 ? '+' : ''}${v.toFixed(3)}`;
}

function NodeBox({
  node,
  trace,
  width,
  hatch,
  selected,
  onSelect,
}: {
  node: TreeNode;
  trace: EpisodeTrace;
  width: number;
  hatch: string;
  selected: boolean;
  onSelect: (id: number) => void;
}) {
  const { ctx, outcome } = node;
  const colour = OUTCOME_COLOURS[outcome];
  const { head, badge } = nodeLabels(ctx, outcome);
  const task = taskLine(ctx, trace.prompt);
  const chunk = chunkRead(ctx);
  const used = ctx.role === 'clone' && ctx.budget ? `${ctx.generatedTokens}/${ctx.budget}` : String(ctx.generatedTokens);
  const facts = [`tok ${used}`, `ans ${ctx.answer ?? '∅'}`];
  if (ctx.credit) facts.push(`A ${signed(ctx.credit.advantage)}`);
  // A gated clone's badge says "gated"; the violation that got it there is named in its facts.
  if (outcome === 'gated' && ctx.violation) facts.push(ctx.violation);
  const verdict = outcome === 'gated' ? `gated${ctx.violation ? ` (${ctx.violation})` : ''}` : (ctx.violation ?? outcome);
  const bw = badgeWidth(badge);
  const inner = width - PAD_L - PAD_R;
  const gated = outcome === 'gated';
  const violation = outcome === 'violation';
  return (
    <g
      transform={`translate(${node.x},${node.y})`}
      data-testid="tree-node"
      data-role={ctx.role}
      data-context={ctx.id}
      data-outcome={outcome}
      data-violation={ctx.violation ?? undefined}
      className="tree-node"
      onClick={() => onSelect(ctx.id)}
      role="button"
      aria-label={`${head}: ${verdict}`}
      tabIndex={0}
      onKeyDown={(e) => (e.key === 'Enter' || e.key === ' ') && onSelect(ctx.id)}
    >
      <title>{`${head}\n${task}${chunk !== null ? `\nread: ${chunk}` : ''}\n${facts.join(' · ')}\n${ctx.violationDetail ?? verdict}`}</title>
      <rect width={width} height={NODE_H} rx={3} fill={colour} fillOpacity={selected ? 0.18 : 0.07} />
      {gated && <rect width={width} height={NODE_H} rx={3} fill={`url(#${hatch})`} />}
      <rect
        width={width}
        height={NODE_H}
        rx={3}
        fill="none"
        stroke={colour}
        strokeWidth={violation ? 2.4 : selected ? 2.2 : 1}
        strokeDasharray={gated ? '4 2' : undefined}
      />
      <rect width={4} height={NODE_H} fill={colour} />
      <g opacity={gated ? 0.75 : 1}>
        <text x={PAD_L} y={14} fontSize={HEAD_FONT} fontWeight={600} fill="currentColor">
          {fitText(head, inner - bw - 8, HEAD_FONT, 'sans-bold')}
        </text>
        <text x={PAD_L} y={30} fontSize={TASK_FONT} fontFamily="ui-monospace, monospace" fill="currentColor">
          {fitText(task, inner, TASK_FONT, 'mono')}
        </text>
        <text x={PAD_L} y={47} fontSize={FACTS_FONT} fill="currentColor" opacity={0.85}>
          {fitText(facts.join(' · '), inner, FACTS_FONT)}
        </text>
      </g>
      <g transform={`translate(${width - PAD_R - bw},3)`} data-testid="tree-badge" data-kind={outcome}>
        <rect width={bw} height={14} rx={2} fill={colour} />
        <text x={BADGE_PAD} y={10.5} fontSize={BADGE_FONT} fontWeight={600} fill="#ffffff">
          {badge}
        </text>
      </g>
    </g>
  );
}

export function DelegationTree({
  trace,
  live,
  selected,
  onSelect,
}: {
  trace: EpisodeTrace;
  live?: ReadonlySet<number>;
  selected: number | null;
  onSelect: (id: number) => void;
}) {
  const layout = layoutTree(trace, live);
  const hatch = `hatch${useId().replace(/[^a-zA-Z0-9_-]/g, '')}`;
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
      <defs>
        <pattern id={hatch} patternUnits="userSpaceOnUse" width={6} height={6} patternTransform="rotate(45)">
          <line x1={0} y1={0} x2={0} y2={6} stroke={OUTCOME_COLOURS.gated} strokeWidth={2} strokeOpacity={0.3} />
        </pattern>
      </defs>
      {layout.links.map(({ from, to }) => {
        const x0 = from.x + layout.nodeW;
        const y0 = from.y + NODE_H / 2;
        const x1 = to.x;
        const y1 = to.y + NODE_H / 2;
        const mx = (x0 + x1) / 2;
        return (
          <path
            key={to.ctx.id}
            d={`M${x0},${y0} C${mx},${y0} ${mx},${y1} ${x1},${y1}`}
            fill="none"
            stroke="currentColor"
            strokeOpacity={0.35}
            strokeDasharray={to.outcome === 'gated' ? '3 3' : undefined}
          />
        );
      })}
      {layout.nodes.map((n) => (
        <NodeBox key={n.ctx.id} node={n} trace={trace} width={layout.nodeW} hatch={hatch} selected={n.ctx.id === selected} onSelect={onSelect} />
      ))}
    </svg>
  );
}

const LEGEND: { outcome: Outcome; text: string; title: string }[] = [
  { outcome: 'correct', text: 'correct', title: 'root answered exactly' },
  { outcome: 'wrong', text: 'wrong', title: 'root answered wrong' },
  { outcome: 'answered', text: 'clone answered', title: 'clone gave an answer block' },
  { outcome: 'violation', text: 'violation (not gated)', title: 'broke the protocol; still trained on (ungated)' },
  { outcome: 'gated', text: 'gated', title: 'no answer and over the gate length: r_clone = 0, no policy-gradient term' },
  { outcome: 'running', text: 'running', title: 'still generating (stepper)' },
];

/** What the node colours, outlines and hatching mean. */
export function TreeLegend() {
  return (
    <div className="tree-legend small" data-testid="tree-legend">
      {LEGEND.map((l) => (
        <span key={l.outcome} className={`tree-key ${l.outcome}`} title={l.title} style={{ ['--key' as string]: OUTCOME_COLOURS[l.outcome] }}>
          <i />
          {l.text}
        </span>
      ))}
    </div>
  );
}
