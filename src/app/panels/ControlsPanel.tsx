/** Warm start, Train, Pause/Resume, Step and Reset, with what the warm start will do and its progress. */
import { useMemo, useState } from 'react';
import type { RunConfigKey } from '../../core/runConfig';
import { pause, reset, step, train, warmStart } from '../state/actions';
import { canStartWork, usePlayground, type SftProgress } from '../state/store';
import { planParts, warmStartPlan } from '../state/warmStartPlan';

/** Brings a field of the config form into view (opening its fold) and puts the cursor there. */
function editField(key: RunConfigKey): void {
  const el = document.getElementById(`config-${key}`);
  if (!el) return;
  const fold = el.closest('details');
  if (fold && !fold.open) fold.open = true;
  el.scrollIntoView({ block: 'center', behavior: 'smooth' });
  el.focus({ preventScroll: true });
}

/** The warm start's settings from the applied config, each a link to the form field that sets it. */
function WarmStartPlanLine({ steps }: { steps: number | null }) {
  const config = usePlayground((s) => s.config);
  const plan = useMemo(() => (steps === null ? null : warmStartPlan(config, steps)), [config, steps]);
  if (steps === null) return null;
  if (plan === null) {
    return (
      <p className="field-error" data-testid="sft-plan">
        the applied task options do not build a warm start (see Config)
      </p>
    );
  }
  return (
    <p className="plan small" data-testid="sft-plan" title="What Warm start runs, from the applied config: click a value to edit it in Config (then Apply)">
      {planParts(plan).map((part, i) => (
        <span key={part.id}>
          {i > 0 && ' · '}
          {part.field === null ? (
            <span data-testid={`sft-plan-${part.id}`}>{part.text}</span>
          ) : (
            <button type="button" className="link" data-testid={`sft-plan-${part.id}`} onClick={() => editField(part.field as RunConfigKey)}>
              {part.text}
            </button>
          )}
        </span>
      ))}
    </p>
  );
}

function formatEta(sec: number): string {
  if (!Number.isFinite(sec) || sec < 0) return '—';
  if (sec < 90) return `${Math.round(sec)} s`;
  if (sec < 5400) return `${Math.round(sec / 60)} min`;
  return `${(sec / 3600).toFixed(1)} h`;
}

function SftBar({ sft }: { sft: SftProgress }) {
  const frac = sft.steps > 0 ? sft.step / sft.steps : 0;
  return (
    <div className="sft" data-testid="sft-progress" data-step={sft.step} data-steps={sft.steps}>
      <progress value={sft.step} max={sft.steps} />
      <span>
        this warm start: {sft.step}/{sft.steps} steps ({Math.round(frac * 100)}%) · loss {sft.loss.toFixed(3)} · {Math.round(sft.tokensPerSec)} tok/s · ETA{' '}
        <span data-testid="sft-eta">{formatEta(sft.etaSec)}</span>
      </span>
    </div>
  );
}

const HINT_KEY = 'selfcest-first-use-hint';

/** What Train does and where to look, until the first step or until dismissed (remembered in this browser). */
function FirstUseHint() {
  const steps = usePlayground((s) => s.metrics.length + s.sftMetrics.length);
  const [dismissed, setDismissed] = useState(() => {
    try {
      return localStorage.getItem(HINT_KEY) === 'dismissed';
    } catch {
      return false;
    }
  });
  if (dismissed || steps > 0) return null;
  const dismiss = () => {
    setDismissed(true);
    try {
      localStorage.setItem(HINT_KEY, 'dismissed');
    } catch {
      // private mode: the hint comes back next visit, nothing else is lost
    }
  };
  return (
    <div className="hint small" data-testid="first-use-hint" role="note">
      <b>First time here?</b> <b>Train</b> runs GRPO on the loaded warm start (the recipe in Config) until Pause; <b>Step</b> takes one step. On the right,{' '}
      <i>What the run is learning</i> says in a sentence what the held-out evaluations show, and the <i>Delegation tree</i> draws the newest rollout as it
      arrives. Click a row under <i>Rollouts</i> to hold one, and try <i>Step in slow motion</i> to see one step stage by stage. Runs are saved in this browser;
      hover a config field for its meaning.{' '}
      <button type="button" className="link" data-testid="hint-dismiss" onClick={dismiss}>
        Got it
      </button>
    </div>
  );
}

export function ControlsPanel() {
  const engineState = usePlayground((s) => s.engineState);
  const pending = usePlayground((s) => s.pending);
  const hasModel = usePlayground((s) => s.model !== null);
  // Also false while pausing: Train and Step wait until the engine reports the loop stopped.
  const free = usePlayground(canStartWork);
  const sft = usePlayground((s) => s.sft);
  const [sftSteps, setSftSteps] = useState('200');
  const running = engineState === 'training' || engineState === 'sft';
  const ready = hasModel && engineState !== 'starting' && engineState !== 'failed';
  const steps = Number(sftSteps);
  const stepsOk = Number.isInteger(steps) && steps >= 1 && steps <= 1_000_000;
  return (
    <section className="panel" aria-label="Controls">
      <h2>Run</h2>
      <FirstUseHint />
      <div className="buttons">
        {engineState === 'paused' ? (
          <button type="button" data-testid="train" disabled={!free} onClick={() => void train()}>
            Resume
          </button>
        ) : (
          <button type="button" data-testid="train" disabled={!free} onClick={() => void train()}>
            Train
          </button>
        )}
        <button type="button" data-testid="pause" disabled={!running} onClick={() => void pause()}>
          Pause
        </button>
        <button type="button" data-testid="step" disabled={!free} onClick={() => void step()} title="Exactly one GRPO step">
          Step
        </button>
        <button
          type="button"
          data-testid="reset"
          disabled={!ready || pending !== null}
          onClick={() => void reset()}
          title="Back to the loaded checkpoint; curves and rollouts cleared"
        >
          Reset
        </button>
      </div>
      <div className="row">
        <label>
          Warm start (SFT) steps{' '}
          <input data-testid="sft-steps" className={stepsOk ? 'num' : 'num invalid'} value={sftSteps} onChange={(e) => setSftSteps(e.target.value)} />
        </label>
        <button type="button" data-testid="sft" disabled={!free || !stepsOk} onClick={() => void warmStart(steps)}>
          Warm start
        </button>
      </div>
      {!stepsOk && <p className="field-error">steps must be an integer in [1, 1000000]</p>}
      <WarmStartPlanLine steps={stepsOk ? steps : null} />
      {sft && <SftBar sft={sft} />}
    </section>
  );
}
