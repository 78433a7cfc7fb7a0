/** The engine's host in Node: rollout and gradient workers are worker threads; files come from disk or HTTP. */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { httpFetchFile } from '../checkpointFiles';
import type { EngineHost } from '../engine/engineHost';
import { selectNodeBackend } from './nodeBackend';
import { GRAD_WORKER_ENTRY } from './gradWorkers';
import { ROLLOUT_WORKER_ENTRY } from './pool';
import { startNodeWorker } from './startWorker';

export const nodeHost: EngineHost = {
  startRolloutWorker: (index) => startNodeWorker(ROLLOUT_WORKER_ENTRY, `rollout-${index}`),
  startGradWorker: (index) => startNodeWorker(GRAD_WORKER_ENTRY, `grad-${index}`),
  selectBackend: (pref) => selectNodeBackend(pref),
  async fetchFile(url) {
    if (/^https?:/.test(url)) return httpFetchFile(url);
    try {
      return new Uint8Array(await readFile(url.startsWith('file:') ? fileURLToPath(url) : url));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
  },
};
