/**
 * Runs one rollout token by token in the engine: root and clone contexts side by side, each
 * live one with its top-k next-token probabilities.
 */
import { useState } from 'react';
import type { ContextTrace } from '../../core/rollout/trace';
import type { StepperState } from '../../runtime/engine/messages';
import { openTree, stepperAdvance, stepperStart } from '../state/actions';
import { type Advance, advanceNote } from '../state/stepperNote';
import { getState, usePlayground } from '../state/store';
import { TokenText, WriterLegend } from './ContextView';

type Live = StepperState['live'][number];

function TopK({ live }: { live: Live }) {
  return (
    <table className="topk" data-testid="stepper-topk">
      <caption>top-{live.topK.length} of the distribution its latest token was drawn from</caption>
      <tbody>
        {live.topK.map((t) => (
          <tr key={t.token}>
            <td className="mono">{t.token === '\n' ? '↵' : t.token}</td>
            <td className="bar">
              <span style={{ width: `${Math.round(t.prob * 100)}%` }} />
            </td>
            <td className="num">{t.prob.toFixed(3)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function ContextColumn({ ctx, live }: { ctx: ContextTrace; live: Live | undefined }) {
  const state = live ? (live.waiting ? 'waiting for clones' : 'generating') : ctx.violation ? ctx.violation : 'done';
  return (
    <div className={`stepper-ctx ${ctx.role}`} data-testid="stepper-context" data-role={ctx.role} data-generated={ctx.generatedTokens}>
      <div className="context-head">
        <b>{ctx.role === 'root' ? `root #${ctx.id}` : `clone #${ctx.id}`}</b>
        {ctx.budget !== null && ` · ${ctx.generatedTokens}/${ctx.budget}`}
        {ctx.role === 'root' && ` · ${ctx.generatedTokens} generated`} · <span className={ctx.violation ? 'bad' : 'muted'}>{state}</span>
      </div>
      <TokenText ctx={ctx} />
      {live && !live.waiting && live.topK.length > 0 && <TopK live={live} />}
    </div>
  );
}

export function StepperPanel() {
  const stepper = usePlayground((s) => s.stepper);
  const pending = usePlayground((s) => s.pending);
  const engineState = usePlayground((s) => s.engineState);
  const [seed, setSeed] = useState('0');
  const [prompt, setPrompt] = useState('');
  const [allowSpawn, setAllowSpawn] = useState(true);
  const [note, setNote] = useState<string | null>(null);
  const advance = async (until: Advance) => {
    const before = getState().stepper;
    setNote(null);
    await stepperAdvance(until);
    setNote(advanceNote(before, getState().stepper, until));
  };
  const seedNum = Number(seed);
  const seedOk = Number.isInteger(seedNum) && seedNum >= 0 && seedNum < 2 ** 31;
  // The engine steps a snapshot of the weights, so this works while training goes on.
  const free = pending === null && engineState !== 'starting' && engineState !== 'failed';
  const canAdvance = free && stepper !== null && !stepper.done;
  const generated = stepper ? stepper.trace.contexts.reduce((n, c) => n + c.generatedTokens, 0) : 0;
  const liveOf = new Map(stepper?.live.map((l) => [l.context, l]));
  return (
    <section className="panel" aria-label="Rollout stepper">
      <h2>Rollout stepper</h2>
      <div className="row">
        <label>
          seed <input data-testid="stepper-seed" className={seedOk ? 'num' : 'num invalid'} value={seed} onChange={(e) => setSeed(e.target.value)} />
        </label>
        <label>
          prompt{' '}
          <input
            data-testid="stepper-prompt"
            className="mono"
            placeholder="(a task problem from the seed)"
            value={prompt}
            onChange={(e) => setPrompt(e.target.value)}
          />
        </label>
        <label>
          <input type="checkbox" data-testid="stepper-allow-spawn" checked={allowSpawn} onChange={(e) => setAllowSpawn(e.target.checked)} /> allow spawn
        </label>
        <button
          type="button"
          data-testid="stepper-start"
          disabled={!free || !seedOk}
          onClick={() => {
            setNote(null);
            void stepperStart(seedNum, prompt, allowSpawn);
          }}
        >
          Start
        </button>
        <button type="button" data-testid="stepper-token" disabled={!canAdvance} onClick={() => void advance('token')}>
          Next token
        </button>
        <button
          type="button"
          data-testid="stepper-spawn"
          disabled={!canAdvance}
          title="Until the next spawn or join; without one, to the end of the episode (and it says so)"
          onClick={() => void advance('spawn')}
        >
          To next spawn
        </button>
        <button type="button" data-testid="stepper-end" disabled={!canAdvance} onClick={() => void advance('end')}>
          To end
        </button>
        <button type="button" data-testid="stepper-tree" disabled={!stepper} onClick={() => openTree({ kind: 'stepper' })}>
          Open tree
        </button>
      </div>
      {note && (
        <p className="warn small" data-testid="stepper-note" role="status">
          {note}
        </p>
      )}
      {stepper && (
        <>
          <div className="small">
            <span data-testid="stepper-generated" data-generated={generated} data-done={stepper.done}>
              {generated} tokens generated
            </span>{' '}
            · {stepper.trace.contexts.length - 1} clone(s) ·{' '}
            {stepper.done ? `done: answer ${stepper.trace.answer ?? '∅'} (truth ${stepper.trace.truth})` : `${stepper.live.length} live`} · <WriterLegend />
          </div>
          <div className="stepper-contexts">
            {stepper.trace.contexts.map((c) => (
              <ContextColumn key={c.id} ctx={c} live={liveOf.get(c.id)} />
            ))}
          </div>
        </>
      )}
    </section>
  );
}
