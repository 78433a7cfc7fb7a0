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

/** A check to call after each step: prints, once each, the gradient workers that stopped (the step went on without them). */
export function failureWarnings(pool: GradPool | null): () => void {
  const told = new Set<string>();
  return () => {
    for (const f of pool?.failures() ?? []) {
      if (told.has(f)) continue;
      told.add(f);
      console.warn(`warning: ${f}; this thread computes its share from now on`);
    }
  };
}
