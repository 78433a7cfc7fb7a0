/**
 * An on/off switch for one of the project's own kernels: on by default, turned off to cross-check
 * the composed tfjs ops it replaces; `available()` says whether the active backend has it and it is on.
 */
import * as tf from '@tensorflow/tfjs';

export interface KernelSwitch {
  /** Turns the kernel off or on; returns the previous setting. */
  set(on: boolean): boolean;
  available(): boolean;
}

export function kernelSwitch(kernelName: string): KernelSwitch {
  let on = true;
  return {
    set(next: boolean): boolean {
      const was = on;
      on = next;
      return was;
    },
    available: () => on && tf.getKernel(kernelName, tf.getBackend()) !== undefined,
  };
}
