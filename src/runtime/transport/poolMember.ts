/** What the rollout and gradient pools share about their members: starting one, and ending them all. */
import type { WorkerHandle } from './endpoint';
import { RpcClient } from './rpc';

/** Starts worker `index` and its RPC client (errors about the channel name it `label`). */
export function openWorker<Req extends { kind: string }, Replies extends { [K in Req['kind']]: unknown }, Ev>(
  spawn: (index: number) => WorkerHandle,
  index: number,
  label: string,
): { handle: WorkerHandle; client: RpcClient<Req, Replies, Ev> } {
  const handle = spawn(index);
  return { handle, client: new RpcClient<Req, Replies, Ev>(handle.endpoint, label) };
}

/** Ends every member: requests in flight and later ones fail with "pool terminated". */
export function endWorkers(members: readonly { handle: WorkerHandle; client: { fail(reason: string): void } }[]): void {
  for (const m of members) {
    m.client.fail('pool terminated');
    m.handle.terminate();
  }
}

/** Starts members 0 … size − 1 in parallel; if one fails, ends the pool and rethrows. */
export async function startWorkers(size: number, start: (index: number) => Promise<void>, terminate: () => void): Promise<void> {
  try {
    await Promise.all(Array.from({ length: size }, (_, i) => start(i)));
  } catch (e) {
    terminate();
    throw e;
  }
}
