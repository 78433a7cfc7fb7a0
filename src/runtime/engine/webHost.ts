/**
 * The engine's host in the browser: it runs in a module worker and starts its rollout workers
 * and gradient workers as nested module workers (Chromium, Firefox and Safari 15.5+ support
 * workers in workers).
 */
import { httpFetchFile } from '../checkpointFiles';
import { webWorkerHandle } from '../transport/endpoint';
import type { EngineHost } from './engineHost';
import { selectBackend } from '../selectBackend';

export const webHost: EngineHost = {
  startRolloutWorker: (index) =>
    webWorkerHandle(new Worker(new URL('../rollout/rollout.worker.ts', import.meta.url), { type: 'module', name: `selfcest-rollout-${index}` })),
  startGradWorker: (index) =>
    webWorkerHandle(new Worker(new URL('../gradient/grad.worker.ts', import.meta.url), { type: 'module', name: `selfcest-grad-${index}` })),
  selectBackend: (pref, wasmPaths) => selectBackend(pref, wasmPaths === undefined ? {} : { wasmPaths }),
  fetchFile: httpFetchFile,
};
