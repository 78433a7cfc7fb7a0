/** The always-visible line: backend, model, policy version with the GRPO and warm-start steps behind it, engine state, and the last error. */
import { useMemo } from 'react';
import { counterBreakdown } from '../../core/io/provenance';
import { policyVersionTitle, stepsTitle } from '../state/counters';
import { engineStateText, usePlayground } from '../state/store';

function formatParams(n: number): string {
  return n >= 1e6 ? `${(n / 1e6).toFixed(2)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n);
}

export function StatusBar() {
  const backend = usePlayground((s) => s.backend);
  const workers = usePlayground((s) => s.workers);
  const model = usePlayground((s) => s.model);
  const modelNote = usePlayground((s) => s.modelNote);
  const engineState = usePlayground((s) => s.engineState);
  const finishing = usePlayground((s) => s.finishing);
  const progress = usePlayground((s) => s.progress);
  const policyVersion = usePlayground((s) => s.policyVersion);
  const pending = usePlayground((s) => s.pending);
  const error = usePlayground((s) => s.error);
  const provenance = usePlayground((s) => s.provenance);
  const counters = useMemo(() => counterBreakdown(provenance), [provenance]);
  const backendState = backend ? 'ready' : engineState === 'failed' ? 'failed' : 'pending';
  const adapter = backend?.adapter;
  return (
    <header className="status" aria-label="Status">
      <h1>SELFCEST Playground</h1>
      <dl className="status-facts">
        <dt>backend</dt>
        <dd data-testid="backend" data-state={backendState} className="strong">
          {backend ? backend.backend : backendState === 'pending' ? 'starting…' : 'none'}
        </dd>
        {backend?.reason && (
          <dd data-testid="backend-reason" className="warn">
            ({backend.reason})
          </dd>
        )}
        {adapter && (
          <dd data-testid="adapter" title={adapter.description}>
            {[adapter.vendor, adapter.architecture].filter(Boolean).join(' / ') || 'unnamed adapter'}
          </dd>
        )}
        {workers !== null && (
          <dd
            data-testid="workers"
            title="worker threads: rollout workers run the episodes; gradient workers share each update's gradient with the trainer (Config: Rollout workers, Gradient workers)"
          >
            {workers.rollout} rollout · {workers.gradient} gradient worker{workers.gradient === 1 ? '' : 's'}
          </dd>
        )}
        <dt>model</dt>
        <dd data-testid="model-preset">{model ? `${model.preset} · ${formatParams(model.parameters)} params` : '—'}</dd>
        <dd data-testid="model-source" className={modelNote ? 'warn' : ''} title={model?.source}>
          {model ? model.source : 'loading…'}
        </dd>
        <dt>policy</dt>
        <dd data-testid="policy-version" title={policyVersionTitle(counters, policyVersion)}>
          v{policyVersion}
        </dd>
        <dt>GRPO steps</dt>
        <dd data-testid="grpo-steps" title={stepsTitle('grpo', counters)}>
          {counters.grpoSteps}
        </dd>
        <dt>warm-start steps</dt>
        <dd data-testid="warmstart-steps" title={stepsTitle('sft', counters)}>
          {counters.sftSteps}
        </dd>
        <dt>state</dt>
        <dd data-testid="engine-state" data-state={engineState} className="strong">
          {engineStateText(engineState, finishing)}
          {pending ? ` · ${pending}…` : ''}
        </dd>
        {progress && (
          <dd data-testid="progress" data-done={progress.done} data-total={progress.total} className="muted">
            {progress.what} {progress.done}/{progress.total}
          </dd>
        )}
      </dl>
      {modelNote && (
        <p className="warn" data-testid="model-note">
          {modelNote}
        </p>
      )}
      {backend && backend.notes.length > 0 && (
        <p className="muted" data-testid="backend-notes">
          {backend.notes.join('; ')}
        </p>
      )}
      {error && (
        <p className="error" role="alert" data-testid="status-error">
          {error}
        </p>
      )}
    </header>
  );
}
