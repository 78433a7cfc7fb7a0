/**
 * `SelfcestDecodeLayer` and `SelfcestRowNorm` on wasm (src/core/model/decodeLayer.ts says what
 * they compute): one kernel call runs a whole decode layer as a sequence of WebAssembly calls on
 * the backend's memory, the project's matMul kernel (batchMatMul.wat) for the products and
 * decodeOps.wat for LayerNorm, softmax, GELU and the residual adds, with the layer's
 * intermediates in one scratch block freed before it returns.
 */
import * as tf from '@tensorflow/tfjs';
import { cacheWriteArrays } from '../../core/model/cacheWrite';
import { DECODE_LAYER_KERNEL, ROW_NORM_KERNEL } from '../../core/model/decodeLayer';
import { registerOnce } from '../kernels/register';
import { matMulKernelFor } from './batchMatMul';
import { DECODE_OPS_WASM } from './decodeOpsBinary';
import { type WasmBackend, kernelInstances, offsetOf } from './instances';

interface DecodeOps {
  norm(x: number, out: number, rows: number, d: number, eps: number): void;
  gelu(p: number, n: number): void;
  softmax(s: number, mask: number, rows: number, heads: number, width: number): void;
  add(a: number, b: number, out: number, n: number): void;
}

const decodeOpsFor = kernelInstances<DecodeOps>(DECODE_OPS_WASM);

type Args = { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs?: tf.NamedAttrMap };

const WEIGHTS = ['wq', 'bq', 'wk', 'bk', 'wv', 'bv', 'wo', 'bo', 'wfc', 'bfc', 'wproj', 'bproj'] as const;

function kernelsOf(backend: WasmBackend, name: string) {
  const mm = matMulKernelFor(backend);
  const ops = decodeOpsFor(backend);
  if (mm === undefined || ops === undefined)
    throw new Error(`${name} (wasm): the project's WebAssembly kernels cannot run on this backend (no SIMD or no memory access)`);
  return { mm, ops };
}

function shapeError(what: string): never {
  throw new Error(`${DECODE_LAYER_KERNEL}: ${what}`);
}

function decodeLayer({ inputs, backend, attrs }: Args): tf.TensorInfo[] {
  const b = backend as WasmBackend;
  const { mm, ops } = kernelsOf(b, DECODE_LAYER_KERNEL);
  const { x, keys, valuesT, mask, slots } = inputs as Record<string, tf.TensorInfo>;
  const eps = (attrs as { eps: number }).eps;
  const w = Object.fromEntries(WEIGHTS.map((k) => [k, inputs[k] as tf.TensorInfo])) as Record<(typeof WEIGHTS)[number], tf.TensorInfo>;
  for (const t of [x, keys, valuesT, mask, ...Object.values(w)])
    if (t === undefined || t.dtype !== 'float32') shapeError('every input but slots must be a float32 tensor');
  if (slots === undefined || slots.dtype !== 'int32') shapeError('slots must be int32 [rows, 2]');
  const [rows, d] = x.shape;
  const [cacheRows, heads, width, dh] = keys.shape;
  const f = w.wfc.shape[1];
  if (x.shape.length !== 2 || keys.shape.length !== 4 || cacheRows !== rows || heads * dh !== d)
    shapeError(`x [${x.shape}] and keys [${keys.shape}] do not fit (one token for every cache row)`);
  const vShape = valuesT.shape;
  if (vShape.length !== 4 || vShape[0] !== rows || vShape[1] !== heads || vShape[2] !== dh || vShape[3] !== width)
    shapeError(`valuesT [${vShape}] does not match keys [${keys.shape}]`);
  if (tf.util.sizeFromShape(mask.shape) !== rows * width) shapeError(`mask [${mask.shape}] is not [rows, 1, ${width}]`);
  if (slots.shape[0] !== rows || slots.shape[1] !== 2) shapeError(`slots [${slots.shape}] is not [${rows}, 2]`);
  const square = (t: tf.TensorInfo, r: number, c: number) => t.shape.length === 2 && t.shape[0] === r && t.shape[1] === c;
  const vector = (t: tf.TensorInfo, n: number) => t.shape.length === 1 && t.shape[0] === n;
  if (
    ![w.wq, w.wk, w.wv, w.wo].every((t) => square(t, d, d)) ||
    !square(w.wfc, d, f) ||
    !square(w.wproj, f, d) ||
    ![w.bq, w.bk, w.bv, w.bo, w.bproj].every((t) => vector(t, d)) ||
    !vector(w.bfc, f)
  ) {
    shapeError(`the layer's weights do not fit d = ${d}, MLP width ${f}`);
  }

  const out = b.makeOutput([rows, d], 'float32');
  const nd = rows * d;
  // Scratch: a (normalised input), q, k, v, attended, mid (d each per row), scores (H·W), up (f).
  const floats = 6 * nd + rows * heads * width + rows * f;
  const scratch = b.wasm._malloc(floats * 4);
  if (scratch === 0) {
    b.disposeData(out.dataId);
    throw new Error(`${DECODE_LAYER_KERNEL}: out of memory for ${floats} floats of scratch space`);
  }
  try {
    const at = (t: tf.TensorInfo) => offsetOf(b, t, DECODE_LAYER_KERNEL);
    const [A, Q, K, V, ATT, MID] = [0, 1, 2, 3, 4, 5].map((i) => scratch + i * nd * 4);
    const S = scratch + 6 * nd * 4;
    const UP = S + rows * heads * width * 4;
    const X = at(x);
    const OUT = at(out);
    const dense = (src: number, wt: tf.TensorInfo, bias: tf.TensorInfo, dst: number, k: number, n: number) =>
      mm.bmm(src, at(wt), dst, 1, rows, k, n, 0, 0, 0, 0, 0, 0, at(bias));

    ops.norm(X, A, rows, d, eps);
    dense(A, w.wq, w.bq, Q, d, d);
    dense(A, w.wk, w.bk, K, d, d);
    dense(A, w.wv, w.bv, V, d, d);
    // The new keys and values into the caches, in place (after every malloc: views stay valid).
    const heap = (ptr: number, n: number) => new Float32Array(b.typedArrayFromHeap(x).buffer, ptr, n);
    const slotValues = b.typedArrayFromHeap(slots) as Int32Array;
    cacheWriteArrays(b.typedArrayFromHeap(keys) as Float32Array, keys.shape, heap(K, nd), slotValues, 'keys');
    cacheWriteArrays(b.typedArrayFromHeap(valuesT) as Float32Array, valuesT.shape, heap(V, nd), slotValues, 'valuesT');
    // Scores [rows·H, 1, W] = q·Kᵀ per (row, head), masked softmax, then probs·V per (row, head).
    mm.bmm(Q, at(keys), S, rows * heads, 1, dh, width, dh, width * dh, 0, 1, 0, 0, 0);
    ops.softmax(S, at(mask), rows, heads, width);
    mm.bmm(S, at(valuesT), ATT, rows * heads, 1, width, dh, width, dh * width, 0, 1, 0, 0, 0);
    dense(ATT, w.wo, w.bo, MID, d, d);
    ops.add(MID, X, MID, nd);
    ops.norm(MID, A, rows, d, eps);
    dense(A, w.wfc, w.bfc, UP, d, f);
    ops.gelu(UP, rows * f);
    dense(UP, w.wproj, w.bproj, OUT, f, d);
    ops.add(OUT, MID, OUT, nd);
  } catch (e) {
    b.disposeData(out.dataId);
    throw e;
  } finally {
    b.wasm._free(scratch);
  }
  b.incRef(keys.dataId);
  b.incRef(valuesT.dataId);
  return [out, { dataId: keys.dataId, shape: keys.shape, dtype: 'float32' }, { dataId: valuesT.dataId, shape: valuesT.shape, dtype: 'float32' }];
}

function rowNorm({ inputs, backend, attrs }: Args): tf.TensorInfo {
  const b = backend as WasmBackend;
  const { ops } = kernelsOf(b, ROW_NORM_KERNEL);
  const { x } = inputs as { x: tf.TensorInfo };
  if (x.dtype !== 'float32' || x.shape.length !== 2) throw new Error(`${ROW_NORM_KERNEL}: needs a float32 [rows, d] tensor (got ${x.dtype} [${x.shape}])`);
  const out = b.makeOutput([...x.shape], 'float32');
  ops.norm(offsetOf(b, x, ROW_NORM_KERNEL), offsetOf(b, out, ROW_NORM_KERNEL), x.shape[0], x.shape[1], (attrs as { eps: number }).eps);
  return out;
}

/**
 * Registers both kernels for wasm where the project's WebAssembly modules run on the active
 * backend (call after installFastBatchMatMul); returns whether they are available.
 */
export function installDecodeKernels(): boolean {
  if (tf.getBackend() !== 'wasm') return false;
  const backend = tf.backend() as unknown as WasmBackend;
  if (matMulKernelFor(backend) === undefined || decodeOpsFor(backend) === undefined) return false;
  registerOnce(DECODE_LAYER_KERNEL, { wasm: decodeLayer });
  registerOnce(ROW_NORM_KERNEL, { wasm: rowNorm });
  return true;
}
