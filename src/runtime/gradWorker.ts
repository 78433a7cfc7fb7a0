/**
 * A gradient worker for data parallelism: a weight replica that computes the gradients of the
 * micro-batches it is given, for the warm start (SFT) or for a GRPO update. The trainer keeps
 * the only optimizer; before each update that shares it sends the weights the update starts
 * from (one shared buffer where memory can be shared), then this worker's share.
 */
import * as tf from '@tensorflow/tfjs';
import { type ModelConfig, sameModel } from '../core/model/config';
import { type GPTParams, paramsFromArrays } from '../core/model/params';
import { type PackedBatch, type PolicyLossConfig, type RlSequence, type TokenSums, actionLogprobs, policyGradients } from '../core/rl/grpo';
import { sftGradients } from '../core/rl/sft';
import type { PaddedBatch } from '../core/rl/sequences';
import type { Endpoint } from './endpoint';
import type { BackendReport } from './protocol';
import { reply, serveRpc } from './rpc';
import type { BackendPreference } from './selectBackend';
import { type WeightPayload, packWeights, unpackWeights } from './weights';

export type GradRequest =
  | { kind: 'init'; backend: BackendPreference; wasmPaths?: string }
  | { kind: 'weights'; model: ModelConfig; version: number; weights: WeightPayload }
  | { kind: 'grads'; version: number; batches: PaddedBatch[]; totalWeight: number }
  | { kind: 'policyGrads'; version: number; batches: PackedBatch[]; loss: PolicyLossConfig }
  /** The frozen KL reference (kept apart from the policy weights), tagged `id`. */
  | { kind: 'reference'; model: ModelConfig; id: number; weights: WeightPayload }
  | { kind: 'refLogprobs'; id: number; seqs: RlSequence[]; temperature: number; maxTokens: number };

export interface GradReplies {
  init: { backend: BackendReport };
  weights: { version: number };
  grads: { loss: number; grads: WeightPayload };
  policyGrads: { loss: number; sums: TokenSums; grads: WeightPayload };
  reference: { id: number };
  refLogprobs: { logprobs: number[][] };
}

/** The gradients as one private buffer, transferred back (the tensors are disposed). */
async function packGrads(grads: Map<string, tf.Tensor>): Promise<WeightPayload> {
  const arrays = new Map<string, Float32Array>();
  try {
    for (const [name, g] of grads) arrays.set(name, (await g.data()) as Float32Array);
  } finally {
    grads.forEach((g) => g.dispose());
  }
  return packWeights(arrays, false);
}

export function serveGradWorker(endpoint: Endpoint, select: (pref: BackendPreference, wasmPaths: string | undefined) => Promise<BackendReport>): void {
  let params: GPTParams | null = null;
  let model: ModelConfig | null = null;
  let version = -1;
  let reference: { id: number; model: ModelConfig; params: GPTParams } | null = null;
  const ready = (asked: number): { params: GPTParams; model: ModelConfig } => {
    if (params === null || model === null) throw new Error('grad worker: no weights yet');
    if (asked !== version) throw new Error(`grad worker: holds version ${version}, asked for ${asked}`);
    return { params, model };
  };
  serveRpc<GradRequest, never>(endpoint, async (req) => {
    switch (req.kind) {
      case 'init':
        return reply({ backend: await select(req.backend, req.wasmPaths) });
      case 'weights': {
        const arrays = unpackWeights(req.weights);
        if (params === null || model === null || !sameModel(model, req.model)) {
          // Validates names, sizes and finiteness before anything is replaced.
          const next = paramsFromArrays(req.model, arrays);
          params?.forEach((v) => v.dispose());
          params = next;
          model = { ...req.model };
        } else {
          const p = params;
          for (const [name] of p) if (!arrays.has(name)) throw new Error(`grad worker: weights without ${name}`);
          tf.tidy(() => {
            for (const [name, v] of p) v.assign(tf.tensor(arrays.get(name) as Float32Array, v.shape));
          });
        }
        version = req.version;
        return reply({ version });
      }
      case 'grads': {
        const r = ready(req.version);
        const { grads, loss } = await sftGradients(r.params, r.model, req.batches, req.totalWeight);
        const packed = await packGrads(grads);
        return reply({ loss, grads: packed }, [packed.buffer as ArrayBuffer]);
      }
      case 'policyGrads': {
        const r = ready(req.version);
        const { grads, loss, sums } = await policyGradients(r.params, r.model, req.batches, req.loss);
        const packed = await packGrads(grads);
        return reply({ loss, sums, grads: packed }, [packed.buffer as ArrayBuffer]);
      }
      case 'reference': {
        const next = paramsFromArrays(req.model, unpackWeights(req.weights), { trainable: false });
        reference?.params.forEach((v) => v.dispose());
        reference = { id: req.id, model: { ...req.model }, params: next };
        return reply({ id: req.id });
      }
      case 'refLogprobs': {
        if (reference === null || reference.id !== req.id) throw new Error(`grad worker: holds reference ${reference?.id ?? 'none'}, asked for ${req.id}`);
        return reply({ logprobs: await actionLogprobs(reference.params, reference.model, req.seqs, req.temperature, req.maxTokens) });
      }
      default:
        throw new Error(`grad worker: unknown request kind ${JSON.stringify((req as { kind: unknown }).kind)}`);
    }
  });
}
