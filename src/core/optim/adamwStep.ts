/**
 * One AdamW update of one parameter tensor as a single kernel, `SelfcestAdamW`: the moments and
 * the parameter in one pass instead of about fifteen elementwise ops (each a kernel call, and on
 * WebGPU a dispatch). The kernels themselves live in the runtime (src/runtime/kernels/adamw.ts),
 * one per backend; where none is registered for the active backend, `adamwStep` returns null
 * and the optimizer composes the same formula from tfjs ops.
 *
 *   g' = g·scale (the global-norm clip)
 *   m' = β1·m + (1 − β1)·g'
 *   v' = β2·v + (1 − β2)·g'²
 *   p' = p − lr·(m'/bc1) / (√(v'/bc2) + ε) − decay·p      (decay = lr·weight decay, or 0)
 */
import * as tf from '@tensorflow/tfjs';
import { kernelSwitch } from '../kernelSwitch';

export const ADAMW_KERNEL = 'SelfcestAdamW';

export interface AdamWStepAttrs {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** Bias corrections 1 − β1^t and 1 − β2^t. */
  bc1: number;
  bc2: number;
  /** lr · weight decay for a decaying tensor, else 0. */
  decay: number;
  /** The clip factor for the gradient (1 when not clipped). */
  scale: number;
}

const fused = kernelSwitch(ADAMW_KERNEL);

/** Turns the fused kernel off or on (for cross-checks against the composed ops); returns the previous setting. */
export const setFusedAdamW = fused.set;

/** Whether `adamwStep` will use a fused kernel on the active backend. */
export const fusedAdamWAvailable = fused.available;

/** [p', m', v'] from the fused kernel; the caller has checked `fusedAdamWAvailable()` (once per step). */
export function adamwStep(p: tf.Tensor, g: tf.Tensor, m: tf.Tensor, v: tf.Tensor, attrs: AdamWStepAttrs): [tf.Tensor, tf.Tensor, tf.Tensor] {
  if (p.dtype !== 'float32' || g.dtype !== 'float32' || p.size !== g.size || p.size !== m.size || p.size !== v.size) {
    throw new Error(`${ADAMW_KERNEL}: parameter, gradient and moments must be float32 of one size (got ${p.size}, ${g.size}, ${m.size}, ${v.size})`);
  }
  const out = tf.engine().runKernel(ADAMW_KERNEL, { p, g, m, v }, attrs as unknown as tf.NamedAttrMap) as tf.Tensor[];
  return [out[0], out[1], out[2]];
}

/** The same update on plain arrays: the cpu and wasm kernels' loop, and a reference for tests. */
export function adamwStepArrays(
  p: Float32Array,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  a: AdamWStepAttrs,
  out: [Float32Array, Float32Array, Float32Array],
): void {
  const [po, mo, vo] = out;
  const c1 = 1 - a.beta1;
  const c2 = 1 - a.beta2;
  for (let i = 0; i < p.length; i++) {
    const gi = g[i] * a.scale;
    const mi = Math.fround(a.beta1 * m[i] + c1 * gi);
    const vi = Math.fround(a.beta2 * v[i] + c2 * gi * gi);
    mo[i] = mi;
    vo[i] = vi;
    po[i] = p[i] - (a.lr * (mi / a.bc1)) / (Math.sqrt(vi / a.bc2) + a.eps) - a.decay * p[i];
  }
}
