/** Which store the page's saved session uses (kept apart from idbStore.ts, which the store worker itself imports). */
import type { KeyValueStore } from './archive';
import { idbStore, workerStore } from './idbStore';

/**
 * The session's store: in its worker where the browser has workers, else on this thread; null
 * where the browser offers no IndexedDB (a private window of some browsers): the page then runs
 * without saving.
 */
export function browserStore(): KeyValueStore | null {
  if (typeof indexedDB === 'undefined') return null;
  if (typeof Worker === 'undefined') return idbStore();
  return workerStore(new Worker(new URL('./sessionStore.worker.ts', import.meta.url), { type: 'module', name: 'selfcest-session-store' }));
}
