/**
 * Writing one decode pass's keys and values into the KV cache in place (`SelfcestCacheWrite`).
 *
 * tfjs has no in-place update: `tensorScatterUpdate` copies the whole cache for every write, a
 * fifth of a wasm decode step at 32 rows. On cpu and wasm this kernel writes the new rows into
 * the cache's own memory and returns a tensor on the same data (as a reshape does); the decoder
 * owns its caches and drops the old handle at once, so nothing else sees the change. Other
 * backends (WebGPU) keep the scatter. Kernels: src/runtime/kernels/cacheWrite.ts.
 */
import * as tf from '@tensorflow/tfjs';
import { kernelSwitch } from '../kernelSwitch';

export const CACHE_WRITE_KERNEL = 'SelfcestCacheWrite';

/** Keys are cached [rows, heads, positions, dh]; values transposed, [rows, heads, dh, positions]. */
export type CacheLayout = 'keys' | 'valuesT';

const inPlace = kernelSwitch(CACHE_WRITE_KERNEL);

/** Turns in-place cache writes off or on (for cross-checks against the scatter); returns the previous setting. */
export const setInPlaceCacheWrite = inPlace.set;

/** Whether the active backend writes the cache in place. */
export const inPlaceCacheWriteAvailable = inPlace.available;

/**
 * `cache` with row `slots[2t]`, position `slots[2t + 1]` set from `update[t]` ([n, heads·dh]),
 * in place: the result shares `cache`'s data, so the caller must not use `cache` afterwards for
 * its old contents. Only where `inPlaceCacheWriteAvailable()`.
 */
export function cacheWrite(cache: tf.Tensor4D, update: tf.Tensor2D, slots: tf.Tensor2D, layout: CacheLayout): tf.Tensor4D {
  return tf.engine().runKernel(CACHE_WRITE_KERNEL, { cache, update, slots }, { layout }) as tf.Tensor4D;
}

/** The write on plain arrays: the cpu and wasm kernels' loop, and a reference for tests. */
export function cacheWriteArrays(cache: Float32Array, shape: readonly number[], update: Float32Array, slots: Int32Array, layout: CacheLayout): void {
  const [rows, heads, a, b] = shape;
  const positions = layout === 'keys' ? a : b;
  const dh = layout === 'keys' ? b : a;
  const n = slots.length / 2;
  for (let t = 0; t < n; t++) {
    const row = slots[2 * t];
    const pos = slots[2 * t + 1];
    if (!(row >= 0 && row < rows && pos >= 0 && pos < positions))
      throw new Error(`${CACHE_WRITE_KERNEL}: slot ${t} (row ${row}, position ${pos}) is outside the cache [${shape.join(', ')}]`);
    for (let hh = 0; hh < heads; hh++) {
      const src = (t * heads + hh) * dh;
      if (layout === 'keys') cache.set(update.subarray(src, src + dh), ((row * heads + hh) * positions + pos) * dh);
      else for (let c = 0; c < dh; c++) cache[((row * heads + hh) * dh + c) * positions + pos] = update[src + c];
    }
  }
}
