/** The archive's store in the browser: one IndexedDB object store through idb-keyval (setMany is one transaction). */
import { createStore, delMany, get, keys, set, setMany } from 'idb-keyval';
import type { KeyValueStore } from './archive';

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

/** Null where the browser offers no IndexedDB (a private window of some browsers): the page then runs without saving. */
export function browserStore(): KeyValueStore | null {
  return typeof indexedDB === 'undefined' ? null : idbStore();
}
