/**
 * The page's handle on the language-model worker (lm.worker.ts): typed requests, progress events.
 * `load` moves (detaches) the files' buffers into the worker.
 */
import { type WorkerHandle, webWorkerHandle } from '../transport/endpoint';
import { RpcClient } from '../transport/rpc';
import type { LmEvent, LmReplies, LmRequest } from './lmMessages';

export class LmClient {
  private readonly rpc: RpcClient<LmRequest, LmReplies, LmEvent>;

  /** Without arguments (in the page): starts the worker. Tests pass another transport. */
  constructor(private readonly worker: WorkerHandle = startLmWorker()) {
    this.rpc = new RpcClient(worker.endpoint, 'language-model worker');
    worker.onExit((reason) => this.rpc.fail(reason));
  }

  request<K extends LmRequest['kind']>(req: Extract<LmRequest, { kind: K }>): Promise<LmReplies[K]> {
    const transfer = req.kind === 'load' ? [...new Set(Object.values((req as Extract<LmRequest, { kind: 'load' }>).files))] : [];
    return this.rpc.request(req, transfer);
  }

  on(listener: (e: LmEvent) => void): () => void {
    return this.rpc.on(listener);
  }

  terminate(): void {
    this.rpc.fail('terminated');
    this.worker.terminate();
  }
}

function startLmWorker(): WorkerHandle {
  return webWorkerHandle(new Worker(new URL('./lm.worker.ts', import.meta.url), { type: 'module', name: 'selfcest-lm' }));
}
