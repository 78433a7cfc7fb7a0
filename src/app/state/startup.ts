/**
 * Page start: the saved session if there is one (its config, weights and history), else config
 * from the URL hash (the demo's on a first visit, state/demo.ts) and the chosen shipped checkpoint (or a clearly labelled random init when
 * there is none, or when the link asks for another preset). A saved session that cannot be read
 * is reported and kept, and the page starts fresh.
 */
import { configFromHash, configToHash } from '../../core/runConfig';
import type { EngineLink } from '../engine/engine';
import { type KeyValueStore, type LoadResult, SessionArchive } from '../session/archive';
import { startAutosave } from '../session/autosave';
import { browserStore } from '../session/browserStore';
import { attachSession, keepUnreadable, onBeforeUnload, restoreSession } from '../session/sessionActions';
import { applyConfig, attachEngine, errorText, loadStartCheckpoint, machineDefaults, send, writeHash } from './actions';
import { DEMO_HASH, opensOnDemo } from './demo';
import { handleEvent } from './events';
import { getState, setState } from './store';

export const WASM_PATHS = `${import.meta.env.BASE_URL}tfjs-wasm/`;

export async function startPlayground(createEngine: () => EngineLink, store: KeyValueStore | null = browserStore()): Promise<void> {
  const archive = store === null ? null : new SessionArchive(store);
  const saved: LoadResult =
    archive === null
      ? { kind: 'none' }
      : await archive
          .load()
          .catch((e: unknown) => ({ kind: 'unreadable' as const, savedAt: null, message: `saved session: could not be read (${errorText(e)})` }));
  // A first visit (no link, nothing saved) opens on the demo, and its link is written into the URL.
  const demo = opensOnDemo(location.hash, saved.kind === 'ok');
  const link = configFromHash(demo ? `#${DEMO_HASH}` : location.hash, machineDefaults());
  // A restored session runs with the config it was saved with; a link that asks for another is applied after.
  const config = saved.kind === 'ok' ? saved.session.config : link.config;
  setState({ config, hashErrors: saved.kind === 'ok' ? [] : link.errors, hashNotes: saved.kind === 'ok' ? [] : link.notes });
  let engine: EngineLink;
  try {
    engine = createEngine();
  } catch (err) {
    setState({ engineState: 'failed', error: `engine: ${errorText(err)}` });
    return;
  }
  attachEngine(engine);
  engine.on(handleEvent);
  const init = await send({ kind: 'init', config, wasmPaths: WASM_PATHS });
  if (!init) {
    setState({ engineState: 'failed' });
    return;
  }
  setState({ backend: init.backend, workers: { rollout: init.workers, gradient: init.gradWorkers }, engineState: 'idle' });
  let restored = false;
  if (saved.kind === 'ok' && archive) {
    const why = await restoreSession(saved.session);
    if (why === null) restored = true;
    else await keepUnreadable(archive, saved.session.savedAt, `saved session could not be restored: ${why}`);
  } else if (saved.kind === 'unreadable' && archive) await keepUnreadable(archive, saved.savedAt, saved.message);
  if (demo) writeHash(config);
  if (!restored) await loadStartCheckpoint(config);
  const autosave = archive && startAutosave(engine, archive);
  if (restored && autosave && saved.kind === 'ok') autosave.adoptOrigin(getState().run, saved.session.origin.id, saved.session.origin.counters);
  attachSession(archive, autosave);
  window.addEventListener('hashchange', onHashChange);
  window.addEventListener('beforeunload', onBeforeUnload);
  if (restored) {
    const defaults = machineDefaults();
    const asked = location.hash.replace(/^#/, '') !== '' && configToHash(link.config, defaults) !== configToHash(config, defaults);
    writeHash(config);
    // Opening a link of another config over a restored session is a config change (it asks before discarding).
    if (asked) {
      await applyConfig(link.config);
      setState({ hashErrors: link.errors, hashNotes: link.notes });
    }
  }
}

/** A link edited by hand: report its problems, apply the good values. */
function onHashChange(): void {
  const { config, errors, notes } = configFromHash(location.hash, machineDefaults());
  setState({ hashErrors: errors, hashNotes: notes });
  void applyConfig(config).then(() => setState({ hashErrors: errors, hashNotes: notes }));
}
