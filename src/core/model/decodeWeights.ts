/**
 * The decoder's view of the weights: derived once per weight version, with each LayerNorm's
 * affine part folded into the projection after it.
 */
import * as tf from '@tensorflow/tfjs';
import type { ModelConfig } from './config';
import { param, splitAttention } from './gpt';
import type { GPTParams } from './params';

/**
 * Weights as the decoder uses them. Each LayerNorm's gain and bias are folded into the
 * projection that follows it (LN(x)·W + c = n(x)·(g⊙W) + (b·W + c), n = plain normalisation),
 * which removes two ops per LayerNorm from the hot loop.
 */
export interface LayerWeights {
  wq: tf.Tensor2D;
  bq: tf.Tensor1D;
  wk: tf.Tensor2D;
  bk: tf.Tensor1D;
  wv: tf.Tensor2D;
  bv: tf.Tensor1D;
  wo: tf.Tensor2D;
  bo: tf.Tensor1D;
  wfc: tf.Tensor2D;
  bfc: tf.Tensor1D;
  wproj: tf.Tensor2D;
  bproj: tf.Tensor1D;
}

export interface Weights {
  /** [V + P, d]: wte rows then wpe rows; a row with two ones gives token + position embedding. */
  embed: tf.Tensor2D;
  /** Tied head wteᵀ [d, V] with ln_f folded in (pre-transposed for the fast matMul path). */
  head: tf.Tensor2D;
  headBias: tf.Tensor1D;
  layers: LayerWeights[];
  /** Storage identity of every variable when these were derived. */
  sources: object[];
}

/** g⊙W and b·W + c: a projection that absorbs the LayerNorm (gain g, bias b) before it. */
function foldNorm(gain: tf.Tensor1D, bias: tf.Tensor1D, w: tf.Tensor2D, c: tf.Tensor1D | null): [tf.Tensor2D, tf.Tensor1D] {
  const [rows, cols] = w.shape;
  const shifted = tf.reshape(tf.matMul(tf.reshape(bias, [1, rows]), w), [cols]);
  // Always a fresh add: the wasm fused matMul checks the rank of the bias's storage, and a
  // reshape keeps the matMul's rank-3 storage.
  return [tf.mul(w, tf.reshape(gain, [rows, 1])), tf.add(shifted, c ?? tf.zeros([cols]))];
}

export function deriveWeights(params: GPTParams, config: ModelConfig): Omit<Weights, 'sources'> {
  let derived: Omit<Weights, 'sources'> | null = null;
  tf.tidy(() => {
    const wte = param<tf.Tensor2D>(params, 'transformer.wte.weight');
    const wpe = param<tf.Tensor2D>(params, 'transformer.wpe.weight');
    const layers = Array.from({ length: config.nLayer }, (_, i): LayerWeights => {
      const p = `transformer.h.${i}`;
      const g1 = param<tf.Tensor1D>(params, `${p}.ln_1.weight`);
      const b1 = param<tf.Tensor1D>(params, `${p}.ln_1.bias`);
      const { wq, bq, wk, bk, wv, bv } = splitAttention(params, config, i);
      const [wq2, bq2] = foldNorm(g1, b1, wq, bq);
      const [wk2, bk2] = foldNorm(g1, b1, wk, bk);
      const [wv2, bv2] = foldNorm(g1, b1, wv, bv);
      const [wfc, bfc] = foldNorm(
        param<tf.Tensor1D>(params, `${p}.ln_2.weight`),
        param<tf.Tensor1D>(params, `${p}.ln_2.bias`),
        param<tf.Tensor2D>(params, `${p}.mlp.c_fc.weight`),
        param<tf.Tensor1D>(params, `${p}.mlp.c_fc.bias`),
      );
      return {
        wq: wq2,
        bq: bq2,
        wk: wk2,
        bk: bk2,
        wv: wv2,
        bv: bv2,
        wfc,
        bfc,
        // Plain copies so that every tensor here is owned (and disposed) by the decoder.
        wo: tf.clone(param<tf.Tensor2D>(params, `${p}.attn.c_proj.weight`)),
        bo: tf.clone(param<tf.Tensor1D>(params, `${p}.attn.c_proj.bias`)),
        wproj: tf.clone(param<tf.Tensor2D>(params, `${p}.mlp.c_proj.weight`)),
        bproj: tf.clone(param<tf.Tensor1D>(params, `${p}.mlp.c_proj.bias`)),
      };
    });
    const [head, headBias] = foldNorm(
      param<tf.Tensor1D>(params, 'transformer.ln_f.weight'),
      param<tf.Tensor1D>(params, 'transformer.ln_f.bias'),
      tf.transpose(wte),
      null,
    );
    derived = { embed: tf.concat([wte, wpe], 0), head, headBias, layers };
    for (const t of ownedTensors(derived)) tf.keep(t);
  });
  return derived as unknown as Omit<Weights, 'sources'>;
}

function ownedTensors(w: Omit<Weights, 'sources'>): tf.Tensor[] {
  return [w.embed, w.head, w.headBias, ...w.layers.flatMap((l) => Object.values(l) as tf.Tensor[])];
}

export function disposeWeights(w: Weights): void {
  tf.dispose(ownedTensors(w));
}
