/**
 * One cached decode layer as a single kernel (`SelfcestDecodeLayer`), and LayerNorm's plain
 * normalisation as one (`SelfcestRowNorm`).
 *
 * Composed of tfjs ops, a layer of a single-token decode step is about 60 kernel calls (two
 * LayerNorms of seven ops, GELU of six, the reshapes around attention, …), and on wasm a call's
 * dispatch costs about as much as the arithmetic of a `small` layer at 32 rows. The kernel runs
 * the same arithmetic as `BatchedDecoder`'s composed layer in one call: normalise, q/k/v, write
 * k and v into the caches in place (as `SelfcestCacheWrite`), masked softmax attention over the
 * cache, output projection and residual, normalise, MLP with GELU, residual. Only wasm has it
 * (src/runtime/wasmKernels/decodeLayer.ts); elsewhere, and for prefills and row selections, the
 * decoder keeps the composed ops, which are also the reference its tests compare against.
 */
import * as tf from '@tensorflow/tfjs';
import { kernelSwitch } from '../kernelSwitch';
import type { LayerWeights } from './decodeWeights';

export const DECODE_LAYER_KERNEL = 'SelfcestDecodeLayer';
export const ROW_NORM_KERNEL = 'SelfcestRowNorm';

const fusedLayer = kernelSwitch(DECODE_LAYER_KERNEL);
const fusedNorm = kernelSwitch(ROW_NORM_KERNEL);

/** Turns the fused decode layer (and row norm) off or on, for cross-checks; returns the previous setting. */
export function setFusedDecodeLayer(on: boolean): boolean {
  fusedNorm.set(on);
  return fusedLayer.set(on);
}

/** Whether the active backend runs a decode layer as one kernel. */
export const fusedDecodeLayerAvailable = fusedLayer.available;
export const fusedRowNormAvailable = fusedNorm.available;

/**
 * The layer for one new token in each of the cache's rows: x [rows, d] (row r's token), keys
 * [rows, H, W, dh] and valuesT [rows, H, dh, W] (every cache row takes part), mask [rows, 1, W]
 * (0 where row r may attend, MASKED elsewhere) and slots [rows, 2] (the row and position each
 * token's key and value go to). Returns the layer's output and the caches with the new keys and
 * values, which share the old caches' data: the caller must not use `keys` or `valuesT` after.
 */
export function decodeLayer(
  x: tf.Tensor2D,
  w: LayerWeights,
  keys: tf.Tensor4D,
  valuesT: tf.Tensor4D,
  mask: tf.Tensor,
  slots: tf.Tensor2D,
  eps: number,
): [tf.Tensor2D, tf.Tensor4D, tf.Tensor4D] {
  const inputs = { x, ...w, keys, valuesT, mask, slots } as unknown as tf.NamedTensorMap;
  const [out, k, v] = tf.engine().runKernel(DECODE_LAYER_KERNEL, inputs, { eps }) as tf.Tensor[];
  return [out as tf.Tensor2D, k as tf.Tensor4D, v as tf.Tensor4D];
}

/** (x − mean) / sqrt(var + eps) over each row's last axis, as one kernel where `fusedRowNormAvailable()`. */
export function rowNorm(x: tf.Tensor2D, eps: number): tf.Tensor2D {
  return tf.engine().runKernel(ROW_NORM_KERNEL, { x }, { eps }) as tf.Tensor2D;
}
