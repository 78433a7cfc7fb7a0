/**
 * One end of a message channel, whatever carries it: a Web Worker, a MessagePort, the
 * worker's own global scope, or (src/runtime/node/nodeEndpoint.ts) a worker_threads port.
 * Everything above this file is written against Endpoint and runs in the page, in workers
 * and in Node alike.
 */

export interface Endpoint {
  /** Sends a structured-clonable message; `transfer` moves the listed buffers (detaching them here). */
  postMessage(message: unknown, transfer?: Transferable[]): void;
  /** Calls `listener` with each incoming message's data; returns an unsubscribe function. */
  onMessage(listener: (data: unknown) => void): () => void;
}

/** A started worker (rollout or engine): its endpoint, how to stop it, how it can die. */
export interface WorkerHandle {
  endpoint: Endpoint;
  /** Calls `listener` once if the worker crashes or exits; returns an unsubscribe function. */
  onExit(listener: (reason: string) => void): () => void;
  terminate(): void;
}

/** What the web adapter needs: Worker, MessagePort and DedicatedWorkerGlobalScope all have this. */
export interface WebMessageTarget {
  postMessage(message: unknown, transfer: Transferable[]): void;
  addEventListener(type: 'message', listener: (e: MessageEvent) => void): void;
  removeEventListener(type: 'message', listener: (e: MessageEvent) => void): void;
  /** MessagePort only: listeners added with addEventListener need it. */
  start?: () => void;
}

export function webEndpoint(target: WebMessageTarget): Endpoint {
  target.start?.();
  return {
    postMessage: (message, transfer = []) => target.postMessage(message, transfer),
    onMessage(listener) {
      const handler = (e: MessageEvent) => listener(e.data);
      target.addEventListener('message', handler);
      return () => target.removeEventListener('message', handler);
    },
  };
}

/** A browser Worker as a WorkerHandle (errors and failed loads count as exits). */
export function webWorkerHandle(worker: Worker): WorkerHandle {
  return {
    endpoint: webEndpoint(worker),
    onExit(listener) {
      const onError = (e: ErrorEvent) => listener(`worker error: ${e.message || 'failed to load or crashed'}`);
      const onMessageError = () => listener('worker message could not be deserialised');
      worker.addEventListener('error', onError);
      worker.addEventListener('messageerror', onMessageError);
      return () => {
        worker.removeEventListener('error', onError);
        worker.removeEventListener('messageerror', onMessageError);
      };
    },
    terminate: () => worker.terminate(),
  };
}
