/**
 * Work shared with remote workers (the gradient workers of runtime/gradPool.ts): the SFT step,
 * the policy gradients of a GRPO update and the reference pass of its KL term all split their
 * sequences into shares, compute share 0 on this thread and send share k to remote k − 1.
 * `computeShares` is that pattern once. Pure (no workers here: a remote is a function).
 */
import * as tf from '@tensorflow/tfjs';
import { addInto } from './grads';

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
export async function computeShares<S, R, A>(shares: readonly S[], remotes: readonly Remote<S, A>[], work: ShareWork<S, R, A>, patience: Patience = DEFAULT_PATIENCE): Promise<R> {
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

/**
 * Adds one share's gradients into `sums` (share 0's): tensors computed here (taken over), or a
 * remote's flat arrays by parameter name, shaped as the parameters.
 */
export function addShareGrads(
  sums: Map<string, tf.Tensor>,
  result: { here: { grads: Map<string, tf.Tensor> } } | { away: { grads: ReadonlyMap<string, Float32Array> } },
  params: ReadonlyMap<string, tf.Variable>,
): void {
  if ('here' in result) {
    for (const [name, g] of result.here.grads) addInto(sums, name, g);
    return;
  }
  for (const [name, data] of result.away.grads) {
    const v = params.get(name);
    if (!v) throw new Error(`gradient worker: a gradient for ${name}, which the policy does not have`);
    addInto(sums, name, tf.tensor(data, v.shape));
  }
}
