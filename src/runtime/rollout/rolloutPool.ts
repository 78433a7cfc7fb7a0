/**
 * The pool of rollout workers: starts them, keeps every replica on the trainer's policy
 * version, and replaces a worker that died or lost its device.
 */
import type { ReplicaSpec } from '../../core/policyModel';
import type { WorkerHandle } from '../transport/endpoint';
import type { BackendReport } from '../engine/messages';
import type { RolloutEvent, RolloutReplies, RolloutRequest } from './rolloutMessages';
import { endWorkers, openWorker, startWorkers } from '../transport/poolMember';
import type { RpcClient } from '../transport/rpc';
import type { BackendPreference } from '../selectBackend';
import { type WeightPayload, payloadForReceiver } from '../transport/weights';

type Client = RpcClient<RolloutRequest, RolloutReplies, RolloutEvent>;

export interface PoolOptions {
  backend: BackendPreference;
  wasmPaths?: string;
}

interface Member {
  handle: WorkerHandle;
  client: Client;
  backend: BackendReport | null;
  /** Policy version this replica holds; -1 when it has none (new, or its device was lost). */
  version: number;
  dead: string | null;
}

export interface Weights {
  version: number;
  model: ReplicaSpec;
  payload: WeightPayload;
}

export class RolloutPool {
  private readonly members: Member[] = [];
  private readonly backendListeners = new Set<(index: number, report: BackendReport) => void>();
  private current: Weights | null = null;
  private closed = false;
  private nextContext = 0;

  private constructor(
    private readonly spawn: (index: number) => WorkerHandle,
    private readonly opts: PoolOptions,
  ) {}

  /** Starts `size` workers and selects their backends (in parallel). */
  static async start(spawn: (index: number) => WorkerHandle, size: number, opts: PoolOptions): Promise<RolloutPool> {
    if (!Number.isInteger(size) || size < 1 || size > 64) throw new Error(`pool: size must be an integer in [1, 64] (got ${size})`);
    const pool = new RolloutPool(spawn, opts);
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

  /** The version every healthy replica holds (-1 before the first broadcast). */
  get version(): number {
    return this.current?.version ?? -1;
  }

  get model(): ReplicaSpec | null {
    return this.current?.model ?? null;
  }

  backends(): (BackendReport | null)[] {
    return this.members.map((m) => m.backend);
  }

  /** Called when a worker reports a backend change (device lost → fallback). */
  onBackendChange(listener: (index: number, report: BackendReport) => void): () => void {
    this.backendListeners.add(listener);
    return () => this.backendListeners.delete(listener);
  }

  /** Sends new weights to every worker and waits until all hold them. */
  async broadcast(weights: Weights): Promise<void> {
    this.checkOpen();
    this.current = weights;
    await Promise.all(this.members.map((_, i) => this.sendWeights(i)));
  }

  /**
   * Replaces dead workers and re-sends the current weights to any replica that does not
   * hold them (after a device loss). Returns what was repaired, for the notes.
   */
  async repair(): Promise<string[]> {
    this.checkOpen();
    const notes: string[] = [];
    await Promise.all(
      this.members.map(async (m, i) => {
        if (m.dead !== null) {
          notes.push(`rollout worker ${i} restarted (${m.dead})`);
          m.handle.terminate();
          await this.startMember(i);
        }
        if (this.current !== null && this.members[i].version !== this.current.version) {
          if (m.dead === null) notes.push(`rollout worker ${i}: weights re-uploaded (version ${this.current.version})`);
          await this.sendWeights(i);
        }
      }),
    );
    return notes;
  }

  /** A context id no other decoder on this pool uses (workers key their contexts by it). */
  newContextId(): number {
    return this.nextContext++;
  }

  /** True when every worker is alive and on the current version. */
  get healthy(): boolean {
    return this.members.every((m) => m.dead === null && m.version === this.version);
  }

  request<K extends RolloutRequest['kind']>(index: number, req: Extract<RolloutRequest, { kind: K }>): Promise<RolloutReplies[K]> {
    this.checkOpen();
    const m = this.members[index];
    if (!m) throw new Error(`pool: no worker ${index}`);
    return m.client.request(req);
  }

  /** Marks a worker's replica as stale (it reported a lost device). */
  invalidate(index: number): void {
    const m = this.members[index];
    if (m) m.version = -1;
  }

  terminate(): void {
    if (this.closed) return;
    this.closed = true;
    endWorkers(this.members);
  }

  private checkOpen(): void {
    if (this.closed) throw new Error('pool: terminated');
  }

  private async startMember(index: number): Promise<void> {
    const { handle, client } = openWorker<RolloutRequest, RolloutReplies, RolloutEvent>(this.spawn, index, `rollout worker ${index}`);
    const member: Member = { handle, client, backend: null, version: -1, dead: null };
    this.members[index] = member;
    handle.onExit((reason) => {
      member.dead = reason;
      member.version = -1;
      client.fail(reason);
    });
    client.on((e) => {
      if (e.kind !== 'backend') return;
      member.backend = e.report;
      member.version = -1;
      for (const l of [...this.backendListeners]) l(index, e.report);
    });
    const r = await client.request({
      kind: 'init',
      backend: this.opts.backend,
      index,
      ...(this.opts.wasmPaths === undefined ? {} : { wasmPaths: this.opts.wasmPaths }),
    });
    member.backend = r.backend;
  }

  private async sendWeights(index: number): Promise<void> {
    const w = this.current;
    if (w === null) return;
    const m = this.members[index];
    const { payload, transfer } = payloadForReceiver(w.payload);
    await m.client.request({ kind: 'setWeights', version: w.version, model: w.model, weights: payload }, transfer);
    if (this.current === w) m.version = w.version;
  }
}
