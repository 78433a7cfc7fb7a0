/** Recent training episodes, newest first; a row opens its delegation tree. */
import { openTree } from '../state/actions';
import { usePlayground } from '../state/store';

const SHOWN = 60;

export function RolloutTable() {
  const episodes = usePlayground((s) => s.episodes);
  const tree = usePlayground((s) => s.tree);
  const selected = tree?.kind === 'episode' ? tree.key : null;
  return (
    <section className="panel rollouts" aria-label="Recent rollouts">
      <h2>
        Rollouts <span className="muted">{episodes.length ? `${episodes.length} kept, newest first` : 'none yet: train or step'}</span>
      </h2>
      <div className="scroll">
        <table className="dense" data-testid="rollout-table">
          <thead>
            <tr>
              <th>step</th>
              <th>problem</th>
              <th>truth</th>
              <th>answer</th>
              <th>reward</th>
              <th title="generated tokens: total / critical path">tokens</th>
              <th>clones</th>
              <th>violations</th>
            </tr>
          </thead>
          <tbody>
            {episodes.slice(0, SHOWN).map(({ key, step, trace }) => (
              <tr key={key} data-testid="rollout-row" data-clones={trace.contexts.length - 1} className={key === selected ? 'selected' : ''} onClick={() => openTree({ kind: 'episode', key })}>
                <td className="num">{step}</td>
                <td className="mono">{trace.prompt}</td>
                <td className="mono num">{trace.truth}</td>
                <td className={`mono num ${trace.correct ? 'ok' : 'bad'}`}>{trace.answer ?? '∅'}</td>
                <td className="num">{trace.reward ? trace.reward.reward.toFixed(3) : '—'}</td>
                <td className="num">
                  {trace.tokens.total} / {trace.tokens.criticalPath}
                </td>
                <td className="num">{trace.contexts.length - 1}</td>
                <td className="small">{trace.violations.map((v) => v.violation).join(', ')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
