/**
 * Moving one layer's cached keys and values [rows, kvHeads, width, headDim] between caches: rows
 * picked out, columns of left padding added or cut, rotary keys turned to new positions. Chosen
 * for the wasm backend, where a slice first copies the whole tensor and a gather is slow per
 * element, while a concat copies each input once and a matMul streams: picking 1 of 32 rows takes
 * about 0.1 ms as a one-hot matMul, 0.3 ms as a gather and 0.6 ms as a slice (31 of 32: 1.0, 9.2
 * and 1.4 ms as two slices and a concat; [32, 2, 80, 64] float32, one thread on the
 * 2-core development machine).
 */
import * as tf from '@tensorflow/tfjs';
import type { LayerKv } from './decoder';

/** `f`'s keys and values kept, everything else it made disposed (a tidy over LayerKv). */
export function tidyKv(f: () => LayerKv[]): LayerKv[] {
  const flat = tf.tidy(() => f().flatMap((l) => [l.k, l.v]));
  return Array.from({ length: flat.length / 2 }, (_, i) => ({ k: flat[2 * i] as tf.Tensor4D, v: flat[2 * i + 1] as tf.Tensor4D }));
}

export const disposeKv = (kv: readonly LayerKv[] | null) => kv?.forEach((l) => (l.k.dispose(), l.v.dispose()));

/**
 * Keys turned by `shifts[r]` positions in row r (a single shift: every row), by the rotary inverse
 * frequencies `inverse`: out = k·cos + rotate_half(k)·sin with rotate_half(x1, x2) = (−x2, x1),
 * done as one matMul by the rotation [headDim, headDim] (a split and concat over the last axis would
 * copy headDim/2 floats at a time). Rotations compose, so keys rotated at position p come out as
 * rotated at p + shift. Identity for shifts of 0, or `inverse` null (GPT-2: nothing to turn).
 */
export function turnKeys(inverse: Float64Array | null, k: tf.Tensor4D, shifts: readonly number[]): tf.Tensor4D {
  if (inverse === null || shifts.every((s) => s === 0)) return k;
  const inv = inverse;
  const half = inv.length;
  const dim = 2 * half;
  const m = new Float32Array(shifts.length * dim * dim);
  shifts.forEach((s, r) => {
    const at = (from: number, to: number) => r * dim * dim + from * dim + to;
    for (let i = 0; i < half; i++) {
      const [cos, sin] = [Math.cos(s * inv[i]), Math.sin(s * inv[i])];
      m[at(i, i)] = m[at(half + i, half + i)] = cos;
      m[at(half + i, i)] = -sin;
      m[at(i, half + i)] = sin;
    }
  });
  const [rows, heads, width] = k.shape;
  return tf.tidy(() => {
    const turned =
      shifts.length === 1
        ? tf.matMul(tf.reshape(k, [rows * heads * width, dim]), tf.tensor2d(m, [dim, dim]))
        : tf.matMul(tf.reshape(k, [rows, heads * width, dim]), tf.tensor3d(m, [rows, dim, dim]));
    return tf.reshape(turned, k.shape) as tf.Tensor4D;
  });
}

/**
 * `t` [rows, heads, width, dim] with `by` columns of zeros added on the left (by > 0) or cut from it
 * (by < 0). (A cut as a 2-D slice: a 4-D one copies `dim` floats at a time on wasm.)
 */
export function widen(t: tf.Tensor4D, by: number): tf.Tensor4D {
  if (by === 0) return t;
  const [rows, heads, width, dim] = t.shape;
  if (by > 0) return tf.concat([tf.zeros([rows, heads, by, dim]), t], 2) as tf.Tensor4D;
  const cut = tf.slice(tf.reshape(t, [rows * heads, width * dim]), [0, -by * dim], [rows * heads, (width + by) * dim]);
  return tf.reshape(cut, [rows, heads, width + by, dim]) as tf.Tensor4D;
}

/**
 * Rows `rows` of `t`, as a matMul by a one-hot [rows.length, rows of t]: exact (one 1·x term, the
 * rest 0·x), and on wasm far cheaper than a gather, or a slice, which copies all of `t` first.
 */
export function pickRows(t: tf.Tensor4D, rows: readonly number[]): tf.Tensor4D {
  const [n, heads, width, dim] = t.shape;
  if (rows.length === n && rows.every((r, i) => r === i)) return t;
  const oneHot = new Float32Array(rows.length * n);
  rows.forEach((r, i) => (oneHot[i * n + r] = 1));
  const picked = tf.matMul(tf.tensor2d(oneHot, [rows.length, n]), tf.reshape(t, [n, heads * width * dim]));
  return tf.reshape(picked, [rows.length, heads, width, dim]) as tf.Tensor4D;
}
