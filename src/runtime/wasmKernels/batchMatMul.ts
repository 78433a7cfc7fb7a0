/**
 * A faster matMul for tfjs's wasm backend. tfjs-backend-wasm 4.22 hands a product to XNNPACK
 * only when it is a single 2-D one with neither operand transposed, and XNNPACK then repacks
 * the right operand on every call with new values (every call in training); batched or
 * transposed products (attention's q·kᵀ and p·v, forward and backward) run a plain loop at
 * ~1 GFLOP/s, about half of a `small` training step (docs/BENCHMARKS.md). This module replaces
 * the backend's BatchMatMul and _FusedMatMul kernels with a SIMD kernel written for this
 * project (batchMatMul.wat, run on the backend's own memory, no copies); the cases it does not
 * take (other dtypes, activations, odd broadcasts) go to tfjs's kernels unchanged. Gradients
 * need nothing: tfjs defines a matMul's gradient as further matMuls, which come here too.
 */
import * as tf from '@tensorflow/tfjs';
import { BATCH_MATMUL_WASM } from './batchMatMulBinary';
import { type WasmBackend, kernelInstances, offsetOf } from './instances';

type KernelFunc = tf.KernelConfig['kernelFunc'];

/** Products with a transposed B and at most this many rows of A are dot products over B as it is (batchMatMul.wat's `$dots`). */
const DOTS_MAX_ROWS = 16;

export interface Bmm {
  bmm(
    a: number,
    b: number,
    c: number,
    batch: number,
    m: number,
    k: number,
    n: number,
    strideA: number,
    strideB: number,
    transA: number,
    transB: number,
    scratchA: number,
    scratchB: number,
    bias: number,
  ): void;
}

/** The kernel over a backend's memory (one instance per wasm backend). */
export const matMulKernelFor = kernelInstances<Bmm>(BATCH_MATMUL_WASM);
const instanceFor = matMulKernelFor;
/** The backend the last install saw, and whether tfjs's kernels are re-registered (once, globally). */
let current: WasmBackend | undefined;
let registered = false;
let enabled = true;
let calls = 0;

/** How many products the project's kernel has computed in this process (tests check it ran). */
export function fastBatchMatMulCalls(): number {
  return calls;
}

/** Whether the project's kernel now serves the matMuls on the active wasm backend. */
export function fastBatchMatMulActive(): boolean {
  return (
    enabled && registered && current !== undefined && instanceFor(current) !== undefined && tf.getBackend() === 'wasm' && (tf.backend() as unknown) === current
  );
}

/**
 * Turns the project's kernel off or on (on after install). For side-by-side measurements and
 * cross-checks in one process; returns the previous setting.
 */
export function setFastBatchMatMul(on: boolean): boolean {
  const was = enabled;
  enabled = on;
  return was;
}

/**
 * Sets the kernels up for the active wasm backend (call after `tf.setBackend('wasm')`): every
 * float32 BatchMatMul, and every _FusedMatMul with at most a bias (no activation), goes to the
 * project's kernel; anything else stays with tfjs. Returns false, leaving tfjs's kernels in
 * charge, where the backend's memory is not reachable or the platform lacks WebAssembly SIMD.
 * Safe to call again, also after the wasm backend was removed and made anew.
 */
export function installFastBatchMatMul(): boolean {
  if (tf.getBackend() !== 'wasm') return false;
  const backend = tf.backend() as unknown as WasmBackend;
  current = backend;
  if (instanceFor(backend) === undefined) return false;
  if (!registered) {
    const plain = tf.getKernel('BatchMatMul', 'wasm');
    const fused = tf.getKernel('_FusedMatMul', 'wasm');
    if (plain === undefined || fused === undefined) return false;
    for (const [config, ours] of [
      [plain, batchMatMul],
      [fused, fusedMatMul],
    ] as const) {
      const original = config.kernelFunc;
      tf.unregisterKernel(config.kernelName, 'wasm');
      tf.registerKernel({ ...config, kernelFunc: (args) => ours(args) ?? original(args) });
    }
    registered = true;
  }
  return true;
}

const size = (shape: readonly number[]) => tf.util.sizeFromShape(shape as number[]);

type KernelArgs = Parameters<KernelFunc>[0];

function batchMatMul(args: KernelArgs): tf.TensorInfo | undefined {
  const { a, b } = args.inputs as { a: tf.TensorInfo; b: tf.TensorInfo };
  const { transposeA, transposeB } = args.attrs as { transposeA: boolean; transposeB: boolean };
  return product(args.backend as unknown as WasmBackend, a, b, transposeA, transposeB);
}

function fusedMatMul(args: KernelArgs): tf.TensorInfo | undefined {
  const { a, b, bias, preluActivationWeights } = args.inputs as {
    a: tf.TensorInfo;
    b: tf.TensorInfo;
    bias?: tf.TensorInfo;
    preluActivationWeights?: tf.TensorInfo;
  };
  const { transposeA, transposeB, activation } = args.attrs as { transposeA: boolean; transposeB: boolean; activation?: string };
  if ((activation !== undefined && activation !== 'linear') || preluActivationWeights != null) return undefined;
  return product(args.backend as unknown as WasmBackend, a, b, transposeA, transposeB, bias ?? undefined);
}

/** The product by the project's kernel, or undefined where tfjs's own kernel should run. */
function product(
  backend: WasmBackend,
  a: tf.TensorInfo,
  b: tf.TensorInfo,
  transposeA: boolean,
  transposeB: boolean,
  bias?: tf.TensorInfo,
): tf.TensorInfo | undefined {
  if (!enabled) return undefined;
  const kernel = instanceFor(backend);
  if (kernel === undefined) return undefined;
  if (a.dtype !== 'float32' || b.dtype !== 'float32') return undefined;
  const ra = a.shape.length;
  const rb = b.shape.length;
  const m = transposeA ? a.shape[ra - 1] : a.shape[ra - 2];
  const k = transposeA ? a.shape[ra - 2] : a.shape[ra - 1];
  const kb = transposeB ? b.shape[rb - 1] : b.shape[rb - 2];
  const n = transposeB ? b.shape[rb - 2] : b.shape[rb - 1];
  const outerA = a.shape.slice(0, -2);
  const outerB = b.shape.slice(0, -2);
  const batchA = size(outerA);
  const batchB = size(outerB);
  // Anything unusual stays with tfjs, which also reports shape errors in its own words.
  if (k !== kb || m * n * k === 0) return undefined;
  if (bias !== undefined && (bias.dtype !== 'float32' || bias.shape.length !== 1 || bias.shape[0] !== n)) return undefined;
  let outer: number[];
  if (batchA === batchB && outerA.length === outerB.length && outerA.every((d, i) => d === outerB[i])) outer = outerA;
  else if (batchB === 1 && outerB.length <= outerA.length) outer = outerA;
  else if (batchA === 1 && outerA.length <= outerB.length) outer = outerB;
  else return undefined;
  const out = backend.makeOutput([...outer, m, n], 'float32');
  const at = (t: tf.TensorInfo) => offsetOf(backend, t, 'BatchMatMul');
  const scratchA = transposeA ? backend.wasm._malloc(m * k * 4) : 0;
  // A transposed B under more than DOTS_MAX_ROWS rows is copied untransposed first (the kernel's rule).
  const scratchB = transposeB && m > DOTS_MAX_ROWS ? backend.wasm._malloc(k * n * 4) : 0;
  try {
    if ((transposeA && scratchA === 0) || (transposeB && m > DOTS_MAX_ROWS && scratchB === 0)) {
      throw new Error(`matMul (wasm): out of memory for a ${m}×${k}·${k}×${n} product's scratch space`);
    }
    const batch = Math.max(batchA, batchB);
    calls++;
    kernel.bmm(
      at(a),
      at(b),
      at(out),
      batch,
      m,
      k,
      n,
      batchA === 1 ? 0 : m * k,
      batchB === 1 ? 0 : k * n,
      transposeA ? 1 : 0,
      transposeB ? 1 : 0,
      scratchA,
      scratchB,
      bias === undefined ? 0 : at(bias),
    );
  } catch (e) {
    backend.disposeData(out.dataId);
    throw e;
  } finally {
    if (scratchA !== 0) backend.wasm._free(scratchA);
    if (scratchB !== 0) backend.wasm._free(scratchB);
  }
  return out;
}
