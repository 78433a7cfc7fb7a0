/**
 * The page's handle on the engine. The engine (trainer + rollout workers) runs in a module
 * worker; the page sends typed requests and listens to events, and never runs model math.
 *
 *   const engine = new EngineClient();               // starts src/runtime/engine/engine.worker.ts
 *   const off = engine.on((e) => ...);               // backend, status, metrics, episodes, …
 *   const { backend, workers } = await engine.request({ kind: 'init', config });
 *   await engine.request({ kind: 'loadUrl', baseUrl: 'checkpoints/warmstart/' });
 *
 * Every request gets exactly one reply; an error reply rejects with its message. Relative
 * URLs (loadUrl's baseUrl, init's wasmPaths) are resolved against the page, since the worker
 * would resolve them against its own script. loadFiles moves (detaches) the ArrayBuffers.
 */
import { type WorkerHandle, webWorkerHandle } from '../transport/endpoint';
import type { EngineEvent, EngineReplies, EngineRequest, EngineRequestKind } from './messages';
import { RpcClient } from '../transport/rpc';

export interface EngineClientOptions {
  /** Base for relative URLs in requests (the page: document.baseURI). */
  baseUri?: string;
  /** Default wasm binaries folder for init when the request names none. */
  wasmPaths?: string;
}

export class EngineClient {
  private readonly rpc: RpcClient<EngineRequest, EngineReplies, EngineEvent>;
  private readonly listeners = new Set<(e: EngineEvent) => void>();
  private readonly worker: WorkerHandle;
  private readonly opts: EngineClientOptions;

  /** Without arguments (in the page): starts the engine worker. Tests pass another transport. */
  constructor(worker?: WorkerHandle, opts?: EngineClientOptions) {
    this.worker = worker ?? startEngineWorker();
    this.opts = opts ?? (worker === undefined ? pageDefaults() : {});
    this.rpc = new RpcClient(this.worker.endpoint, 'engine');
    this.rpc.on((e) => this.dispatch(e));
    this.worker.onExit((reason) => {
      this.rpc.fail(reason);
      this.dispatch({ kind: 'log', level: 'error', message: `engine: ${reason}` });
    });
  }

  request<K extends EngineRequestKind>(req: Extract<EngineRequest, { kind: K }>): Promise<EngineReplies[K]> {
    const prepared = this.prepare(req as EngineRequest) as Extract<EngineRequest, { kind: K }>;
    return this.rpc.request(prepared, transferables(prepared));
  }

  /** Calls `listener` with every event; returns a function that stops it. */
  on(listener: (e: EngineEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stops the engine and its rollout workers; pending requests reject. */
  terminate(): void {
    this.rpc.fail('terminated');
    this.worker.terminate();
  }

  private dispatch(e: EngineEvent): void {
    for (const l of [...this.listeners]) l(e);
  }

  private prepare(req: EngineRequest): EngineRequest {
    if (req.kind === 'loadUrl') return { ...req, baseUrl: this.resolve(req.baseUrl) };
    if (req.kind === 'init') {
      const wasmPaths = req.wasmPaths ?? this.opts.wasmPaths;
      return wasmPaths === undefined ? req : { ...req, wasmPaths: this.resolve(wasmPaths) };
    }
    return req;
  }

  private resolve(url: string): string {
    return this.opts.baseUri === undefined ? url : new URL(url, this.opts.baseUri).href;
  }
}

function transferables(req: EngineRequest): Transferable[] {
  if (req.kind !== 'loadFiles') return [];
  const buffers = Object.values(req.files).filter((b): b is ArrayBuffer => b instanceof ArrayBuffer);
  return [...new Set(buffers)];
}

function startEngineWorker(): WorkerHandle {
  return webWorkerHandle(new Worker(new URL('./engine.worker.ts', import.meta.url), { type: 'module', name: 'selfcest-engine' }));
}

function pageDefaults(): EngineClientOptions {
  const baseUri = typeof document === 'undefined' ? undefined : document.baseURI;
  return baseUri === undefined ? {} : { baseUri, wasmPaths: `${import.meta.env.BASE_URL}tfjs-wasm/` };
}
