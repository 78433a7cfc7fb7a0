/**
 * Kept runs in a key-value store: one record per run under `run-<id>` (keptRun.ts checks what is
 * read back). In the page the store is its own IndexedDB database: idb-keyval opens one object
 * store per database, and the session's database already holds its own. A run is written whole
 * in one put, so a reload in the middle sees it or not, never half.
 */
import type { KeyValueStore } from '../session/archive';
import { idbStore } from '../session/idbStore';
import { type KeptRun, fromKeptRecord, toKeptRecord } from './keptRun';

export const RUNS_DB = 'selfcest-playground-runs';
export const RUNS_STORE = 'runs';
const PREFIX = 'run-';

/** A stored run that could not be read: its key and why (it stays stored until deleted). */
export interface UnreadableRun {
  key: string;
  message: string;
}

export class KeptRunStore {
  constructor(private readonly kv: KeyValueStore) {}

  /** Every kept run, oldest first, and those that could not be read. */
  async list(): Promise<{ runs: KeptRun[]; unreadable: UnreadableRun[] }> {
    const keys = (await this.kv.keys()).filter((k) => k.startsWith(PREFIX));
    const runs: KeptRun[] = [];
    const unreadable: UnreadableRun[] = [];
    for (const key of keys) {
      try {
        const run = fromKeptRecord(await this.kv.get(key), key);
        if (`${PREFIX}${run.id}` !== key) throw new Error(`kept run ${key}: its id ${JSON.stringify(run.id)} does not match its key`);
        runs.push(run);
      } catch (e) {
        unreadable.push({ key, message: (e as Error).message });
      }
    }
    runs.sort((a, b) => (a.keptAt < b.keptAt ? -1 : a.keptAt > b.keptAt ? 1 : 0));
    return { runs, unreadable };
  }

  /** Stores a run (a new one, or a renamed one under its id). */
  async put(run: KeptRun): Promise<void> {
    await this.kv.set(`${PREFIX}${run.id}`, toKeptRecord(run));
  }

  async delete(id: string): Promise<void> {
    await this.kv.delMany([`${PREFIX}${id}`]);
  }

  /** Deletes records that could not be read (the user asked to). */
  async deleteKeys(keys: readonly string[]): Promise<void> {
    await this.kv.delMany(keys.filter((k) => k.startsWith(PREFIX)));
  }
}

/** Null where the browser offers no IndexedDB: the page then keeps no runs (and says so). */
export function browserRunStore(): KeptRunStore | null {
  return typeof indexedDB === 'undefined' ? null : new KeptRunStore(idbStore(RUNS_DB, RUNS_STORE));
}
