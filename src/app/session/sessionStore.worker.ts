/**
 * The saved session's IndexedDB, off the main thread: the page's archive sends its reads and
 * writes here (workerStore in idbStore.ts), so that serialising a save's megabytes of weights
 * and optimizer moments into IndexedDB never blocks the page (it did: a ~200 ms long task per
 * save with the moments). One request at a time, in order; each answered once.
 */
import { idbStore } from './idbStore';
import type { StoreReply, StoreRequest } from './storeMessages';

const scope = self as unknown as { onmessage: ((e: MessageEvent<StoreRequest>) => void) | null; postMessage(m: StoreReply): void };
const stores = new Map<string, ReturnType<typeof idbStore>>();
let queue: Promise<unknown> = Promise.resolve();

scope.onmessage = (e) => {
  const req = e.data;
  queue = queue.then(async () => {
    try {
      const key = `${req.db}/${req.store}`;
      let kv = stores.get(key);
      if (kv === undefined) stores.set(key, (kv = idbStore(req.db, req.store)));
      const result = await run(kv, req);
      scope.postMessage({ id: req.id, ok: true, result });
    } catch (err) {
      scope.postMessage({ id: req.id, ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  });
};

function run(kv: ReturnType<typeof idbStore>, req: StoreRequest): Promise<unknown> {
  switch (req.op) {
    case 'get':
      return kv.get(req.key);
    case 'set':
      return kv.set(req.key, req.value);
    case 'setMany':
      return kv.setMany(req.entries);
    case 'delMany':
      return kv.delMany(req.keys);
    case 'keys':
      return kv.keys();
  }
}
