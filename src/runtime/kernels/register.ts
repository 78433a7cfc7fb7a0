/** Registering the project's own kernels: each name once, for the backends that have an implementation. */
import * as tf from '@tensorflow/tfjs';

const done = new Set<string>();

/** Registers `kernelName` for each backend given (once; a backend's kernel is used only while it is active). */
export function registerOnce(kernelName: string, byBackend: Partial<Record<'cpu' | 'wasm' | 'webgpu', unknown>>): void {
  if (done.has(kernelName)) return;
  done.add(kernelName);
  for (const [backendName, kernelFunc] of Object.entries(byBackend)) tf.registerKernel({ kernelName, backendName, kernelFunc: kernelFunc as tf.KernelFunc });
}
