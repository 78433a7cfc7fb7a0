/** Endpoint and WorkerHandle over Node's worker_threads (ports deliver data, not events). */
import type { MessagePort, TransferListItem, Worker } from 'node:worker_threads';
import type { Endpoint, WorkerHandle } from '../transport/endpoint';

export function nodeEndpoint(port: MessagePort | Worker): Endpoint {
  return {
    postMessage: (message, transfer = []) => port.postMessage(message, transfer as unknown as TransferListItem[]),
    onMessage(listener) {
      const handler = (data: unknown) => listener(data);
      port.on('message', handler);
      return () => port.off('message', handler);
    },
  };
}

/** A worker thread's handle; `thread` is the Worker itself (a test ends it as a crash would). */
export interface NodeWorkerHandle extends WorkerHandle {
  thread: Worker;
}

export function nodeWorkerHandle(worker: Worker): NodeWorkerHandle {
  let exited = false;
  return {
    thread: worker,
    endpoint: nodeEndpoint(worker),
    onExit(listener) {
      const onError = (e: Error) => listener(`worker error: ${e.message}`);
      const onExit = (code: number) => {
        if (!exited) listener(`worker exited with code ${code}`);
      };
      worker.on('error', onError);
      worker.on('exit', onExit);
      return () => {
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
    },
    terminate() {
      exited = true;
      void worker.terminate();
    },
  };
}
