/**
 * The widening of packed float16/bfloat16 patterns to float32 (`SelfcestWidenHalf`,
 * src/core/model/halfWeights.ts) for each backend: on cpu and wasm one loop, on WebGPU one
 * program that reads each pattern from its int32 element and builds the f32 bits (no
 * shader-f16 feature needed). `registerWidenHalfKernels` runs once, from initBackend.
 */
import * as tf from '@tensorflow/tfjs';
import type { WebGPUProgram } from '@tensorflow/tfjs-backend-webgpu';
import { type HalfFormat, WIDEN_HALF_KERNEL, widenHalfArrays } from '../../core/model/halfWeights';
import { registerOnce } from './register';

type Args = { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs?: tf.NamedAttrMap };

interface CpuBackend {
  readSync(dataId: object): Int32Array;
  makeTensorInfo(shape: number[], dtype: tf.DataType, values: Float32Array): tf.TensorInfo;
}

interface WasmBackend {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  typedArrayFromHeap(t: tf.TensorInfo): Float32Array | Int32Array;
}

interface WebgpuBackend {
  runWebGPUProgram(program: WebGPUProgram, inputs: tf.TensorInfo[], dtype: tf.DataType): tf.TensorInfo;
}

/** The inputs: packed patterns `x`, and with `ids` the rows of `x` (a matrix) to widen. */
function parts({ inputs, attrs }: Args): { x: tf.TensorInfo; ids: tf.TensorInfo | null; format: HalfFormat; shape: number[]; width: number } {
  const x = inputs.x as tf.TensorInfo;
  const ids = (inputs.ids as tf.TensorInfo | undefined) ?? null;
  const format = (attrs as { format?: unknown } | undefined)?.format;
  if (x.dtype !== 'int32' || x.shape.length === 0)
    throw new Error(`${WIDEN_HALF_KERNEL}: needs int32 packed patterns of rank ≥ 1 (got ${x.dtype} [${x.shape}])`);
  if (format !== 'f16' && format !== 'bf16') throw new Error(`${WIDEN_HALF_KERNEL}: format must be f16 or bf16 (got ${JSON.stringify(format)})`);
  const width = x.shape[x.shape.length - 1] as number;
  if (ids !== null && (x.shape.length !== 2 || ids.dtype !== 'int32' || ids.shape.length !== 1)) {
    throw new Error(`${WIDEN_HALF_KERNEL}: rows need a packed matrix and int32 ids [n] (got ${x.dtype} [${x.shape}], ${ids.dtype} [${ids.shape}])`);
  }
  const shape = ids === null ? [...x.shape.slice(0, -1), 2 * width] : [ids.shape[0] as number, 2 * width];
  return { x, ids, format, shape, width };
}

function cpuWiden(args: Args): tf.TensorInfo {
  const { x, ids, format, shape, width } = parts(args);
  const b = args.backend as CpuBackend;
  const out = new Float32Array(tf.util.sizeFromShape(shape));
  widenHalfArrays(b.readSync(x.dataId), format, out, ids === null ? undefined : { ids: b.readSync(ids.dataId), width });
  return b.makeTensorInfo(shape, 'float32', out);
}

function wasmWiden(args: Args): tf.TensorInfo {
  const { x, ids, format, shape, width } = parts(args);
  const b = args.backend as WasmBackend;
  const out = b.makeOutput(shape, 'float32');
  // The input views after the allocation: an allocation may grow (and so move) the heap.
  const rows = ids === null ? undefined : { ids: b.typedArrayFromHeap(ids) as Int32Array, width };
  widenHalfArrays(b.typedArrayFromHeap(x) as Int32Array, format, b.typedArrayFromHeap(out) as Float32Array, rows);
  return out;
}

/** One f32 from one 16-bit pattern, in WGSL: bfloat16 is the top half of an f32; binary16 is rebuilt field by field. */
const WIDEN_WGSL: Record<HalfFormat, string> = {
  bf16: 'fn widen(h : u32) -> f32 { return bitcast<f32>(h << 16u); }',
  f16: `fn widen(h : u32) -> f32 {
        let sign = (h & 0x8000u) << 16u;
        let e = (h >> 10u) & 0x1fu;
        let m = h & 0x3ffu;
        if (e == 0u) {
          // Zero or subnormal: m · 2^-24, a normal f32 (or zero), with the sign.
          return bitcast<f32>(sign | bitcast<u32>(f32(m) * 5.9604644775390625e-8));
        }
        if (e == 31u) { return bitcast<f32>(sign | 0x7f800000u | (m << 13u)); }
        return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
      }`,
};

function webgpuWiden(args: Args): tf.TensorInfo {
  const { x, ids, format, shape, width } = parts(args);
  const size = tf.util.sizeFromShape(shape);
  const workgroupSize: [number, number, number] = [64, 1, 1];
  // Output element `index` reads pattern `source` of x: the same index, or its column in row ids[row].
  // (A row id outside the table reads as zeros, as tfjs's own WebGPU gather does; cpu and wasm throw.)
  const rows = x.shape[0] as number;
  const source = ids === null ? 'index' : `clamp(I[index / ${2 * width}], 0, ${rows - 1}) * ${2 * width} + index % ${2 * width}`;
  const inside = ids === null ? 'true' : `I[index / ${2 * width}] >= 0 && I[index / ${2 * width}] < ${rows}`;
  const program: WebGPUProgram = {
    variableNames: ids === null ? ['X'] : ['X', 'I'],
    workgroupSize,
    size: true,
    outputShape: [size],
    // A flat layout (the backend spreads a dispatch too large for one dimension over y and z).
    dispatchLayout: { x: [0] },
    dispatch: [Math.ceil(size / workgroupSize[0]), 1, 1],
    shaderKey: `selfcest_widen_${format}_${ids === null ? 'all' : `rows${rows}x${width}`}`,
    getUserCode: () => `
      ${WIDEN_WGSL[format]}
      fn main(index : i32) {
        if (index < uniforms.size) {
          let at = ${source};
          let word = bitcast<u32>(X[at / 2]);
          let h = select(word & 0xffffu, word >> 16u, (at & 1) == 1);
          setOutputAtIndex(index, select(0.0, widen(h), ${inside}));
        }
      }`,
  } as unknown as WebGPUProgram;
  const flat = (t: tf.TensorInfo) => ({ ...t, shape: [t.shape.reduce((a, b) => a * b, 1)] });
  const out = (args.backend as WebgpuBackend).runWebGPUProgram(program, ids === null ? [flat(x)] : [flat(x), ids], 'float32');
  return { ...out, shape };
}

/** Registers `SelfcestWidenHalf` for cpu, wasm and webgpu. */
export function registerWidenHalfKernels(): void {
  registerOnce(WIDEN_HALF_KERNEL, { cpu: cpuWiden, wasm: wasmWiden, webgpu: webgpuWiden });
}
