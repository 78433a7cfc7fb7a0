/**
 * The project's WebAssembly kernel modules (base64 binaries from the .wat files), each compiled
 * once and instantiated over the memory of each tfjs wasm backend it serves, so its functions
 * read and write tensors where they lie.
 */
import * as tf from '@tensorflow/tfjs';

interface TensorData {
  memoryOffset: number;
}

/** The parts of tfjs-backend-wasm's BackendWasm the project's kernels use. */
export interface WasmBackend {
  dataIdMap: { get(dataId: object): TensorData | undefined };
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  disposeData(dataId: object): boolean;
  incRef(dataId: object): void;
  typedArrayFromHeap(t: tf.TensorInfo): Float32Array | Int32Array | Uint8Array;
  wasm: { asm?: { memory?: WebAssembly.Memory }; _malloc(bytes: number): number; _free(ptr: number): void };
}

/** A tensor's byte offset in the backend's memory. */
export function offsetOf(backend: WasmBackend, t: tf.TensorInfo, kernel: string): number {
  const d = backend.dataIdMap.get(t.dataId);
  if (d === undefined) throw new Error(`${kernel} (wasm): an input tensor has no data on the wasm backend`);
  return d.memoryOffset;
}

function memoryOf(backend: WasmBackend): WebAssembly.Memory | undefined {
  const mem = backend.wasm.asm?.memory;
  return mem instanceof WebAssembly.Memory ? mem : undefined;
}

/**
 * `instanceFor(backend)` gives the module's exports over that backend's memory, made on first use
 * (a re-created wasm backend has a new memory and gets its own instance), or undefined where the
 * platform cannot compile the module (no WebAssembly SIMD) or the memory is out of reach.
 */
export function kernelInstances<T>(base64: string): (backend: WasmBackend) => T | undefined {
  let compiled: WebAssembly.Module | null | undefined;
  const instances = new WeakMap<object, T>();
  const moduleOf = (): WebAssembly.Module | null => {
    if (compiled === undefined) {
      const bytes = Uint8Array.from(atob(base64), (ch) => ch.charCodeAt(0));
      try {
        compiled = WebAssembly.validate(bytes) ? new WebAssembly.Module(bytes) : null;
      } catch {
        compiled = null; // a compile refused here: tfjs's kernels stay in charge
      }
    }
    return compiled;
  };
  return (backend) => {
    const known = instances.get(backend);
    if (known !== undefined) return known;
    const memory = memoryOf(backend);
    const mod = moduleOf();
    if (memory === undefined || mod === null) return undefined;
    let made: T;
    try {
      made = new WebAssembly.Instance(mod, { env: { memory } }).exports as unknown as T;
    } catch {
      return undefined; // e.g. a memory the module cannot import
    }
    instances.set(backend, made);
    return made;
  };
}
