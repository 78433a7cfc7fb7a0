/**
 * Request/reply over an Endpoint, the shape of the engine's messages (engine/messages.ts) for every channel in the runtime
 * (page ↔ engine, engine ↔ rollout worker): each request carries an id and gets exactly one
 * reply, ok or error; the serving side may also send events at any time. A handler that
 * throws becomes an error reply; nothing is thrown across the boundary.
 */
import type { Endpoint } from './endpoint';

export interface RequestEnvelope<R> {
  type: 'request';
  id: number;
  request: R;
}

export type ReplyEnvelope =
  | { type: 'reply'; id: number; ok: true; result: unknown }
  /** `code` lets callers tell error classes apart (e.g. 'device-lost'); the text is for people. */
  | { type: 'reply'; id: number; ok: false; error: string; code?: string };

export interface EventEnvelope<E> {
  type: 'event';
  event: E;
}

/** An error reply as the requesting side sees it. */
export class RpcError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'RpcError';
  }
}

/** An error with a machine-readable code that survives the trip through a reply. */
export class CodedError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'CodedError';
  }
}

/** What a handler returns: the result and the buffers to move with it. */
export interface Reply<T> {
  result: T;
  transfer?: Transferable[];
}

export function reply<T>(result: T, transfer?: Transferable[]): Reply<T> {
  return transfer === undefined ? { result } : { result, transfer };
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null;
}

export class RpcClient<Req extends { kind: string }, Replies extends { [K in Req['kind']]: unknown }, Ev> {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly listeners = new Set<(e: Ev) => void>();
  private failure: string | null = null;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly endpoint: Endpoint,
    /** Prefix of error messages about the channel itself (e.g. "rollout worker 2"). */
    private readonly name: string,
  ) {
    this.unsubscribe = endpoint.onMessage((data) => this.receive(data));
  }

  request<K extends Req['kind']>(req: Extract<Req, { kind: K }>, transfer?: Transferable[]): Promise<Replies[K]> {
    if (this.failure !== null) return Promise.reject(new RpcError(this.failure, 'closed'));
    const id = this.nextId++;
    const envelope: RequestEnvelope<Req> = { type: 'request', id, request: req };
    return new Promise<Replies[K]>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      try {
        this.endpoint.postMessage(envelope, transfer);
      } catch (e) {
        this.pending.delete(id);
        reject(new RpcError(`${this.name}: could not send ${req.kind}: ${(e as Error).message}`));
      }
    });
  }

  on(listener: (e: Ev) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Rejects every pending and later request (the other side died or was terminated). */
  fail(reason: string): void {
    if (this.failure !== null) return;
    this.failure = `${this.name}: ${reason}`;
    for (const p of this.pending.values()) p.reject(new RpcError(this.failure, 'closed'));
    this.pending.clear();
    this.unsubscribe();
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  private receive(data: unknown): void {
    if (!isObject(data)) return;
    if (data.type === 'event') {
      const event = (data as unknown as EventEnvelope<Ev>).event;
      for (const l of [...this.listeners]) l(event);
      return;
    }
    if (data.type !== 'reply' || typeof data.id !== 'number') return;
    const r = data as unknown as ReplyEnvelope;
    const p = this.pending.get(r.id);
    if (!p) return;
    this.pending.delete(r.id);
    if (r.ok) p.resolve(r.result);
    else p.reject(new RpcError(r.error, r.code));
  }
}

export interface RpcServer<Ev> {
  emit(event: Ev, transfer?: Transferable[]): void;
  stop(): void;
}

/**
 * Answers requests arriving on `endpoint` with `handler`. Requests are handled concurrently
 * (a long 'train' does not block 'pause'); ordering between them is the handler's business.
 */
export function serveRpc<Req extends { kind: string }, Ev>(endpoint: Endpoint, handler: (req: Req) => Promise<Reply<unknown>>): RpcServer<Ev> {
  const send = (message: unknown, transfer?: Transferable[]) => {
    try {
      endpoint.postMessage(message, transfer);
    } catch (e) {
      // An unclonable result must still produce a reply.
      if (isObject(message) && message.type === 'reply' && typeof message.id === 'number') {
        endpoint.postMessage({ type: 'reply', id: message.id, ok: false, error: `reply could not be sent: ${(e as Error).message}` });
      }
    }
  };
  const stop = endpoint.onMessage((data) => {
    if (!isObject(data) || data.type !== 'request' || typeof data.id !== 'number') return;
    const id = data.id;
    const request = data.request;
    if (!isObject(request) || typeof request.kind !== 'string') {
      send({ type: 'reply', id, ok: false, error: 'request must be an object with a string "kind"' });
      return;
    }
    let pending: Promise<Reply<unknown>>;
    try {
      pending = Promise.resolve(handler(request as Req));
    } catch (e) {
      pending = Promise.reject(e);
    }
    pending.then(
      (r) => send({ type: 'reply', id, ok: true, result: r.result }, r.transfer),
      (e: unknown) => {
        const error = e instanceof Error ? e.message : String(e);
        const code = e instanceof CodedError || e instanceof RpcError ? e.code : undefined;
        send(code === undefined ? { type: 'reply', id, ok: false, error } : { type: 'reply', id, ok: false, error, code });
      },
    );
  });
  return {
    emit: (event, transfer) => send({ type: 'event', event } satisfies EventEnvelope<Ev>, transfer),
    stop,
  };
}
