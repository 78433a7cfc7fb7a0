/**
 * Weight matrices kept in memory as the checkpoint stores them, float16 or bfloat16, and widened
 * to float32 only where a forward reads them (`SelfcestWidenHalf`).
 *
 * tfjs has no 16-bit float dtype, so a matrix [rows, cols] of 16-bit patterns (cols even) is held
 * as an int32 tensor [rows, cols / 2], two patterns per element, element 2k in the low half
 * (the file's little-endian order). It takes half the memory of the float32 matrix; a forward
 * widens each matrix just before its matMul (a gather of embedding rows widens only those rows),
 * and the widened copy lives as long as the forward's tidy, or until the backward pass of a
 * gradient that reads it. Widening is exact: every half and bfloat16 value is an f32.
 *
 * Which backend keeps weights this way is the caller's choice (`decoderParams`' storage); the
 * kernels live in src/runtime/kernels/widenHalf.ts.
 */
import * as tf from '@tensorflow/tfjs';
import { halfToFloat } from '../io/safetensors';

export const WIDEN_HALF_KERNEL = 'SelfcestWidenHalf';

/** How the 16-bit patterns read: IEEE binary16, or bfloat16 (the top half of an f32). */
export type HalfFormat = 'f16' | 'bf16';

/** Packed matrices and their format (a gather of rows keeps its source's format by the caller's word). */
const FORMAT = new WeakMap<tf.Tensor, HalfFormat>();

/** The format of a packed matrix made by `packedHalfTensor`, or null for an ordinary tensor. */
export function halfFormatOf(t: tf.Tensor): HalfFormat | null {
  return FORMAT.get(t) ?? null;
}

/** 16-bit patterns (even count per row) as int32 elements, two per element, element 2k in the low half. */
export function packHalves(bits: Uint16Array): Int32Array {
  if (bits.length % 2 !== 0) throw new Error(`packHalves: ${bits.length} patterns is not an even count`);
  const out = new Int32Array(bits.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = bits[2 * i] | (bits[2 * i + 1] << 16);
  return out;
}

/** A matrix [rows, cols] of 16-bit patterns held packed ([rows, cols / 2] int32), marked with its format. */
export function packedHalfTensor(bits: Uint16Array, shape: readonly number[], format: HalfFormat): tf.Tensor {
  const cols = shape[shape.length - 1];
  if (cols % 2 !== 0) throw new Error(`packedHalfTensor: the last dimension ${cols} must be even`);
  const t = tf.tensor(packHalves(bits), [...shape.slice(0, -1), cols / 2], 'int32');
  FORMAT.set(t, format);
  return t;
}

/** Packed patterns ([..., n / 2] int32) as float32 [..., n]. */
export function widenHalf(packed: tf.Tensor, format: HalfFormat): tf.Tensor {
  if (packed.dtype !== 'int32') throw new Error(`${WIDEN_HALF_KERNEL}: packed patterns must be int32 (got ${packed.dtype})`);
  return tf.engine().runKernel(WIDEN_HALF_KERNEL, { x: packed }, { format }) as tf.Tensor;
}

/**
 * Rows `ids` (int32 [n]) of a packed matrix ([rows, cols / 2]) widened, float32 [n, cols]: an
 * embedding lookup in one kernel. (Not tf.gather on the packed int32: WebGPU's gather carries
 * values through f32, which rounds a packed pair's low half away.)
 */
export function widenHalfRows(packed: tf.Tensor, ids: tf.Tensor, format: HalfFormat): tf.Tensor2D {
  if (packed.dtype !== 'int32' || packed.rank !== 2)
    throw new Error(`${WIDEN_HALF_KERNEL}: packed rows must be an int32 matrix (got ${packed.dtype} [${packed.shape}])`);
  if (ids.dtype !== 'int32' || ids.rank !== 1) throw new Error(`${WIDEN_HALF_KERNEL}: row ids must be int32 [n] (got ${ids.dtype} [${ids.shape}])`);
  return tf.engine().runKernel(WIDEN_HALF_KERNEL, { x: packed, ids }, { format }) as tf.Tensor2D;
}

/** `t` as float32: widened when it is a packed matrix, itself otherwise. */
export function asFloat(t: tf.Tensor): tf.Tensor {
  const format = FORMAT.get(t);
  return format === undefined ? t : widenHalf(t, format);
}

/** Whether the active backend can widen packed matrices (its kernel is registered). */
export function halfStorageAvailable(): boolean {
  return tf.getKernel(WIDEN_HALF_KERNEL, tf.getBackend()) !== undefined;
}

/**
 * The widening on plain arrays: the cpu and wasm kernels' loop, and a reference for tests. With
 * `rows` (ids into `packed` as a matrix of `rows.width` elements a row), only those rows, in order.
 */
export function widenHalfArrays(packed: Int32Array, format: HalfFormat, out: Float32Array, rows?: { ids: Int32Array; width: number }): void {
  if (rows !== undefined) {
    const { ids, width } = rows;
    const count = packed.length / width;
    if (out.length !== 2 * width * ids.length)
      throw new Error(`${WIDEN_HALF_KERNEL}: ${ids.length} rows widen to ${2 * width * ids.length} values, not ${out.length}`);
    for (let r = 0; r < ids.length; r++) {
      const id = ids[r];
      if (!(id >= 0 && id < count)) throw new Error(`${WIDEN_HALF_KERNEL}: row id ${id} is outside the ${count} rows`);
      widenHalfArrays(packed.subarray(id * width, (id + 1) * width), format, out.subarray(2 * r * width, 2 * (r + 1) * width));
    }
    return;
  }
  if (out.length !== 2 * packed.length)
    throw new Error(`${WIDEN_HALF_KERNEL}: ${packed.length} packed elements widen to ${2 * packed.length} values, not ${out.length}`);
  if (format === 'bf16') {
    const wide = new Int32Array(out.buffer, out.byteOffset, out.length);
    for (let i = 0; i < packed.length; i++) {
      wide[2 * i] = packed[i] << 16;
      wide[2 * i + 1] = packed[i] & 0xffff0000;
    }
  } else {
    for (let i = 0; i < packed.length; i++) {
      out[2 * i] = halfToFloat(packed[i] & 0xffff);
      out[2 * i + 1] = halfToFloat(packed[i] >>> 16);
    }
  }
}
