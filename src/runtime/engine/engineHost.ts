/** What the engine needs from where it runs (a browser worker or Node); see webHost.ts, node/nodeHost.ts. */
import type { WorkerHandle } from '../transport/endpoint';
import type { BackendReport } from './messages';
import type { BackendPreference } from '../selectBackend';

export interface EngineHost {
  /** Starts rollout worker `index` (not yet initialised). */
  startRolloutWorker(index: number): WorkerHandle;
  /** Starts gradient worker `index` (not yet initialised). */
  startGradWorker(index: number): WorkerHandle;
  /** Selects and checks this thread's tfjs backend. */
  selectBackend(pref: BackendPreference, wasmPaths: string | undefined): Promise<BackendReport>;
  /** A file's bytes, or null when it does not exist (HTTP 404, missing file). */
  fetchFile(url: string): Promise<Uint8Array | null>;
}
