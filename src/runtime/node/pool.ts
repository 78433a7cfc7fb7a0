/** Rollout pools of worker threads for the CLI and the tests. */
import { paramsToArrays } from '../../core/model/params';
import type { Policy } from '../../core/policy';
import { PooledDecoder } from '../rollout/pooledDecoder';
import { RolloutPool } from '../rollout/rolloutPool';
import type { BackendPreference } from '../selectBackend';
import { packWeights } from '../transport/weights';
import { prepareWebgpuWorkers } from './nodeWebgpu';
import { startNodeWorker } from './startWorker';

export const ROLLOUT_WORKER_ENTRY = new URL('./rolloutWorkerMain.ts', import.meta.url);

export async function startNodePool(size: number, backend: BackendPreference = 'wasm'): Promise<RolloutPool> {
  if (backend === 'webgpu') await prepareWebgpuWorkers();
  return RolloutPool.start((i) => startNodeWorker(ROLLOUT_WORKER_ENTRY, `rollout-${i}`), size, { backend });
}

/** A policy's rollouts in `size` worker threads: `decoder` for the scheduler, `sync` after each update. */
export class PolicyRollouts {
  readonly decoder: PooledDecoder;

  private constructor(
    private readonly pool: RolloutPool,
    private readonly policy: Policy,
  ) {
    this.decoder = new PooledDecoder(pool, policy.config);
  }

  static async start(policy: Policy, size: number, backend: BackendPreference, version = 0): Promise<PolicyRollouts> {
    const r = new PolicyRollouts(await startNodePool(size, backend), policy);
    try {
      await r.sync(version);
    } catch (e) {
      r.close();
      throw e;
    }
    return r;
  }

  /** Sends the policy's current weights to every worker, tagged `version`; returns the host copy it read (for the gradient workers' next sync). */
  async sync(version: number): Promise<Map<string, Float32Array>> {
    const weights = await paramsToArrays(this.policy.params);
    await this.pool.broadcast({ version, model: this.policy.config, payload: packWeights(weights, true) });
    return weights;
  }

  close(): void {
    this.pool.terminate();
  }
}
