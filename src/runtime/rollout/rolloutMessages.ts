/**
 * Messages between the engine (trainer) and one rollout worker, carried by rpc.ts.
 *
 * A rollout worker holds a replica of the weights, tagged with a policy version, and many
 * contexts in one batched decoder (the toy's BatchedDecoder, or HfContextDecoder). Context ids are chosen by the engine's PooledDecoder (unique
 * across the pool); opens and closes ride along with the next feed, so one step costs one
 * message per worker.
 */
import type { ReplicaSpec } from '../../core/policyModel';
import type { BackendReport } from '../engine/messages';
import type { BackendPreference } from '../selectBackend';
import type { WeightPayload } from '../transport/weights';

export type RolloutRequest =
  /** Select this worker's backend. */
  | { kind: 'init'; backend: BackendPreference; wasmPaths?: string; index: number }
  /** Replace the weights (and the model when `model` differs); contexts stay open. */
  | { kind: 'setWeights'; version: number; model: ReplicaSpec; weights: WeightPayload }
  /**
   * Open the contexts in `open`, close those in `close`, then append tokens[i] to slots[i] and
   * return the logits after each one's last token (exactly ContextDecoder.feed).
   */
  | { kind: 'feed'; open: number[]; close: number[]; slots: number[]; tokens: number[][] }
  /** Close every context. */
  | { kind: 'reset' }
  /** Behave as if the GPU device were lost (for tests of the recovery path). */
  | { kind: 'loseDevice' };

export interface RolloutReplies {
  init: { backend: BackendReport };
  setWeights: { version: number };
  feed: { logits: Float32Array; version: number };
  reset: { closed: number };
  loseDevice: { backend: BackendReport };
}

export type RolloutEvent =
  /** The device was lost and the worker switched backend; it needs weights again. */
  { kind: 'backend'; report: BackendReport };

/** Error code of replies from a worker that lost its device (or has no weights since). */
export const DEVICE_LOST = 'device-lost';
