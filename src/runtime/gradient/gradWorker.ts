/**
 * A gradient worker for data parallelism: a weight replica that computes the gradients of the
 * micro-batches it is given, for the warm start (SFT) or for a GRPO update. The trainer keeps
 * the only optimizer; before each update that shares it sends the weights the update starts
 * from (one shared buffer where memory can be shared), then the update's micro-batches, of
 * which this worker computes those it claims and sends back each one's gradients apart.
 */
import { type ReplicaSpec, type Scorer, replicaFromArrays, sameReplica } from '../../core/policyModel';
import * as tf from '@tensorflow/tfjs';
import { type GradItem, type GradItemAway, readGradItem } from '../../core/parallel/grads';
import { type PackedBatch, type PolicyLossConfig, type RlSequence, actionLogprobs, policyItem } from '../../core/rl/ppoLoss';
import { type Claims, claimer } from '../../core/parallel/shares';
import { scorerLearner, toyLearner } from '../../core/sft/sft';
import type { PaddedBatch } from '../../core/parallel/sequences';
import type { Endpoint } from '../transport/endpoint';
import type { BackendReport } from '../engine/messages';
import { reply, serveRpc } from '../transport/rpc';
import type { BackendPreference } from '../selectBackend';
import { type WeightPayload, packWeights, unpackWeights } from '../transport/weights';

export type GradRequest =
  | { kind: 'init'; backend: BackendPreference; wasmPaths?: string }
  | { kind: 'weights'; model: ReplicaSpec; version: number; weights: WeightPayload }
  /** The micro-batches of a step; this worker computes those it claims (core/parallel/shares.ts `claimer`). */
  | { kind: 'grads'; version: number; batches: PaddedBatch[]; totalWeight: number; labelSmoothing: number; claims: Claims }
  | { kind: 'policyGrads'; version: number; batches: PackedBatch[]; loss: PolicyLossConfig; claims: Claims }
  /** The frozen KL reference (kept apart from the policy weights), tagged `id`. */
  | { kind: 'reference'; model: ReplicaSpec; id: number; weights: WeightPayload }
  | { kind: 'refLogprobs'; id: number; seqs: RlSequence[]; temperature: number; maxTokens: number };

export interface GradReplies {
  init: { backend: BackendReport };
  weights: { version: number };
  grads: { items: WireItem[] };
  policyGrads: { items: WireItem[] };
  reference: { id: number };
  refLogprobs: { logprobs: number[][] };
}

/** One micro-batch's result on the wire: its index, scalars, and gradients as one private buffer (transferred). */
export interface WireItem {
  index: number;
  scalars: number[];
  grads: WeightPayload;
}

/** Computes the items this worker claims, one at a time, and packs each for the wire. */
async function claimedItems(claims: Claims, count: number, compute: (index: number) => GradItem): Promise<{ items: WireItem[]; transfer: ArrayBuffer[] }> {
  const items: WireItem[] = [];
  const next = claimer(claims);
  for (let i = next(); i >= 0; i = next()) {
    if (i >= count) throw new Error(`grad worker: claimed item ${i} of ${count}`);
    const r = await readGradItem(compute(i));
    items.push({ index: i, scalars: r.scalars, grads: packWeights(r.grads, false) });
  }
  return { items, transfer: items.map((it) => it.grads.buffer as ArrayBuffer) };
}

/** A worker's items by index, as core/parallel/shares.ts `computeQueue` takes them. */
export function wireItems(items: readonly WireItem[]): Map<number, GradItemAway> {
  return new Map(items.map((it) => [it.index, { scalars: it.scalars, grads: unpackWeights(it.grads) }]));
}

/** A rebuilt model: its spec and scorer; the toy's SFT item is its own (label smoothing reads every logit). */
interface Replica {
  spec: ReplicaSpec;
  scorer: Scorer;
}

const learnerOf = (r: Replica) => (r.spec.kind === 'toy' ? toyLearner(r.scorer.params as Map<string, tf.Variable>, r.spec.config) : scorerLearner(r.scorer));

const disposeReplica = (r: Replica | null) => r?.scorer.params.forEach((v) => v.dispose());

export function serveGradWorker(endpoint: Endpoint, select: (pref: BackendPreference, wasmPaths: string | undefined) => Promise<BackendReport>): void {
  let replica: Replica | null = null;
  let version = -1;
  let reference: { id: number; replica: Replica } | null = null;
  const ready = (asked: number): Replica => {
    if (replica === null) throw new Error('grad worker: no weights yet');
    if (asked !== version) throw new Error(`grad worker: holds version ${version}, asked for ${asked}`);
    return replica;
  };
  serveRpc<GradRequest, never>(endpoint, async (req) => {
    switch (req.kind) {
      case 'init':
        return reply({ backend: await select(req.backend, req.wasmPaths) });
      case 'weights': {
        const arrays = unpackWeights(req.weights);
        if (replica === null || !sameReplica(replica.spec, req.model)) {
          // Validates names, sizes and finiteness before anything is replaced.
          const next = { spec: req.model, scorer: replicaFromArrays(req.model, arrays) };
          disposeReplica(replica);
          replica = next;
        } else {
          const p = replica.scorer.params;
          for (const [name] of p) if (!arrays.has(name)) throw new Error(`grad worker: weights without ${name}`);
          tf.tidy(() => {
            for (const [name, v] of p) v.assign(tf.tensor(arrays.get(name) as Float32Array, v.shape));
          });
        }
        version = req.version;
        return reply({ version });
      }
      case 'grads': {
        const learner = learnerOf(ready(req.version));
        const { items, transfer } = await claimedItems(req.claims, req.batches.length, (i) =>
          learner.item(req.batches[i], req.totalWeight, req.labelSmoothing),
        );
        return reply({ items }, transfer);
      }
      case 'policyGrads': {
        const r = ready(req.version);
        const { items, transfer } = await claimedItems(req.claims, req.batches.length, (i) => policyItem(r.scorer, req.batches[i], req.loss));
        return reply({ items }, transfer);
      }
      case 'reference': {
        const next = { spec: req.model, scorer: replicaFromArrays(req.model, unpackWeights(req.weights), false) };
        disposeReplica(reference?.replica ?? null);
        reference = { id: req.id, replica: next };
        return reply({ id: req.id });
      }
      case 'refLogprobs': {
        if (reference === null || reference.id !== req.id) throw new Error(`grad worker: holds reference ${reference?.id ?? 'none'}, asked for ${req.id}`);
        return reply({ logprobs: await actionLogprobs(reference.replica.scorer, req.seqs, req.temperature, req.maxTokens) });
      }
      default:
        throw new Error(`grad worker: unknown request kind ${JSON.stringify((req as { kind: unknown }).kind)}`);
    }
  });
}
