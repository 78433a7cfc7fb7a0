/**
 * Backend selection for tfjs, shared by the page, the workers, the CLI and the tests.
 *
 * wasm is the default everywhere a GPU is missing: in Node it is about 5x faster than the
 * plain cpu backend. It always runs single-threaded here: the threaded binary needs
 * cross-origin isolation and breaks under minification, and the project gets its
 * parallelism from workers instead.
 */
import * as tf from '@tensorflow/tfjs';
import { registerAdamWKernels } from './kernels/adamw';
import { registerCacheWriteKernels } from './kernels/cacheWrite';
import { registerWidenHalfKernels } from './kernels/widenHalf';
import { installFastBatchMatMul } from './wasmKernels/batchMatMul';
import { installDecodeKernels } from './wasmKernels/decodeLayer';

export const BACKENDS = ['wasm', 'cpu', 'webgpu'] as const;
export type BackendName = (typeof BACKENDS)[number];

/** A backend asked for: one by name, or 'auto' (chosen by measured speed, runtime/selectBackend.ts). */
export type BackendPreference = 'auto' | BackendName;

export interface InitBackendOptions {
  /**
   * Folder (ending in '/') holding the .wasm binaries: a URL in the page. Node finds them next to
   * the package without it. Only the first wasm initialisation uses it.
   */
  wasmPaths?: string;
}

/** Registering a backend twice fails, and the wasm binary can only be configured once. */
let wasmConfigured = false;

/** Imports the backend package, selects it and waits until it is ready; returns the active backend's name. */
export async function initBackend(name: BackendName, opts: InitBackendOptions = {}): Promise<string> {
  if (!(BACKENDS as readonly string[]).includes(name)) {
    throw new Error(`backend must be one of ${BACKENDS.join(', ')} (got ${JSON.stringify(name)})`);
  }
  if (name === 'wasm') {
    const wasm = await import('@tensorflow/tfjs-backend-wasm');
    if (!wasmConfigured) {
      // Pick the non-threaded binary (SIMD when available) and one XNNPACK thread.
      tf.env().set('WASM_HAS_MULTITHREAD_SUPPORT', false);
      wasm.setThreadsCount(1);
      if (opts.wasmPaths !== undefined) wasm.setWasmPaths(opts.wasmPaths);
      wasmConfigured = true;
    }
  } else if (name === 'webgpu') {
    await import('@tensorflow/tfjs-backend-webgpu');
  }
  // The project's fused kernels (AdamW) and the widening of 16-bit weights for every backend, and
  // the in-place cache write for cpu and wasm, before the backend's setup runs.
  registerAdamWKernels();
  registerCacheWriteKernels();
  registerWidenHalfKernels();
  // '@tensorflow/tfjs' registers cpu (and webgl) itself.
  const ok = await tf.setBackend(name);
  if (!ok) throw new Error(`backend ${name} could not be initialised on this platform`);
  await tf.ready();
  // Batched and transposed matMuls on wasm go to the project's SIMD kernel (wasmKernels/).
  // A cached decode layer as one kernel call on wasm (wasmKernels/decodeLayer.ts).
  if (name === 'wasm' && installFastBatchMatMul()) installDecodeKernels();
  return tf.getBackend();
}
