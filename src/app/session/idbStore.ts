/**
 * The archive's store in the browser: one IndexedDB object store through idb-keyval (setMany is
 * one transaction), used directly (idbStore) or from a worker (workerStore: the session's, whose
 * saves carry megabytes that would otherwise be serialised on the main thread).
 */
import { createStore, delMany, get, keys, set, setMany } from 'idb-keyval';
import type { KeyValueStore } from './archive';
import type { StoreOp, StoreReply } from './storeMessages';

export const SESSION_DB = 'selfcest-playground';
export const SESSION_STORE = 'session';

export function idbStore(dbName: string = SESSION_DB, storeName: string = SESSION_STORE): KeyValueStore {
  const store = createStore(dbName, storeName);
  return {
    get: (key) => get(key, store),
    set: (key, value) => set(key, value, store),
    setMany: (entries) => setMany(entries, store),
    delMany: (list) => delMany(list, store),
    keys: () => keys<string>(store),
  };
}

/**
 * The bytes of a write's file sets (values that are objects of Uint8Arrays), moved to the worker
 * rather than copied: copying a save's ~10 MB on the main thread took 20–100 ms (`bench page`).
 * The caller gives them up: afterwards they are empty (archive.ts, KeyValueStore.setMany).
 */
function movedBuffers(entries: readonly [string, unknown][]): ArrayBuffer[] {
  const out = new Set<ArrayBuffer>();
  for (const [, v] of entries) {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) continue;
    for (const x of Object.values(v)) if (x instanceof Uint8Array && x.buffer instanceof ArrayBuffer && x.byteLength > 0) out.add(x.buffer);
  }
  return [...out];
}

/** The same store, served by sessionStore.worker.ts: every call a message, answered in order. */
export function workerStore(worker: Worker, dbName: string = SESSION_DB, storeName: string = SESSION_STORE): KeyValueStore {
  let next = 0;
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  worker.addEventListener('message', (e: MessageEvent<StoreReply>) => {
    const r = e.data;
    const w = waiting.get(r.id);
    if (w === undefined) return;
    waiting.delete(r.id);
    if (r.ok) w.resolve(r.result);
    else w.reject(new Error(r.error));
  });
  worker.addEventListener('error', (e) => {
    for (const w of waiting.values()) w.reject(new Error(`session store worker failed: ${e.message}`));
    waiting.clear();
  });
  const call = <T>(op: StoreOp, transfer: ArrayBuffer[] = []): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      worker.postMessage({ ...op, id, db: dbName, store: storeName }, transfer);
    });
  return {
    get: (key) => call({ op: 'get', key }),
    set: (key, value) => call({ op: 'set', key, value }),
    setMany: (entries) => call({ op: 'setMany', entries }, movedBuffers(entries)),
    delMany: (list) => call({ op: 'delMany', keys: list }),
    keys: () => call({ op: 'keys' }),
  };
}
