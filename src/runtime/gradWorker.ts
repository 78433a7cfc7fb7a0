/**
 * A gradient worker for data-parallel SFT: a weight replica that computes the gradients of
 * the micro-batches it is given. The trainer keeps the only optimizer; after each update it
 * sends the new weights (one shared buffer) and the next step's share of micro-batches.
 */
import * as tf from '@tensorflow/tfjs';
import type { ModelConfig } from '../core/model/config';
import { type GPTParams, paramsFromArrays } from '../core/model/params';
import { sftGradients } from '../core/rl/sft';
import type { PaddedBatch } from '../core/rl/sequences';
import type { Endpoint } from './endpoint';
import type { BackendReport } from './protocol';
import { reply, serveRpc } from './rpc';
import type { BackendPreference } from './selectBackend';
import { type WeightPayload, packWeights, unpackWeights } from './weights';

export type GradRequest =
  | { kind: 'init'; backend: BackendPreference }
  | { kind: 'weights'; model: ModelConfig; version: number; weights: WeightPayload }
  | { kind: 'grads'; version: number; batches: PaddedBatch[]; totalWeight: number };

export interface GradReplies {
  init: { backend: BackendReport };
  weights: { version: number };
  grads: { loss: number; grads: WeightPayload };
}

export function serveGradWorker(endpoint: Endpoint, select: (pref: BackendPreference) => Promise<BackendReport>): void {
  let params: GPTParams | null = null;
  let model: ModelConfig | null = null;
  let version = -1;
  serveRpc<GradRequest, never>(endpoint, async (req) => {
    switch (req.kind) {
      case 'init':
        return reply({ backend: await select(req.backend) });
      case 'weights': {
        const arrays = unpackWeights(req.weights);
        if (params === null) {
          params = paramsFromArrays(req.model, arrays);
          model = req.model;
        } else {
          const p = params;
          tf.tidy(() => {
            for (const [name, v] of p) v.assign(tf.tensor(arrays.get(name) as Float32Array, v.shape));
          });
        }
        version = req.version;
        return reply({ version });
      }
      case 'grads': {
        if (params === null || model === null) throw new Error('grad worker: no weights yet');
        if (req.version !== version) throw new Error(`grad worker: holds version ${version}, asked for ${req.version}`);
        const { grads, loss } = await sftGradients(params, model, req.batches, req.totalWeight);
        const arrays = new Map<string, Float32Array>();
        for (const [name, g] of grads) arrays.set(name, (await g.data()) as Float32Array);
        grads.forEach((g) => g.dispose());
        const packed = packWeights(arrays, false);
        return reply({ loss, grads: packed }, [packed.buffer as ArrayBuffer]);
      }
    }
  });
}
