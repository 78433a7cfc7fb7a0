/**
 * The top of the page: what the run has learned so far, in one sentence and two charts (held-out
 * accuracy and the share of held-out problems delegated, each reading with its 95% interval), and
 * every held-out reading as an element a check can read (data-testid="heldout-reading").
 */
import { useMemo } from 'react';
import { LineChart } from '../charts/LineChart';
import { GRPO_X } from '../charts/chartSpecs';
import { delegationDataOf, liveReadings, paceSentence, storySentence, type LiveReading } from '../charts/story';
import { DEMO_NOTE, isDemo } from '../state/demo';
import { usePlayground } from '../state/store';
import { HeldOutChart } from './ChartsPanel';

const pct = (v: number) => `${(v * 100).toFixed(0)}%`;

function Reading({ r }: { r: LiveReading }) {
  return (
    <li
      data-testid="heldout-reading"
      data-step={r.step}
      data-method={r.method}
      data-accuracy={r.accuracy}
      data-lo={r.lo}
      data-hi={r.hi}
      data-n={r.n}
      data-delegated={r.delegationRate}
      title={`step ${r.step}, ${r.method}: ${Math.round(r.accuracy * r.n)} of ${r.n} held-out problems right, 95% interval [${pct(r.lo)}, ${pct(r.hi)}]${r.delegationRate !== undefined ? `; delegated ${pct(r.delegationRate)}` : ''}`}
    >
      <span className="muted">{r.step}</span> {r.method} {pct(r.accuracy)}{' '}
      <span className="muted">
        [{pct(r.lo)}, {pct(r.hi)}]
      </span>
    </li>
  );
}

export function StoryPanel() {
  const frontier = usePlayground((s) => s.frontier);
  const config = usePlayground((s) => s.config);
  const readings = useMemo(() => liveReadings(frontier), [frontier]);
  const delegation = useMemo(() => delegationDataOf(readings), [readings]);
  const sentence = storySentence(readings);
  const n = readings[0]?.n;
  const metrics = usePlayground((s) => s.metrics);
  const training = usePlayground((s) => s.engineState === 'training');
  const stepSecs = useMemo(() => metrics.slice(-3).map((p) => p.metrics.wallSec), [metrics]);
  const done = metrics.length > 0 ? metrics[metrics.length - 1].metrics.step : 0;
  const pace = training ? paceSentence(stepSecs, done, config.evalEvery) : null;
  return (
    <section className="panel story" aria-label="What the run is learning" data-testid="story">
      <h2>What the run is learning</h2>
      {isDemo(config) && (
        <p className="small demo-note" data-testid="demo-note">
          {DEMO_NOTE}
        </p>
      )}
      <p className="story-sentence" data-testid="story-summary" data-ready={sentence !== null}>
        {sentence
          ? `Held-out (monitor set, greedy, n = ${n}): ${sentence}`
          : config.evalEvery > 0
            ? `Press Train: the page evaluates the model on the same ${config.evalN} held-out problems before the first step and every ${config.evalEvery} steps, and says here what changed.`
            : 'Held-out evaluation is off (Config: held-out eval every 0 steps); set it to watch what the run learns.'}
      </p>
      {pace && (
        <p className="small muted" data-testid="story-pace">
          {pace}
        </p>
      )}
      <div className="story-charts">
        <HeldOutChart />
        <LineChart
          id="heldout-delegated"
          title="Held-out problems delegated"
          subtitle="delegate, greedy: root started a clone"
          data={delegation}
          yMin={0}
          yMax={1}
          smoothing={0}
          sparse
          xLabel={GRPO_X}
        />
      </div>
      {readings.length > 0 && (
        <details className="fold" data-testid="heldout-readings">
          <summary className="small">Every reading ({readings.length}), with its 95% interval</summary>
          <ol className="readings small" aria-label="Held-out readings">
            {readings.map((r) => (
              <Reading key={`${r.step}-${r.method}`} r={r} />
            ))}
          </ol>
        </details>
      )}
    </section>
  );
}
