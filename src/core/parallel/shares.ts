/**
 * Work shared with remote workers (the gradient workers of runtime/gradient/gradPool.ts). The gradients
 * of the SFT step and of a GRPO update go through `computeQueue`: each micro-batch is taken by
 * whichever thread is free, and the results are folded in micro-batch order, so the sum is the
 * same bits whoever computed what. The reference pass of the KL term (a result per sequence, no
 * sum) goes through `computeShares`: share 0 on this thread, share k on remote k − 1. Pure (no
 * workers here: a remote is a function).
 */

/**
 * A remote's answer for one share; null: its worker is gone, so the share is computed here.
 * `signal` aborts when the remote is given up on (no answer in time): the remote should then put
 * its worker down, since its late answer is no longer read.
 */
export type Remote<S, A> = (share: S, signal: AbortSignal) => Promise<A | null>;

/** How long to wait for the remotes once this thread's share is done, from the time that share took (ms). */
export type Patience = (localMs: number) => number;

/** A remote whose share is about as large as this thread's gets 30 s plus ten times this thread's time. */
export const DEFAULT_PATIENCE: Patience = (localMs) => 30_000 + 10 * localMs;

export interface ShareWork<S, R, A> {
  /** A share with nothing to compute: neither sent nor computed (share 0 is computed whatever it holds). */
  isEmpty(share: S): boolean;
  /** Computes a share on this thread. */
  here(share: S): Promise<R>;
  /** Folds share k's result (computed here, or a remote's answer) into `acc`, share 0's result; it owns what it is given. */
  add(acc: R, k: number, result: { here: R } | { away: A }): void;
  /** Frees `acc` when a later share fails. */
  release?(acc: R): void;
}

const SKIPPED = Symbol('skipped');
const HUNG = Symbol('hung');

/**
 * Share 0 here, share k (k ≥ 1) on `remotes[k − 1]`: every remote with a non-empty share starts
 * first, then this thread computes share 0, then each remote's answer is folded in, in share
 * order. A remote that answers null, or gives no answer within `patience` of share 0's time (it
 * hangs: its signal is aborted), has its share computed here instead, so the result is what a
 * single thread would get. A remote that fails fails the whole: `acc` is released and the error
 * goes on (the remotes' own failures surface after share 0 is done, never unhandled).
 */
export async function computeShares<S, R, A>(
  shares: readonly S[],
  remotes: readonly Remote<S, A>[],
  work: ShareWork<S, R, A>,
  patience: Patience = DEFAULT_PATIENCE,
): Promise<R> {
  if (shares.length !== remotes.length + 1) throw new Error(`computeShares: ${shares.length} shares for ${remotes.length} remotes and this thread`);
  const controllers = remotes.map(() => new AbortController());
  const away = remotes.map((remote, i) => (work.isEmpty(shares[i + 1]) ? Promise.resolve(SKIPPED) : remote(shares[i + 1], controllers[i].signal)));
  // Awaited below, one by one; a failure must not go unhandled while this thread computes.
  for (const a of away) a.catch(() => {});
  const t0 = Date.now();
  const acc = await work.here(shares[0]);
  const waitMs = patience(Date.now() - t0);
  const deadline = Date.now() + waitMs;
  try {
    for (let i = 0; i < away.length; i++) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<typeof HUNG>((resolve) => (timer = setTimeout(() => resolve(HUNG), Math.max(0, deadline - Date.now()))));
      const a = await Promise.race([away[i], late]).finally(() => clearTimeout(timer));
      if (a === SKIPPED) continue;
      if (a === HUNG) controllers[i].abort(new Error(`no answer within ${(waitMs / 1000).toFixed(1)} s of this thread's share`));
      work.add(acc, i + 1, a === null || a === HUNG ? { here: await work.here(shares[i + 1]) } : { away: a });
    }
  } catch (e) {
    work.release?.(acc);
    throw e;
  }
  return acc;
}

/** True when a SharedArrayBuffer can be posted between threads here (Node; a cross-origin-isolated page and its workers). */
export function canShareMemory(): boolean {
  if (typeof SharedArrayBuffer === 'undefined' || typeof Atomics === 'undefined') return false;
  // Node has no crossOriginIsolated and always shares; in the browser it must be true.
  const isolated = (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated;
  return isolated !== false;
}

/**
 * Which items a thread computes: the next of `order` not yet taken by any thread (`counter`, a
 * shared Int32Array, counts the items taken), or, where threads cannot share memory, a fixed list.
 */
export type Claims = { order: readonly number[]; counter: Int32Array } | { fixed: readonly number[] };

/** The next item a thread computes under `claims` (−1: none left). */
export function claimer(claims: Claims): () => number {
  if ('fixed' in claims) {
    let k = 0;
    return () => (k < claims.fixed.length ? claims.fixed[k++] : -1);
  }
  return () => {
    const k = Atomics.add(claims.counter, 0, 1);
    return k < claims.order.length ? claims.order[k] : -1;
  };
}

/** A remote's results by item index, for the items it claimed; null: its worker is gone (its items are computed here). */
export type QueueRemote<A> = (claims: Claims, signal: AbortSignal) => Promise<ReadonlyMap<number, A> | null>;

/** How the items of a queue are handed out: `order` to claim from, `shares` (one a thread, this one first) where memory is not shared. */
export interface QueuePlan {
  order: readonly number[];
  shares: readonly (readonly number[])[];
}

/** What `computeQueue` does with the items: compute one here, fold one (in index order, taking it over), free one never folded. */
export interface QueueWork<R, A> {
  here(index: number): Promise<R>;
  fold(index: number, result: { here: R } | { away: A }): void;
  release(result: R): void;
}

/**
 * Items 0 … n − 1 (n = `plan.order.length`) computed by this thread and the remotes: where
 * memory can be shared (`shared`, default `canShareMemory()`), every thread takes the next item
 * of `plan.order` when it is free; otherwise thread k computes `plan.shares[k]`. Each result is
 * folded in index order as soon as every item before it is folded (alone, this thread folds each
 * item as it is done; with remotes it holds the items it computed until the remotes' items
 * before them are in). A remote that answers null or does not answer within `patience` of this
 * thread's own items (its signal is aborted) has its items computed here; one that fails, or
 * answers for an item it cannot have, fails the whole (the remotes still working are given up
 * on, and the results not folded are released). A result is the same whichever thread computed
 * it, so the fold is the same bits however the items were spread.
 */
export async function computeQueue<R, A>(
  plan: QueuePlan,
  remotes: readonly QueueRemote<A>[],
  work: QueueWork<R, A>,
  opts: { patience?: Patience; shared?: boolean } = {},
): Promise<void> {
  const n = plan.order.length;
  if (plan.shares.length !== remotes.length + 1) throw new Error(`computeQueue: ${plan.shares.length} shares for ${remotes.length} remotes and this thread`);
  const shared = remotes.length > 0 && (opts.shared ?? canShareMemory());
  const counter = shared ? new Int32Array(new SharedArrayBuffer(4)) : null;
  const claimsOf = (k: number): Claims => (counter ? { order: plan.order, counter } : { fixed: plan.shares[k] });
  const results = new Array<{ here: R } | { away: A } | undefined>(n);
  let folded = 0;
  const foldReady = () => {
    for (; folded < n && results[folded] !== undefined; folded++) {
      // Cleared once folded: an item whose fold throws stays here, to be released.
      work.fold(folded, results[folded] as { here: R } | { away: A });
      results[folded] = undefined;
    }
  };
  const controllers = remotes.map(() => new AbortController());
  const away = remotes.map((remote, i) =>
    !counter && plan.shares[i + 1].length === 0 ? Promise.resolve(SKIPPED) : remote(claimsOf(i + 1), controllers[i].signal),
  );
  for (const a of away) a.catch(() => {});
  try {
    const t0 = Date.now();
    const next = claimer(claimsOf(0));
    for (let i = next(); i >= 0; i = next()) {
      results[i] = { here: await work.here(i) };
      foldReady();
    }
    const waitMs = (opts.patience ?? DEFAULT_PATIENCE)(Date.now() - t0);
    const deadline = Date.now() + waitMs;
    for (let k = 0; k < away.length; k++) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<typeof HUNG>((resolve) => (timer = setTimeout(() => resolve(HUNG), Math.max(0, deadline - Date.now()))));
      const a = await Promise.race([away[k], late]).finally(() => clearTimeout(timer));
      if (a === HUNG) controllers[k].abort(new Error(`no answer within ${(waitMs / 1000).toFixed(1)} s of this thread's items`));
      if (a === SKIPPED || a === HUNG || a === null) continue;
      const mine = counter ? null : new Set(plan.shares[k + 1]);
      for (const [i, result] of a) {
        if (!(Number.isInteger(i) && i >= 0 && i < n) || (mine && !mine.has(i)))
          throw new Error(`computeQueue: remote ${k} answered item ${i}, which it was not given (${n} items)`);
        if (results[i] !== undefined || i < folded) throw new Error(`computeQueue: remote ${k} answered item ${i}, which another thread also computed`);
        results[i] = { away: result };
      }
      foldReady();
    }
    // The items of a remote that is gone or given up on.
    while (folded < n) {
      results[folded] = { here: await work.here(folded) };
      foldReady();
    }
  } catch (e) {
    for (const c of controllers) if (!c.signal.aborted) c.abort(new Error('the update failed'));
    for (const r of results) if (r && 'here' in r) work.release(r.here);
    throw e;
  }
}
