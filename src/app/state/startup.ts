/**
 * Page start: config from the URL hash, engine up, the chosen shipped checkpoint loaded (or a
 * clearly labelled random init when there is none, or when the link asks for another preset).
 */
import { configFromHash } from '../../core/runConfig';
import type { Engine } from '../engine/engine';
import { applyConfig, attachEngine, errorText, loadStartCheckpoint, machineDefaults, send } from './actions';
import { handleEvent } from './events';
import { setState } from './store';

export const WASM_PATHS = `${import.meta.env.BASE_URL}tfjs-wasm/`;

export async function startPlayground(createEngine: () => Engine): Promise<void> {
  const { config, errors } = configFromHash(location.hash, machineDefaults());
  setState({ config, hashErrors: errors });
  let engine: Engine;
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
  setState({ backend: init.backend, workers: init.workers, engineState: 'idle' });
  await loadStartCheckpoint(config);
  window.addEventListener('hashchange', onHashChange);
}

/** A link edited by hand: report its problems, apply the good values. */
function onHashChange(): void {
  const { config, errors } = configFromHash(location.hash, machineDefaults());
  setState({ hashErrors: errors });
  void applyConfig(config).then(() => setState({ hashErrors: errors }));
}
