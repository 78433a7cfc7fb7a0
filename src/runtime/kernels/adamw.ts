/**
 * The fused AdamW kernel (`SelfcestAdamW`, src/core/optim/adamwStep.ts) for each backend: on cpu
 * and wasm one loop over the tensors' memory, on WebGPU three programs (m', v', then p' from
 * them: tfjs's WebGPU programs write one output each) instead of about fifteen dispatches.
 * `registerAdamWKernels` runs once, from initBackend.
 */
import * as tf from '@tensorflow/tfjs';
import type { WebGPUProgram } from '@tensorflow/tfjs-backend-webgpu';
import { ADAMW_KERNEL, type AdamWStepAttrs, adamwStepArrays } from '../../core/optim/adamwStep';
import { registerOnce } from './register';

type Inputs = { p: tf.TensorInfo; g: tf.TensorInfo; m: tf.TensorInfo; v: tf.TensorInfo };

interface CpuBackend {
  readSync(dataId: object): Float32Array;
  makeTensorInfo(shape: number[], dtype: tf.DataType, values: Float32Array): tf.TensorInfo;
}

interface WasmBackend {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  typedArrayFromHeap(t: tf.TensorInfo): Float32Array;
}

interface WebgpuBackend {
  runWebGPUProgram(program: WebGPUProgram, inputs: tf.TensorInfo[], dtype: tf.DataType, uniforms?: { type: string; data: number[] }[]): tf.TensorInfo;
}

function cpuAdamW({ inputs, backend, attrs }: { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs?: tf.NamedAttrMap }): tf.TensorInfo[] {
  const { p, g, m, v } = inputs as Inputs;
  const b = backend as CpuBackend;
  const out: [Float32Array, Float32Array, Float32Array] = [
    new Float32Array(tf.util.sizeFromShape(p.shape)),
    new Float32Array(tf.util.sizeFromShape(m.shape)),
    new Float32Array(tf.util.sizeFromShape(v.shape)),
  ];
  adamwStepArrays(b.readSync(p.dataId), b.readSync(g.dataId), b.readSync(m.dataId), b.readSync(v.dataId), attrs as unknown as AdamWStepAttrs, out);
  return [b.makeTensorInfo(p.shape, 'float32', out[0]), b.makeTensorInfo(m.shape, 'float32', out[1]), b.makeTensorInfo(v.shape, 'float32', out[2])];
}

function wasmAdamW({ inputs, backend, attrs }: { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs?: tf.NamedAttrMap }): tf.TensorInfo[] {
  const { p, g, m, v } = inputs as Inputs;
  const b = backend as WasmBackend;
  const outs = [b.makeOutput(p.shape, 'float32'), b.makeOutput(m.shape, 'float32'), b.makeOutput(v.shape, 'float32')];
  // Views made after every allocation: an allocation may grow (and so move) the heap.
  const [po, mo, vo] = outs.map((t) => b.typedArrayFromHeap(t));
  adamwStepArrays(b.typedArrayFromHeap(p), b.typedArrayFromHeap(g), b.typedArrayFromHeap(m), b.typedArrayFromHeap(v), attrs as unknown as AdamWStepAttrs, [
    po,
    mo,
    vo,
  ]);
  return outs;
}

/** One elementwise program over flat tensors: `body` sets `result` from the inputs read at `index`. */
function program(key: string, shape: number[], names: string[], uniforms: string, body: string): WebGPUProgram {
  const workgroupSize: [number, number, number] = [64, 1, 1];
  // A flat layout over one axis, as tfjs's own elementwise programs use (no import of the
  // WebGPU backend package here: it registers the backend as a side effect).
  const dispatchLayout = { x: [0] };
  return {
    variableNames: names,
    uniforms,
    workgroupSize,
    size: true,
    outputShape: shape,
    dispatchLayout,
    dispatch: [Math.ceil(shape[0] / workgroupSize[0]), 1, 1],
    shaderKey: `selfcest_adamw_${key}`,
    getUserCode: () => `
      fn main(index : i32) {
        if (index < uniforms.size) {
          ${names.map((n) => `let ${n.toLowerCase()} = get${n}ByOutputIndex(index);`).join('\n          ')}
          ${body}
          setOutputAtIndex(index, result);
        }
      }`,
  };
}

function webgpuAdamW({ inputs, backend, attrs }: { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs?: tf.NamedAttrMap }): tf.TensorInfo[] {
  const { p, g, m, v } = inputs as Inputs;
  const b = backend as WebgpuBackend;
  const a = attrs as unknown as AdamWStepAttrs;
  const f = (x: number) => ({ type: 'float32', data: [x] });
  const shape = [tf.util.sizeFromShape(p.shape)];
  const flat = (t: tf.TensorInfo) => ({ ...t, shape });
  const mNew = b.runWebGPUProgram(
    program('m', shape, ['M', 'G'], 'beta : f32, scale : f32,', 'let result = uniforms.beta * m + (1.0 - uniforms.beta) * (g * uniforms.scale);'),
    [flat(m), flat(g)],
    'float32',
    [f(a.beta1), f(a.scale)],
  );
  const vNew = b.runWebGPUProgram(
    program(
      'v',
      shape,
      ['V', 'G'],
      'beta : f32, scale : f32,',
      'let s = g * uniforms.scale;\n          let result = uniforms.beta * v + (1.0 - uniforms.beta) * s * s;',
    ),
    [flat(v), flat(g)],
    'float32',
    [f(a.beta2), f(a.scale)],
  );
  const pNew = b.runWebGPUProgram(
    program(
      'p',
      shape,
      ['P', 'M', 'V'],
      'lr : f32, eps : f32, bc1 : f32, bc2 : f32, decay : f32,',
      'let result = p - uniforms.lr * (m / uniforms.bc1) / (sqrt(v / uniforms.bc2) + uniforms.eps) - uniforms.decay * p;',
    ),
    [flat(p), mNew, vNew],
    'float32',
    [f(a.lr), f(a.eps), f(a.bc1), f(a.bc2), f(a.decay)],
  );
  return [
    { ...pNew, shape: p.shape },
    { ...mNew, shape: m.shape },
    { ...vNew, shape: v.shape },
  ];
}

/** Registers `SelfcestAdamW` for cpu, wasm and webgpu. */
export function registerAdamWKernels(): void {
  registerOnce(ADAMW_KERNEL, { cpu: cpuAdamW, wasm: wasmAdamW, webgpu: webgpuAdamW });
}
