/**
 * The kept rollouts by problem size (arithmetic: operand count): how often the root delegated,
 * how often it was right, and what it spent. A policy that learns when delegation pays shows it
 * here first: delegation rising on the long problems and falling on the short ones.
 */
import { useMemo } from 'react';
import { arithmeticProbe, strategyOf } from '../../core/eval/strategy';
import type { EpisodeRow } from '../state/store';

const pct = (x: number) => `${Math.round(x * 100)}%`;

export function SizeStrategy({ episodes }: { episodes: readonly EpisodeRow[] }) {
  const rows = useMemo(
    () =>
      strategyOf(
        episodes.filter((e) => e.trace.task === 'arithmetic').map((e) => e.trace),
        arithmeticProbe,
      ).bySize,
    [episodes],
  );
  if (rows.length === 0) return null;
  const steps = new Set(episodes.map((e) => e.step)).size;
  const counted = rows.reduce((a, r) => a + r.episodes, 0);
  return (
    <div className="size-strategy" data-testid="size-strategy">
      <p className="small muted">
        By operand count, all {counted} arithmetic rollouts kept ({steps === 1 ? 'one step' : `${steps} steps`}; whatever the filter above; sampled, as
        trained):
      </p>
      <table className="dense">
        <thead>
          <tr>
            <th className="num">operands</th>
            <th className="num">episodes</th>
            <th className="num" title="episodes whose root started at least one clone">
              delegated
            </th>
            <th className="num">right</th>
            <th className="num" title="mean generated tokens, root and clones">
              tokens
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.size} data-testid="size-row" data-size={r.size} data-episodes={r.episodes} data-delegated={r.delegated} data-correct={r.correct}>
              <td className="num">{r.size}</td>
              <td className="num">{r.episodes}</td>
              <td className="num">{pct(r.rate)}</td>
              <td className="num">{pct(r.accuracy)}</td>
              <td className="num">{r.meanTokens.toFixed(1)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
