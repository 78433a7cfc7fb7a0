/** Messages between the page and the session store worker (sessionStore.worker.ts). */
export type StoreOp =
  | { op: 'get'; key: string }
  | { op: 'set'; key: string; value: unknown }
  | { op: 'setMany'; entries: [string, unknown][] }
  | { op: 'delMany'; keys: string[] }
  | { op: 'keys' };

export type StoreRequest = StoreOp & { id: number; db: string; store: string };

export type StoreReply = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };
