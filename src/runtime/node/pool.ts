/** Rollout pools of worker threads for the CLI and the tests. */
import { paramsToArrays } from '../../core/model/params';
import type * as tf from '@tensorflow/tfjs';
import type { PolicyModel, ReplicaSpec } from '../../core/policyModel';

/** What the rollout workers need of a model: its weights as they are now, how to rebuild it, its protocol. */
export type RolloutModel = Pick<PolicyModel, 'replica' | 'protocol' | 'toy'> & { params: ReadonlyMap<string, tf.Tensor> };
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

/**
 * A policy's rollouts in `size` worker threads: `decoder` for the scheduler (with the model's
 * protocol where it carries one), `sync` after each update. The workers rebuild the model from its
 * trained weights (`model.replica`: the toy, or a Hugging Face model trained in full).
 */
export class PolicyRollouts {
  readonly decoder: PooledDecoder;
  private readonly replica: ReplicaSpec;

  private constructor(
    private readonly pool: RolloutPool,
    private readonly model: RolloutModel,
  ) {
    if (model.replica === undefined) throw new Error('rollout workers rebuild a model from its trained weights, and LoRA adapters are not the whole model');
    this.replica = model.replica;
    // The toy's token grammar depends on the rollout's settings: the scheduler makes it; a text model's protocol goes with the decoder.
    this.decoder = new PooledDecoder(pool, model.replica, model.toy ? undefined : model.protocol({ answerMaxChars: 0 }));
  }

  static async start(model: RolloutModel, size: number, backend: BackendPreference, version = 0): Promise<PolicyRollouts> {
    const r = new PolicyRollouts(await startNodePool(size, backend), model);
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
    const weights = await paramsToArrays(this.model.params);
    await this.pool.broadcast({ version, model: this.replica, payload: packWeights(weights, true) });
    return weights;
  }

  close(): void {
    this.pool.terminate();
  }
}
