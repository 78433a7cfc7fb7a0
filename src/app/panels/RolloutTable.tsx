/** Kept training episodes, newest first, filtered (rolloutFilter.ts); a row opens its delegation tree. Below: the kept episodes by problem size. */
import { useState } from 'react';
import { openTree } from '../state/actions';
import {
  BASIC_FILTERS,
  FILTER_HELP,
  type RolloutFilter,
  countLine,
  filterRollouts,
  isRolloutFilter,
  markBadges,
  violationClassesOf,
} from '../state/rolloutFilter';
import { usePlayground } from '../state/store';
import { SizeStrategy } from './SizeStrategy';
import { type EpisodeTrace, recordedReward } from '../../core/rollout/trace';

/** Rows drawn at first; "show all" draws every match (at most the kept 200). */
const FIRST = 60;

/** Ungated violations (red outline, the class) apart from gated contexts (grey, hatched, "gated"). */
export function Marks({ trace }: { trace: EpisodeTrace }) {
  return (
    <>
      {markBadges(trace).map((b) => (
        <span
          key={`${b.kind}-${b.text}`}
          className={`badge ${b.kind}`}
          data-testid="rollout-mark"
          data-kind={b.kind}
          data-count={b.count}
          title={`${b.kind === 'gated' ? 'gated (no policy-gradient term, r_clone = 0)' : 'violation, not gated (still trained on)'}\n${b.details.join('\n')}`}
        >
          {b.text}
          {b.count > 1 ? ` ×${b.count}` : ''}
        </span>
      ))}
    </>
  );
}

/** A rollout table's header: `first` (the step, or an episode's label), then the columns RolloutCells fills. */
export function RolloutHead({ first }: { first: React.ReactNode }) {
  return (
    <thead>
      <tr>
        {first}
        <th>problem</th>
        <th className="num" title="answer / truth">
          ans / truth
        </th>
        <th className="num">reward</th>
        <th className="num" title="generated tokens: total / critical path">
          tokens
        </th>
        <th className="num" title="clones">
          cl.
        </th>
        <th>violations, gates</th>
      </tr>
    </thead>
  );
}

/** One episode's cells in a rollout table (after its first cell): problem, answer, reward, tokens, clones, marks. */
export function RolloutCells({ trace }: { trace: EpisodeTrace }) {
  return (
    <>
      <td className="mono wrap" title={trace.prompt}>
        {trace.prompt}
      </td>
      <td className="mono num wrap">
        <span className={trace.correct ? 'ok' : 'bad'}>{trace.answer ?? '∅'}</span>
        {trace.correct ? '' : <span className="muted"> / {trace.truth}</span>}
      </td>
      <td className="num">{recordedReward(trace)?.toFixed(3) ?? '—'}</td>
      <td className="num">
        {trace.tokens.total}/{trace.tokens.criticalPath}
      </td>
      <td className="num">{trace.contexts.length - 1}</td>
      <td className="marks">
        <Marks trace={trace} />
      </td>
    </>
  );
}

export function RolloutTable() {
  const episodes = usePlayground((s) => s.episodes);
  const tree = usePlayground((s) => s.tree);
  const [filter, setFilter] = useState<RolloutFilter>('all');
  const [showAll, setShowAll] = useState(false);
  const selected = tree?.kind === 'episode' ? tree.key : null;
  const { matching, shown } = filterRollouts(episodes, filter, showAll ? Infinity : FIRST);
  const classes = violationClassesOf(episodes);
  return (
    <section className="panel rollouts" aria-label="Recent rollouts">
      <h2>
        Rollouts{' '}
        <span className="muted" data-testid="rollout-count" data-shown={shown.length} data-matching={matching} data-kept={episodes.length}>
          {countLine(shown.length, matching, episodes.length, filter)}
        </span>
      </h2>
      <div className="row small">
        <label>
          show{' '}
          <select data-testid="rollout-filter" value={filter} onChange={(e) => isRolloutFilter(e.target.value) && setFilter(e.target.value)}>
            {BASIC_FILTERS.map((f) => (
              <option key={f} value={f} title={FILTER_HELP[f]}>
                {f}
              </option>
            ))}
            {classes.map((v) => (
              <option key={v} value={`violation:${v}`}>
                violation: {v}
              </option>
            ))}
          </select>
        </label>
        {matching > shown.length && (
          <button type="button" data-testid="rollout-show-all" onClick={() => setShowAll(true)}>
            show all {matching}
          </button>
        )}
        {showAll && matching > FIRST && (
          <button type="button" data-testid="rollout-show-first" onClick={() => setShowAll(false)}>
            first {FIRST}
          </button>
        )}
        <span className="legend">
          <span className="badge violation">violation</span> <span className="badge gated">gated</span>
        </span>
      </div>
      <div className="scroll">
        <table className="dense rollout-table" data-testid="rollout-table">
          <RolloutHead first={<th className="num">step</th>} />
          <tbody>
            {shown.map(({ key, step, trace }) => (
              <tr
                key={key}
                data-testid="rollout-row"
                data-clones={trace.contexts.length - 1}
                data-correct={trace.correct}
                data-violations={trace.violations.length}
                data-gated={trace.contexts.some((c) => c.credit?.gated === true)}
                className={key === selected ? 'selected' : ''}
                onClick={() => openTree({ kind: 'episode', key })}
              >
                <td className="num">{step}</td>
                <RolloutCells trace={trace} />
              </tr>
            ))}
          </tbody>
        </table>
        {shown.length === 0 && episodes.length > 0 && <p className="muted small">no kept rollout matches this filter</p>}
      </div>
      <SizeStrategy episodes={episodes} />
    </section>
  );
}
