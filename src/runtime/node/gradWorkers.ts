/** Data-parallel SFT in Node: gradient workers on worker threads, kept on the trainer's weights. */
import type { ModelConfig } from '../../core/model/config';
import { type GPTParams, paramsToArrays } from '../../core/model/params';
import type { RemoteGradients } from '../../core/rl/sft';
import type { WorkerHandle } from '../endpoint';
import { type GradReplies, type GradRequest } from '../gradWorker';
import { RpcClient } from '../rpc';
import type { BackendPreference } from '../selectBackend';
import { packWeights, unpackWeights } from '../weights';
import { prepareWebgpuWorkers } from './nodeWebgpu';
import { startNodeWorker } from './startWorker';

const ENTRY = new URL('./gradWorkerMain.ts', import.meta.url);

export class GradWorkers {
  private version = 0;

  private constructor(
    private readonly handles: WorkerHandle[],
    private readonly clients: RpcClient<GradRequest, GradReplies, never>[],
    private readonly model: ModelConfig,
  ) {}

  static async start(n: number, model: ModelConfig, backend: BackendPreference): Promise<GradWorkers> {
    if (backend === 'webgpu') await prepareWebgpuWorkers();
    const handles = Array.from({ length: n }, (_, i) => startNodeWorker(ENTRY, `grad-${i}`));
    const clients = handles.map((h, i) => new RpcClient<GradRequest, GradReplies, never>(h.endpoint, `grad worker ${i}`));
    handles.forEach((h, i) => h.onExit((why) => clients[i].fail(why)));
    const w = new GradWorkers(handles, clients, model);
    try {
      await Promise.all(clients.map((c) => c.request({ kind: 'init', backend })));
    } catch (e) {
      w.close();
      throw e;
    }
    return w;
  }

  /** Send the trainer's current weights (one shared buffer for all workers). */
  async sync(params: GPTParams): Promise<void> {
    this.version++;
    const weights = packWeights(await paramsToArrays(params), true);
    await Promise.all(this.clients.map((c) => c.request({ kind: 'weights', model: this.model, version: this.version, weights })));
  }

  remotes(): RemoteGradients[] {
    return this.clients.map((c) => async (batches, totalWeight) => {
      if (batches.length === 0) return { grads: new Map(), loss: 0 };
      const r = await c.request({ kind: 'grads', version: this.version, batches, totalWeight });
      return { loss: r.loss, grads: unpackWeights(r.grads) };
    });
  }

  close(): void {
    this.handles.forEach((h) => h.terminate());
  }
}
