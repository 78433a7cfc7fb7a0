/**
 * Slow motion of one GRPO step (GAN Lab style): a real step of the run, opened for one prompt
 * stage by stage — its G rollouts side by side, their rewards with the terms, the group's
 * advantages, each context's credit and gate, and what the update did to the log-probability
 * of every token the policy wrote.
 */
import { useEffect, useMemo, useState } from 'react';
import type { StepAnatomy } from '../../core/rl/anatomy';
import { slowStep } from '../state/actions';
import { type ContextRow, type EpisodeColumn, STAGES, type Stage, baselineText, deltaColour, deltaScale, groupColumns, rewardTerms } from '../state/slowMotion';
import { canStartWork, usePlayground } from '../state/store';

const f3 = (x: number) => (Object.is(x, -0) ? 0 : x).toFixed(3);
const signed = (x: number) => `${x > -0.0005 ? '+' : '−'}${Math.abs(x).toFixed(3)}`;

function Tokens({ row, scale }: { row: ContextRow; scale: number }) {
  return (
    <div className="tokens slow-tokens" data-testid="slow-tokens">
      {row.tokens.map((t, k) => {
        const d = t.after - t.before;
        return (
          <span
            key={k}
            className={`tok w-g${t.special ? ' special' : ''}`}
            style={{ background: deltaColour(d, scale) }}
            title={`p ${Math.exp(t.before).toFixed(3)} → ${Math.exp(t.after).toFixed(3)} (log p ${t.before.toFixed(3)} → ${t.after.toFixed(3)}, Δ ${signed(d)})`}
          >
            {t.text}
          </span>
        );
      })}
    </div>
  );
}

function ContextBlock({ row, stage, R, rootA, scale, trained }: { row: ContextRow; stage: Stage; R: number; rootA: number; scale: number; trained: boolean }) {
  const head = row.role === 'root' ? 'root' : `clone #${row.id}${row.budget !== null ? ` · b${row.budget}` : ''}`;
  return (
    <div className={`slow-ctx ${row.role}${stage >= 3 && row.gated ? ' gated' : ''}`} data-testid="slow-context" data-role={row.role} data-gated={row.gated}>
      <div className="small">
        <b>{head}</b> · {row.generated} tok · answer <span className="mono">{row.answer ?? '∅'}</span>
        {row.violation && <span className="bad"> · {row.violation}</span>}
      </div>
      {stage >= 3 && (
        <div className="small mono" data-testid="slow-credit">
          {row.gated ? (
            <span className="badge gated">gated: A 0{!trained ? ' (and its group is skipped)' : row.weight > 0 ? ', KL kept' : ', out of the batch'}</span>
          ) : row.role === 'root' ? (
            `A ${f3(row.advantage)} · weight ${row.weight}`
          ) : row.factor !== null ? (
            `r ${f3(row.reward)} · A ${f3(rootA)}×clamp(${f3(row.reward)}/${f3(R)}) = ${f3(row.advantage)}`
          ) : (
            `r ${f3(row.reward)} · A ${f3(row.advantage)} (broadcast)`
          )}
        </div>
      )}
      {stage >= 4 ? (
        <>
          <Tokens row={row} scale={scale} />
          <div className="small mono" data-testid="slow-delta">
            mean Δ log p {signed(row.meanDelta)}
          </div>
        </>
      ) : (
        <div className="tokens slow-tokens">
          {row.tokens.map((t, k) => (
            <span key={k} className={`tok w-g${t.special ? ' special' : ''}`}>
              {t.text}
            </span>
          ))}
        </div>
      )}
    </div>
  );
}

function Column({ col, n, stage, scale, trained }: { col: EpisodeColumn; n: number; stage: Stage; scale: number; trained: boolean }) {
  const R = col.reward.reward;
  return (
    <div className="slow-col" data-testid="slow-episode">
      <div className="context-head">
        <b>episode {n}</b> · answer <span className="mono">{col.answer ?? '∅'}</span>{' '}
        <span className={col.correct ? 'ok' : 'bad'}>{col.correct ? '✓' : '✗'}</span> · {col.contexts.length - 1} clone(s)
      </div>
      {stage >= 1 && (
        <table className="slow-terms" data-testid="slow-reward">
          <tbody>
            {rewardTerms(col.reward).map((t) => (
              <tr key={t.label}>
                <td>{t.label}</td>
                <td className="num">{signed(t.value)}</td>
              </tr>
            ))}
            <tr className="sum">
              <td>R</td>
              <td className="num">{f3(R)}</td>
            </tr>
          </tbody>
        </table>
      )}
      {stage >= 2 && (
        <div className="small mono slow-adv" data-testid="slow-advantage">
          A = {f3(col.advantage)}
        </div>
      )}
      {col.contexts.map((row) => (
        <ContextBlock key={row.id} row={row} stage={stage} R={R} rootA={col.advantage} scale={scale} trained={trained} />
      ))}
    </div>
  );
}

function Anatomy({ a }: { a: StepAnatomy }) {
  // A new step opens at its first prompt that trained (a skipped group shows little), stage 1.
  const firstTrained = Math.max(
    0,
    a.groups.findIndex((g) => g.trained),
  );
  const [group, setGroup] = useState(firstTrained);
  const [stage, setStage] = useState<Stage>(0);
  useEffect(() => {
    setGroup(firstTrained);
    setStage(0);
  }, [a, firstTrained]);
  const shown = Math.min(group, a.groups.length - 1);
  const g = a.groups[shown];
  const cols = useMemo(() => groupColumns(a, shown), [a, shown]);
  const scale = deltaScale(cols);
  const s = a.settings;
  return (
    <>
      <p className="small" data-testid="slow-summary">
        Step {a.step} · policy v{a.policyVersionBefore} → v{a.policyVersionAfter} · {a.groups.length} prompts × {s.group} · {a.metrics.updates} update(s)
        (mini-batch {s.miniBatch ?? 'whole batch'}, epochs {s.innerEpochs}) · lr {s.lr} · clip {s.clipLow}/{s.clipHigh} · β {s.beta} · credit {s.credit} ·
        gating {s.gating ? s.gateMode : 'off'}
      </p>
      <div className="row">
        <button type="button" data-testid="slow-prev-prompt" disabled={group === 0} onClick={() => setGroup(group - 1)}>
          ◂
        </button>
        <span data-testid="slow-prompt">
          prompt {group + 1} of {a.groups.length}: <span className="mono">{g.prompt}</span> (truth <span className="mono">{g.truth}</span>)
          {!g.trained && <span className="warn"> · skipped</span>}
        </span>
        <button type="button" data-testid="slow-next-prompt" disabled={group >= a.groups.length - 1} onClick={() => setGroup(group + 1)}>
          ▸
        </button>
      </div>
      <div className="row slow-stages" role="tablist" aria-label="Stages of the step">
        {STAGES.map((name, i) => (
          <button
            key={name}
            type="button"
            role="tab"
            aria-selected={stage === i}
            aria-pressed={stage === i}
            data-testid={`slow-stage-${i}`}
            className={stage >= i ? 'stage-on' : ''}
            onClick={() => setStage(i as Stage)}
          >
            {i + 1}. {name}
          </button>
        ))}
        <button type="button" data-testid="slow-next-stage" disabled={stage === 4} onClick={() => setStage(Math.min(4, stage + 1) as Stage)}>
          Next stage ▸
        </button>
      </div>
      <p className="small" data-testid="slow-stage-note">
        {stage === 0 && 'The G episodes this prompt got, as the rollout workers sampled them from the behaviour policy.'}
        {stage === 1 && 'Each episode’s reward: its score less the length, call and unused-budget costs.'}
        {stage === 2 && baselineText(a, shown)}
        {stage === 3 &&
          `Each context’s credit: the root gets A; a clone gets ${s.credit === 'ratio' ? 'A · clamp(r_clone / R)' : 'A (broadcast)'}, with r_clone = R unless a gate (${s.gating ? s.gateMode : 'off'}) sets it to 0.`}
        {stage === 4 &&
          `Every generated token coloured by what the update did to its log-probability: green up, red down, full colour at ±${scale.toPrecision(2)} nats (the largest change in this group); hover for p before → after. Before: the behaviour policy at rollout; after: the weights this step produced.`}
      </p>
      <div className="slow-cols">
        {cols.map((c, j) => (
          <Column key={c.index} col={c} n={j + 1} stage={stage} scale={scale} trained={g.trained} />
        ))}
      </div>
    </>
  );
}

export function SlowMotionPanel() {
  const anatomy = usePlayground((s) => s.anatomy);
  const ready = usePlayground(canStartWork);
  const pending = usePlayground((s) => s.pending);
  return (
    <section className="panel" aria-label="Slow-motion step" data-testid="slow-panel">
      <h2>Slow-motion step</h2>
      <div className="row">
        <button
          type="button"
          data-testid="slow-step"
          disabled={!ready}
          onClick={() => void slowStep()}
          title="Runs one real GRPO step of this run (it counts like Step) and opens it stage by stage"
        >
          {pending === 'slowStep' ? 'Running the step…' : 'Step in slow motion'}
        </button>
        <span className="small muted">One real step of this run (it counts, like Step), opened stage by stage for one prompt at a time.</span>
      </div>
      {anatomy && <Anatomy a={anatomy} />}
    </section>
  );
}
