import { useEffect, useState } from 'react';
import { initBackend, type BackendInfo } from './backendInfo';

type BackendState =
  | { kind: 'pending' }
  | { kind: 'ready'; info: BackendInfo }
  | { kind: 'failed'; message: string };

function useBackend(): BackendState {
  const [state, setState] = useState<BackendState>({ kind: 'pending' });
  useEffect(() => {
    let current = true; // StrictMode runs effects twice; only the live one may set state.
    initBackend(window.location.search).then(
      (info) => current && setState({ kind: 'ready', info }),
      (err: unknown) => current && setState({ kind: 'failed', message: String(err) }),
    );
    return () => {
      current = false;
    };
  }, []);
  return state;
}

function BackendStatus({ state }: { state: BackendState }) {
  const info = state.kind === 'ready' ? state.info : null;
  const adapter = info?.adapter;
  return (
    <section className="panel" aria-label="Compute backend">
      <h2>Compute backend</h2>
      <dl className="facts">
        <dt>Backend</dt>
        <dd data-testid="backend" data-state={state.kind}>
          {info ? info.backend : state.kind === 'pending' ? 'starting…' : 'none'}
        </dd>
        {adapter && (
          <>
            <dt>Adapter</dt>
            <dd data-testid="adapter" title={adapter.description}>
              {[adapter.vendor, adapter.architecture].filter(Boolean).join(' / ') || 'unnamed'}
            </dd>
          </>
        )}
        {info && (
          <>
            <dt>Ready in</dt>
            <dd>{Math.round(info.initMs)} ms</dd>
          </>
        )}
      </dl>
      {info && info.notes.length > 0 && (
        <ul className="notes" data-testid="backend-notes">
          {info.notes.map((note) => (
            <li key={note}>{note}</li>
          ))}
        </ul>
      )}
      {state.kind === 'failed' && (
        <p className="error" role="alert">
          {state.message}
        </p>
      )}
    </section>
  );
}

export function App() {
  const backend = useBackend();
  return (
    <main className="app">
      <header>
        <h1>SELFCEST Playground</h1>
        <p className="tagline">
          Learned delegation by clones: one tiny model spawns copies of itself, trained with GRPO and
          rollout gating, in your browser.
        </p>
      </header>
      <BackendStatus state={backend} />
    </main>
  );
}
