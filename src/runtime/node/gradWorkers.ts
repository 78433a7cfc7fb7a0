/** Gradient workers in Node: worker threads behind a GradPool (../gradPool.ts). */
import { GradPool } from '../gradient/gradPool';
import type { BackendPreference } from '../selectBackend';
import { prepareWebgpuWorkers } from './nodeWebgpu';
import { startNodeWorker } from './startWorker';

export const GRAD_WORKER_ENTRY = new URL('./gradWorkerMain.ts', import.meta.url);

export async function startNodeGradPool(size: number, backend: BackendPreference): Promise<GradPool> {
  if (backend === 'webgpu' && size > 0) await prepareWebgpuWorkers();
  return GradPool.start((i) => startNodeWorker(GRAD_WORKER_ENTRY, `grad-${i}`), size, { backend });
}
