/** Live training curves, one small d3 chart per quantity, fed from batched 'metrics' events. */
import { CHARTS } from '../charts/chartSpecs';
import { LineChart } from '../charts/LineChart';
import { usePlayground } from '../state/store';

export function ChartsPanel() {
  const points = usePlayground((s) => s.metrics);
  const last = points[points.length - 1]?.metrics;
  return (
    <section className="panel" aria-label="Training curves">
      <h2>
        Curves{' '}
        <span className="muted" data-testid="metrics-steps" data-steps={points.length}>
          {last
            ? `step ${last.step} · ${last.wallSec.toFixed(1)} s/step · ${Math.round(last.rolloutTokensPerSec)} rollout tok/s · grad norm ${last.gradNorm.toFixed(3)}${last.nonFiniteSkips ? ` · ${last.nonFiniteSkips} non-finite skips` : ''}`
            : 'no steps yet'}
        </span>
      </h2>
      <div className="charts">
        {CHARTS.map((spec) => (
          <LineChart key={spec.id} spec={spec} points={points} />
        ))}
      </div>
    </section>
  );
}
