/**
 * The rollout worker's logic, independent of how it is hosted (web entry: rollout.worker.ts;
 * Node: node/rolloutWorkerMain.ts): a weight replica (the toy's or a Hugging Face decoder's) and
 * its batched decoder holding every context the pool placed here, so all of them advance in one
 * batched pass per feed.
 */
import * as tf from '@tensorflow/tfjs';
import { BatchedDecoder } from '../../core/model/decode';
import { HfContextDecoder } from '../../core/model/hfContextDecoder';
import { type ReplicaSpec, replicaFromArrays, sameReplica } from '../../core/policyModel';
import type { ContextDecoder } from '../../core/rollout/scheduler';
import { type Alarm, alarm } from '../transport/async';
import type { Endpoint } from '../transport/endpoint';
import type { BackendReport } from '../engine/messages';
import { DEVICE_LOST, type RolloutEvent, type RolloutReplies, type RolloutRequest } from './rolloutMessages';
import { CodedError, type Reply, type RpcServer, reply, serveRpc } from '../transport/rpc';
import { type BackendPreference, fallBackAfterLoss, selectBackend, watchDeviceLoss } from '../selectBackend';
import { unpackWeights } from '../transport/weights';

export interface RolloutWorkerOptions {
  /** How this thread picks its backend (Node maps 'auto' to wasm). */
  select?: (pref: BackendPreference, wasmPaths: string | undefined) => Promise<BackendReport>;
}

type Handlers = { [K in RolloutRequest['kind']]: (req: Extract<RolloutRequest, { kind: K }>) => Promise<Reply<RolloutReplies[K]>> };

/** The batched decoder of a replica's kind over its weights. */
function decoderOf(spec: ReplicaSpec, params: Map<string, tf.Variable>): ContextDecoder & { dispose(): void } {
  return spec.kind === 'toy' ? new BatchedDecoder(params, spec.config, { capacity: 16 }) : new HfContextDecoder(params, spec.config);
}

class Replica {
  private model: ReplicaSpec | null = null;
  private params: Map<string, tf.Variable> | null = null;
  private decoder: (ContextDecoder & { dispose(): void }) | null = null;
  /** Pool context id → decoder slot. */
  private readonly slotOf = new Map<number, number>();
  private version = -1;
  private wasmPaths: string | undefined;
  private stopWatching: () => void = () => {};
  /** Rejects in-flight feeds when the device goes (a lost device can hang a readback). */
  private lostSignal: Alarm = alarm();
  private recovering: Promise<BackendReport> | null = null;
  server: RpcServer<RolloutEvent> | null = null;

  constructor(private readonly select: NonNullable<RolloutWorkerOptions['select']>) {}

  readonly handlers: Handlers = {
    init: async (req) => {
      this.wasmPaths = req.wasmPaths;
      const backend = await this.select(req.backend, req.wasmPaths);
      this.watch();
      return reply({ backend });
    },
    setWeights: async (req) => {
      if (this.recovering) await this.recovering;
      const arrays = unpackWeights(req.weights);
      if (this.params === null || this.model === null || !sameReplica(this.model, req.model)) {
        // Validates names, sizes and finiteness before anything is replaced.
        const params = replicaFromArrays(req.model, arrays, false).params as Map<string, tf.Variable>;
        this.dropModel();
        this.model = req.model;
        this.params = params;
        this.decoder = decoderOf(this.model, params);
      } else {
        const params = this.params;
        for (const [name] of params) if (!arrays.has(name)) throw new Error(`weights: missing tensor ${name}`);
        tf.tidy(() => {
          for (const [name, v] of params) v.assign(tf.tensor(arrays.get(name) as Float32Array, v.shape));
        });
      }
      this.version = req.version;
      return reply({ version: this.version });
    },
    feed: async (req) => {
      const decoder = this.ready();
      for (const id of req.close) {
        // Unknown ids were dropped with a lost device or a new model: already closed.
        const slot = this.slotOf.get(id);
        if (slot === undefined) continue;
        decoder.close(slot);
        this.slotOf.delete(id);
      }
      for (const id of req.open) {
        if (this.slotOf.has(id)) throw new Error(`rollout worker: context ${id} is already open`);
        this.slotOf.set(id, decoder.open());
      }
      const slots = req.slots.map((id) => {
        const slot = this.slotOf.get(id);
        if (slot === undefined) throw new Error(`rollout worker: context ${id} is not open here`);
        return slot;
      });
      const logits = await Promise.race([decoder.feed(slots, req.tokens), this.lostSignal.promise]);
      return reply({ logits, version: this.version }, [logits.buffer]);
    },
    reset: async () => {
      const closed = this.slotOf.size;
      if (this.decoder !== null) for (const slot of this.slotOf.values()) this.decoder.close(slot);
      this.slotOf.clear();
      return reply({ closed });
    },
    loseDevice: async () => reply({ backend: await this.onLost('simulated device loss') }),
  };

  private ready(): ContextDecoder {
    if (this.recovering !== null || this.decoder === null) {
      throw new CodedError(DEVICE_LOST, this.model === null ? 'rollout worker: no weights yet' : 'rollout worker: device lost; waiting for weights');
    }
    return this.decoder;
  }

  private watch(): void {
    this.stopWatching();
    this.stopWatching = watchDeviceLoss((reason) => void this.onLost(reason));
  }

  /** Fails in-flight work, switches backend, and waits for the pool to send weights again. */
  private onLost(reason: string): Promise<BackendReport> {
    if (this.recovering) return this.recovering;
    this.lostSignal.fire(new CodedError(DEVICE_LOST, `rollout worker: device lost (${reason})`));
    this.recovering = (async () => {
      this.stopWatching();
      this.dropModel();
      const report = await fallBackAfterLoss(reason, this.wasmPaths === undefined ? {} : { wasmPaths: this.wasmPaths });
      this.watch();
      this.lostSignal = alarm();
      this.server?.emit({ kind: 'backend', report });
      return report;
    })().finally(() => {
      this.recovering = null;
    });
    return this.recovering;
  }

  private dropModel(): void {
    try {
      this.decoder?.dispose();
      this.params?.forEach((v) => v.dispose());
    } catch {
      // Tensors of a lost device may fail to free; they are unreachable either way.
    }
    this.decoder = null;
    this.params = null;
    this.slotOf.clear();
  }
}

/** Serves the rollout protocol on `endpoint` until the thread ends. */
export function serveRolloutWorker(endpoint: Endpoint, opts: RolloutWorkerOptions = {}): RpcServer<RolloutEvent> {
  const replica = new Replica(opts.select ?? ((pref, wasmPaths) => selectBackend(pref, wasmPaths === undefined ? {} : { wasmPaths })));
  const server = serveRpc<RolloutRequest, RolloutEvent>(endpoint, (req) => {
    const handler = Object.hasOwn(replica.handlers, req.kind) ? (replica.handlers[req.kind] as (r: RolloutRequest) => Promise<Reply<unknown>>) : undefined;
    if (!handler) return Promise.reject(new Error(`rollout worker: unknown request kind ${JSON.stringify(req.kind)}`));
    return handler(req);
  });
  replica.server = server;
  return server;
}
