/** Warm start, Train, Pause/Resume, Step and Reset, with the warm-start progress. */
import { useState } from 'react';
import { pause, reset, step, train, warmStart } from '../state/actions';
import { canStartWork, usePlayground, type SftProgress } from '../state/store';

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
        {sft.step}/{sft.steps} ({Math.round(frac * 100)}%) · loss {sft.loss.toFixed(3)} · {Math.round(sft.tokensPerSec)} tok/s · ETA{' '}
        <span data-testid="sft-eta">{formatEta(sft.etaSec)}</span>
      </span>
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
        <button type="button" data-testid="reset" disabled={!ready || pending !== null} onClick={() => void reset()} title="Back to the loaded checkpoint; curves and rollouts cleared">
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
      {sft && <SftBar sft={sft} />}
    </section>
  );
}
