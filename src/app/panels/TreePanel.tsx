/** The delegation tree of the chosen rollout (a table row or the stepper's), and one context. */
import { useEffect, useMemo, useRef } from 'react';
import type { EpisodeTrace } from '../../core/rollout/trace';
import { DelegationTree, TreeLegend } from '../tree/DelegationTree';
import { followNewest, openContext } from '../state/actions';
import { newestRollout } from '../state/newestRollout';
import { usePlayground } from '../state/store';
import { ContextView } from './ContextView';

function useTreeTrace(): { trace: EpisodeTrace | null; live: ReadonlySet<number>; label: string; following: boolean } {
  const tree = usePlayground((s) => s.tree);
  const episodes = usePlayground((s) => s.episodes);
  const stepper = usePlayground((s) => s.stepper);
  const keptRuns = usePlayground((s) => s.keptRuns);
  return useMemo(() => {
    if (tree?.kind === 'kept') {
      const run = keptRuns.find((r) => r.id === tree.run);
      const trace = run?.rollouts?.[tree.index];
      if (run && trace)
        return { trace, live: new Set<number>(), label: `kept run "${run.name}"${trace.step !== undefined ? `, step ${trace.step}` : ''}`, following: false };
    }
    if (tree?.kind === 'stepper' && stepper) {
      return { trace: stepper.trace, live: new Set(stepper.live.map((l) => l.context)), label: 'stepper rollout', following: false };
    }
    if (tree?.kind === 'episode') {
      const row = episodes.find((e) => e.key === tree.key);
      if (row) return { trace: row.trace, live: new Set<number>(), label: `GRPO step ${row.step}`, following: false };
    }
    // Nothing picked: the newest rollout, redrawn as steps arrive.
    const newest = tree === null ? newestRollout(episodes) : null;
    if (newest)
      return {
        trace: newest.trace,
        live: new Set<number>(),
        label: `newest rollout (GRPO step ${newest.step}${newest.trace.contexts.length > 1 ? ', its last that delegated' : ''})`,
        following: true,
      };
    return { trace: null, live: new Set<number>(), label: '', following: false };
  }, [tree, episodes, stepper, keptRuns]);
}

function Summary({ trace, label }: { trace: EpisodeTrace; label: string }) {
  const r = trace.reward;
  return (
    <div className="small" data-testid="tree-summary">
      {label} · policy v{trace.policyVersion} · <span className="mono">{trace.prompt}</span> = <span className="mono">{trace.truth}</span> · answer{' '}
      <span className={`mono ${trace.correct ? 'ok' : 'bad'}`}>{trace.answer ?? '∅'}</span> · {trace.rounds} round(s) · tokens {trace.tokens.total} total,{' '}
      {trace.tokens.criticalPath} critical path
      {r &&
        ` · reward ${r.reward.toFixed(3)} = score ${r.score.toFixed(3)} − root ${r.rootPenalty.toFixed(3)} − clones ${r.clonePenalty.toFixed(3)} − calls ${r.callPenalty.toFixed(3)}${r.budgetPenalty ? ` − budget ${r.budgetPenalty.toFixed(3)}` : ''}${r.tokenPenalty ? ` − tokens ${r.tokenPenalty.toFixed(3)}` : ''}`}
      {!r &&
        trace.sourceReward &&
        ` · reward ${trace.sourceReward.reward.toFixed(3)}${trace.sourceReward.score !== null ? ` (score ${trace.sourceReward.score.toFixed(3)})` : ''}, as the source trainer gave it`}
      {!r && trace.sourceReward && <SourceParts parts={trace.sourceReward.parts} />}
    </div>
  );
}

/** The parts of the reward a converted run logged: those it logged, and the ones it did not, named as not logged (never shown as 0). */
const PART_LABELS = [
  ['score', 'score'],
  ['rootPenalty', 'root'],
  ['clonePenalty', 'clones'],
  ['callPenalty', 'calls'],
  ['budgetPenalty', 'budget'],
  ['tokenPenalty', 'tokens'],
] as const;

function SourceParts({ parts }: { parts: NonNullable<EpisodeTrace['sourceReward']>['parts'] }) {
  const logged = PART_LABELS.filter(([k]) => parts?.[k] !== undefined);
  const missing = PART_LABELS.filter(([k]) => parts?.[k] === undefined);
  return (
    <span data-testid="source-parts">
      {logged.length > 0 && ` · parts logged: ${logged.map(([k, label]) => `${label} ${parts![k]!.toFixed(3)}`).join(', ')}`}
      {` · not logged: ${missing.map(([, label]) => label).join(', ')}`}
    </span>
  );
}

/**
 * Opening a tree from elsewhere (the stepper's "Open tree", a row of a table scrolled away) brings
 * the panel into view; a panel already in view stays where it is.
 */
function useScrollIntoViewOnOpen(ref: React.RefObject<HTMLElement | null>): void {
  const tree = usePlayground((s) => s.tree);
  useEffect(() => {
    const el = ref.current;
    if (!tree || !el) return;
    const { top } = el.getBoundingClientRect();
    // The sticky status bar covers the top: .tree-panel has a scroll-margin-top for it.
    if (top < 40 || top > window.innerHeight - 80) el.scrollIntoView({ block: 'start', behavior: 'smooth' });
  }, [tree, ref]);
}

export function TreePanel() {
  const { trace, live, label, following } = useTreeTrace();
  const selected = usePlayground((s) => s.context);
  const tree = usePlayground((s) => s.tree);
  const ctx = trace?.contexts.find((c) => c.id === selected) ?? null;
  const panel = useRef<HTMLElement>(null);
  useScrollIntoViewOnOpen(panel);
  return (
    <section className="panel tree-panel" aria-label="Delegation tree" data-testid="tree-panel" ref={panel}>
      <h2>
        Delegation tree{' '}
        <span className="muted" data-testid="tree-following" data-following={following}>
          {following ? '· live: follows the newest rollout (pick a row of the rollout table to hold one)' : ''}
        </span>
        {!following && tree !== null && (
          <button
            type="button"
            className="small"
            data-testid="tree-follow"
            onClick={followNewest}
            title="Show the newest rollout again, redrawn as training goes on"
          >
            Follow newest
          </button>
        )}
      </h2>
      {trace ? (
        <>
          <Summary trace={trace} label={label} />
          <TreeLegend />
          <div className="scroll-x">
            <DelegationTree trace={trace} live={live} selected={selected} onSelect={openContext} />
          </div>
          {ctx && <ContextView ctx={ctx} />}
        </>
      ) : (
        <p className="muted">
          Press Train: the newest rollout's tree is drawn here (root, clones with their budgets, answers and gates). Or pick a rollout in the table, or open the
          stepper's rollout.
        </p>
      )}
    </section>
  );
}
