/**
 * The in-place KV-cache write (`SelfcestCacheWrite`, src/core/model/cacheWrite.ts) for cpu and
 * wasm: one loop over the cache's own memory, and the output is the cache's data with one more
 * reference, as tfjs's own Reshape returns its input's. `registerCacheWriteKernels` runs once,
 * from initBackend.
 */
import * as tf from '@tensorflow/tfjs';
import { CACHE_WRITE_KERNEL, type CacheLayout, cacheWriteArrays } from '../../core/model/cacheWrite';
import { registerOnce } from './register';

type Inputs = { cache: tf.TensorInfo; update: tf.TensorInfo; slots: tf.TensorInfo };
type Args = { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs?: tf.NamedAttrMap };

interface CpuBackend {
  data: { get(dataId: object): { values: Float32Array | Int32Array } };
  incRef(dataId: object): void;
}

interface WasmBackend {
  typedArrayFromHeap(t: tf.TensorInfo): Float32Array | Int32Array;
  incRef(dataId: object): void;
}

function check({ cache, update, slots }: Inputs): void {
  if (
    cache.dtype !== 'float32' ||
    update.dtype !== 'float32' ||
    slots.dtype !== 'int32' ||
    cache.shape.length !== 4 ||
    slots.shape[1] !== 2 ||
    update.shape[0] !== slots.shape[0]
  ) {
    throw new Error(
      `${CACHE_WRITE_KERNEL}: needs a float32 rank-4 cache, float32 updates [n, d] and int32 slots [n, 2] (got ${cache.shape}, ${update.shape}, ${slots.shape})`,
    );
  }
}

function cpuCacheWrite({ inputs, backend, attrs }: Args): tf.TensorInfo {
  const x = inputs as Inputs;
  check(x);
  const b = backend as CpuBackend;
  cacheWriteArrays(
    b.data.get(x.cache.dataId).values as Float32Array,
    x.cache.shape,
    b.data.get(x.update.dataId).values as Float32Array,
    b.data.get(x.slots.dataId).values as Int32Array,
    (attrs as { layout: CacheLayout }).layout,
  );
  b.incRef(x.cache.dataId);
  return { dataId: x.cache.dataId, shape: x.cache.shape, dtype: 'float32' };
}

function wasmCacheWrite({ inputs, backend, attrs }: Args): tf.TensorInfo {
  const x = inputs as Inputs;
  check(x);
  const b = backend as WasmBackend;
  cacheWriteArrays(
    b.typedArrayFromHeap(x.cache) as Float32Array,
    x.cache.shape,
    b.typedArrayFromHeap(x.update) as Float32Array,
    b.typedArrayFromHeap(x.slots) as Int32Array,
    (attrs as { layout: CacheLayout }).layout,
  );
  b.incRef(x.cache.dataId);
  return { dataId: x.cache.dataId, shape: x.cache.shape, dtype: 'float32' };
}

/** Registers `SelfcestCacheWrite` for cpu and wasm (WebGPU keeps the scatter). */
export function registerCacheWriteKernels(): void {
  registerOnce(CACHE_WRITE_KERNEL, { cpu: cpuCacheWrite, wasm: wasmCacheWrite });
}
