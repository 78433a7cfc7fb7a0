/**
 * The rollout scheduler's decoder, spread over a pool of workers.
 *
 * Every context (a root or a clone) is placed on the worker holding the fewest live contexts
 * when it is opened, so the clones of one root land on different workers and run in parallel.
 * A feed is split by worker, sent to all of them at once (each worker runs its share as one
 * batch), and the logits come back in the caller's order. Opens and closes are sent with the
 * worker's next feed: open/close stay synchronous, as ContextDecoder requires.
 */
import { type ReplicaSpec, replicaShape } from '../../core/policyModel';
import type { Protocol } from '../../core/protocol/protocol';
import type { ContextDecoder } from '../../core/rollout/scheduler';
import type { RolloutPool } from './rolloutPool';
import { DEVICE_LOST } from './rolloutMessages';
import { RpcError } from '../transport/rpc';

export class PooledDecoder implements ContextDecoder {
  readonly vocabSize: number;
  readonly maxPositions: number;
  /** Live context → its worker. */
  private readonly home = new Map<number, number>();
  private readonly live: number[];
  private readonly pendingOpen: Set<number>[];
  private readonly pendingClose: number[][];

  constructor(
    private readonly pool: RolloutPool,
    model: ReplicaSpec,
    /** The model's protocol where it carries one (a Hugging Face model's text protocol); absent: the scheduler's token grammar. */
    readonly protocol?: Protocol,
  ) {
    ({ vocabSize: this.vocabSize, maxPositions: this.maxPositions } = replicaShape(model));
    this.live = new Array<number>(pool.size).fill(0);
    this.pendingOpen = Array.from({ length: pool.size }, () => new Set<number>());
    this.pendingClose = Array.from({ length: pool.size }, () => []);
  }

  open(): number {
    let best = 0;
    for (let w = 1; w < this.live.length; w++) if (this.live[w] < this.live[best]) best = w;
    const id = this.pool.newContextId();
    this.home.set(id, best);
    this.live[best]++;
    this.pendingOpen[best].add(id);
    return id;
  }

  close(slot: number): void {
    const w = this.home.get(slot);
    if (w === undefined) throw new Error(`pooled decoder: context ${slot} is not open`);
    this.home.delete(slot);
    this.live[w]--;
    // Never fed: the worker has not heard of it.
    if (!this.pendingOpen[w].delete(slot)) this.pendingClose[w].push(slot);
  }

  /** The worker a live context runs on (for tests and the live view). */
  workerOf(slot: number): number | undefined {
    return this.home.get(slot);
  }

  /** Live contexts per worker. */
  load(): number[] {
    return [...this.live];
  }

  async feed(slots: number[], tokens: number[][]): Promise<Float32Array> {
    if (slots.length !== tokens.length) throw new Error(`pooled decoder: feed got ${slots.length} slots but ${tokens.length} token lists`);
    const byWorker = new Map<number, number[]>();
    slots.forEach((slot, i) => {
      const w = this.home.get(slot);
      if (w === undefined) throw new Error(`pooled decoder: context ${slot} is not open`);
      const rows = byWorker.get(w) ?? [];
      rows.push(i);
      byWorker.set(w, rows);
    });
    const vocab = this.vocabSize;
    const out = new Float32Array(slots.length * vocab);
    const expected = this.pool.version;
    await Promise.all(
      [...byWorker].map(async ([w, rows]) => {
        // Contexts closed before their first feed were dropped from pendingOpen in close().
        const open = [...this.pendingOpen[w]];
        const close = this.pendingClose[w];
        this.pendingOpen[w].clear();
        this.pendingClose[w] = [];
        const r = await this.pool
          .request(w, { kind: 'feed', open, close, slots: rows.map((i) => slots[i]), tokens: rows.map((i) => tokens[i]) })
          .catch((e: unknown) => {
            // Its replica is gone: pool.repair() must send the weights again before the next use.
            if (e instanceof RpcError && e.code === DEVICE_LOST) this.pool.invalidate(w);
            throw e;
          });
        if (r.version !== expected) {
          throw new Error(`pooled decoder: rollout worker ${w} answered with policy version ${r.version}, expected ${expected}`);
        }
        rows.forEach((i, k) => out.set(r.logits.subarray(k * vocab, (k + 1) * vocab), i * vocab));
      }),
    );
    return out;
  }

  /** Forgets every context here and in the workers (after a failed rollout). */
  async reset(): Promise<void> {
    this.home.clear();
    this.live.fill(0);
    this.pendingOpen.forEach((s) => s.clear());
    this.pendingClose.forEach((c) => (c.length = 0));
    await Promise.all(
      this.live.map((_, w) =>
        this.pool.request(w, { kind: 'reset' }).catch(() => {
          // A worker that cannot answer is replaced by pool.repair(); it holds nothing then.
        }),
      ),
    );
  }
}
