/**
 * The gradient workers of a trainer (data parallel, one optimizer): starts them, brings them
 * onto the trainer's weights before each update that shares its gradient, hands out their
 * remotes for SFT and for GRPO, and replaces a worker that died. Size 0 is a pool that computes
 * nothing elsewhere (every remote list is empty).
 */
import * as tf from '@tensorflow/tfjs';
import type { ReplicaSpec } from '../../core/policyModel';
import { paramsToArrays } from '../../core/model/params';
import type { RemoteLogprobs, RemotePolicyGradients } from '../../core/rl/ppoLoss';
import type { RemoteGradients } from '../../core/sft/sft';
import { DEFAULT_PATIENCE, type Patience, canShareMemory } from '../../core/parallel/shares';
import type { GradientShare } from '../../core/rl/grpoStep';
import type { WorkerHandle } from '../transport/endpoint';
import { type GradReplies, type GradRequest, wireItems } from './gradWorker';
import type { BackendReport } from '../engine/messages';
import { endWorkers, openWorker, startWorkers } from '../transport/poolMember';
import type { RpcClient } from '../transport/rpc';
import type { PoolOptions } from '../rollout/rolloutPool';
import { packWeights, payloadForReceiver } from '../transport/weights';

type Client = RpcClient<GradRequest, GradReplies, never>;

export interface GradPoolOptions extends PoolOptions {
  /** How long the workers get once the trainer has no items left to take (core/parallel/shares.ts; default DEFAULT_PATIENCE). */
  patience?: Patience;
}

/** Takes a worker out of service (once): its thread ends, its requests in flight fail with `reason`. */
function putDown(m: Member, reason: string): void {
  if (m.dead !== null) return;
  m.dead = reason;
  m.handle.terminate();
  m.client.fail(reason);
}

interface Member {
  handle: WorkerHandle;
  client: Client;
  backend: BackendReport | null;
  /** Why the worker is out of service (null: alive). */
  dead: string | null;
  /** The weights version it holds (0: none yet). */
  version: number;
  /** The reference it holds, by tag (null: none). */
  reference: number | null;
}

export class GradPool {
  private readonly members: Member[] = [];
  /** Version of the weights last sent; every live worker holds it once `sync` has resolved. */
  private version = 0;
  /** The reference the workers hold (by identity), and its tag. */
  private reference: { params: ReadonlyMap<string, tf.Tensor>; id: number } | null = null;
  private nextReference = 0;
  private closed = false;

  private constructor(
    private readonly spawn: (index: number) => WorkerHandle,
    private readonly opts: GradPoolOptions,
  ) {}

  /** How long the workers may take once the trainer's items are done (GradPoolOptions.patience; undefined: the default). */
  get patience(): Patience | undefined {
    return this.opts.patience;
  }

  /** Starts `size` workers (0 to 64) and selects their backends, in parallel. */
  static async start(spawn: (index: number) => WorkerHandle, size: number, opts: GradPoolOptions): Promise<GradPool> {
    if (!Number.isInteger(size) || size < 0 || size > 64) throw new Error(`gradient workers: the count must be an integer in [0, 64] (got ${size})`);
    const pool = new GradPool(spawn, opts);
    await startWorkers(
      size,
      (i) => pool.startMember(i),
      () => pool.terminate(),
    );
    return pool;
  }

  get size(): number {
    return this.members.length;
  }

  backends(): (BackendReport | null)[] {
    return this.members.map((m) => m.backend);
  }

  /** Why each worker out of service stopped ("gradient worker i: reason"); its share is computed by the trainer. */
  failures(): string[] {
    return this.members.flatMap((m, i) => (m.dead === null ? [] : [`gradient worker ${i}: ${m.dead}`]));
  }

  /** True when every worker is alive. */
  get healthy(): boolean {
    return this.members.every((m) => m.dead === null);
  }

  /**
   * Sends `params` (as they are now) to every live worker and waits until they hold them.
   * `hostCopy`: the same weights already read back to the host (the copy a step's start broadcast
   * to the rollout workers), sent instead of reading them again.
   */
  async sync(params: ReadonlyMap<string, tf.Tensor>, model: ReplicaSpec, hostCopy?: ReadonlyMap<string, Float32Array>): Promise<void> {
    this.checkOpen();
    if (this.members.length === 0) return;
    const version = ++this.version;
    const weights = packWeights(hostCopy ?? (await paramsToArrays(params)), canShareMemory());
    await Promise.all(
      this.members.map(async (m) => {
        const { payload, transfer } = payloadForReceiver(weights);
        if ((await this.ask(m, { kind: 'weights', model, version, weights: payload }, transfer, this.syncLimitMs())) !== null) m.version = version;
      }),
    );
  }

  /** The workers' SFT remotes, on the weights of the last `sync` (null: the worker is gone, compute its micro-batches here). */
  sftRemotes(): RemoteGradients[] {
    return this.members.map((m) => async (batches, totalWeight, labelSmoothing, claims, signal) => {
      const r =
        m.version === this.version
          ? await this.ask(m, { kind: 'grads', version: this.version, batches, totalWeight, labelSmoothing, claims }, undefined, signal)
          : null;
      return r === null ? null : wireItems(r.items);
    });
  }

  /** The workers' GRPO remotes, on the weights of the last `sync` (null: the worker is gone). */
  policyRemotes(): RemotePolicyGradients[] {
    return this.members.map((m) => async (batches, loss, claims, signal) => {
      const r = m.version === this.version ? await this.ask(m, { kind: 'policyGrads', version: this.version, batches, loss, claims }, undefined, signal) : null;
      return r === null ? null : wireItems(r.items);
    });
  }

  /** Sends the frozen KL reference to every live worker that does not hold this very one (by identity). */
  async syncReference(ref: ReadonlyMap<string, tf.Tensor>, model: ReplicaSpec): Promise<void> {
    this.checkOpen();
    if (this.members.length === 0) return;
    if (this.reference?.params !== ref) this.reference = { params: ref, id: ++this.nextReference };
    const { id } = this.reference;
    const behind = this.members.filter((m) => m.dead === null && m.reference !== id);
    if (behind.length === 0) return;
    const weights = packWeights(await paramsToArrays(ref), canShareMemory());
    await Promise.all(
      behind.map(async (m) => {
        const { payload, transfer } = payloadForReceiver(weights);
        if ((await this.ask(m, { kind: 'reference', model, id, weights: payload }, transfer, this.syncLimitMs())) !== null) m.reference = id;
      }),
    );
  }

  /** The workers' reference passes, on the reference of the last `syncReference` (null: the worker is gone). */
  referenceRemotes(): RemoteLogprobs[] {
    return this.members.map((m) => async (seqs, temperature, maxTokens, signal) => {
      const id = this.reference?.id;
      if (id === undefined || m.reference !== id) return null;
      // Only what the pass reads goes over the wire.
      const slim = seqs.map((s) => ({ tokens: s.tokens, actions: s.actions, oldLogprobs: [], advantage: 0, weight: s.weight }));
      const r = await this.ask(m, { kind: 'refLogprobs', id, seqs: slim, temperature, maxTokens }, undefined, signal);
      return r === null ? null : r.logprobs;
    });
  }

  /**
   * One request to a worker. A worker that fails it (its thread ended, its device was lost, it
   * refused) or that is given up on (`giveUpOn`: the caller's signal, core/parallel/shares.ts, or a time limit in ms) is
   * put down and reported dead: the caller does that work itself, so an update in flight
   * completes with the same result, and `repair` restarts the worker before the next step. Null
   * then; a dead worker is not asked at all. The pool's own termination still throws.
   */
  private async ask<K extends GradRequest['kind']>(
    m: Member,
    req: Extract<GradRequest, { kind: K }>,
    transfer?: Transferable[],
    giveUpOn?: AbortSignal | number,
  ): Promise<GradReplies[K] | null> {
    if (m.dead !== null) return null;
    // Given up on: the caller's signal (core/parallel/shares.ts), or no answer within a time limit (ms).
    const signal = typeof giveUpOn === 'number' ? undefined : giveUpOn;
    const why = () =>
      typeof giveUpOn === 'number' ? `no answer within ${(giveUpOn / 1000).toFixed(1)} s` : ((signal?.reason as Error | undefined)?.message ?? 'given up');
    const giveUp = () => putDown(m, `${why()} (${req.kind})`);
    const timer = typeof giveUpOn === 'number' ? setTimeout(giveUp, giveUpOn) : undefined;
    signal?.addEventListener('abort', giveUp, { once: true });
    try {
      return await m.client.request(req, transfer);
    } catch (e) {
      this.checkOpen();
      putDown(m, (e as Error).message);
      return null;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', giveUp);
    }
  }

  /**
   * What grpoStep takes (TrainerDeps.gradients) for a policy the workers rebuild as `model`; undefined without workers.
   * `startCopy`: the weights the step starts from, already on the host (what the rollout workers
   * were sent); the first sync sends it instead of reading the weights back again. Make the share
   * at the step's start, before any update, for the copy to be right.
   */
  share(model: ReplicaSpec, startCopy?: ReadonlyMap<string, Float32Array>): GradientShare | undefined {
    if (this.members.length === 0) return undefined;
    // The step's first sync sends the weights it starts from: the host copy, when there is one.
    let first = startCopy;
    return {
      sync: (params) => {
        const copy = first;
        first = undefined;
        return this.sync(params, model, copy);
      },
      remotes: this.policyRemotes(),
      syncReference: (ref) => this.syncReference(ref, model),
      referenceRemotes: this.referenceRemotes(),
      ...(this.opts.patience ? { patience: this.opts.patience } : {}),
    };
  }

  /** Replaces dead workers (they get weights at the next `sync`). Returns what was repaired, for the notes. */
  async repair(): Promise<string[]> {
    this.checkOpen();
    const notes: string[] = [];
    await Promise.all(
      this.members.map(async (m, i) => {
        if (m.dead === null) return;
        notes.push(`gradient worker ${i} restarted (${m.dead})`);
        m.handle.terminate();
        await this.startMember(i);
      }),
    );
    return notes;
  }

  terminate(): void {
    if (this.closed) return;
    this.closed = true;
    endWorkers(this.members);
  }

  /** A weight transfer has no work of the trainer's to compare with: it gets the patience of work done at once (ms). */
  private syncLimitMs(): number {
    return (this.opts.patience ?? DEFAULT_PATIENCE)(0);
  }

  private checkOpen(): void {
    if (this.closed) throw new Error('gradient workers: terminated');
  }

  private async startMember(index: number): Promise<void> {
    const { handle, client } = openWorker<GradRequest, GradReplies, never>(this.spawn, index, `gradient worker ${index}`);
    const member: Member = { handle, client, backend: null, dead: null, version: 0, reference: null };
    this.members[index] = member;
    handle.onExit((reason) => {
      member.dead ??= reason; // a worker put down keeps the reason it was put down for
      client.fail(reason);
    });
    try {
      const r = await client.request({
        kind: 'init',
        backend: this.opts.backend,
        ...(this.opts.wasmPaths === undefined ? {} : { wasmPaths: this.opts.wasmPaths }),
      });
      member.backend = r.backend;
    } catch (e) {
      member.dead ??= (e as Error).message; // a restart that failed is tried again at the next repair
      throw e;
    }
  }
}
