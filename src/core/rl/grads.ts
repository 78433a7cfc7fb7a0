/** Gradient bookkeeping shared by the SFT and policy-gradient updates. */
import * as tf from '@tensorflow/tfjs';

/**
 * Adds one micro-batch's gradients (keyed by variable name, as tf.variableGrads returns
 * them) into running sums keyed by parameter name. Takes ownership of `grads`.
 */
export function accumulateGrads(sums: Map<string, tf.Tensor>, params: Map<string, tf.Variable>, grads: tf.NamedTensorMap): void {
  for (const [name, v] of params) {
    const g = grads[v.name];
    if (!g) continue;
    addInto(sums, name, g);
  }
}

/** sums[name] += g, disposing what it replaces; takes ownership of `g`. */
export function addInto(sums: Map<string, tf.Tensor>, name: string, g: tf.Tensor): void {
  const prev = sums.get(name);
  if (!prev) {
    sums.set(name, g);
    return;
  }
  sums.set(name, tf.add(prev, g));
  prev.dispose();
  g.dispose();
}

/** Inputs of one tf.addN: WebGPU binds them all in one shader, with the output, under the 8 storage buffers a stage may bind. */
const ADD_N_CHUNK = 6;

/**
 * The sum of same-shape tensors; a new tensor, the inputs stay the caller's. tf.addN over chunks
 * of at most 6, then over the chunks' sums: one dispatch per chunk on WebGPU, where pairwise adds
 * take one per input. Not one tf.addN over all of them: its WebGPU kernel binds every input in
 * one shader, and past the storage buffers a stage may bind (8 by default) the dispatch is
 * invalid and reads back zeros (a grad norm of 0 on WebGPU with loss and KL right). tfjs 4.22
 * does not split it, as it splits concat.
 */
export function addAll(ts: readonly tf.Tensor[]): tf.Tensor {
  return tf.tidy(() => {
    if (ts.length === 0) return tf.scalar(0);
    let level: tf.Tensor[] = [...ts];
    while (level.length > 1) {
      const next: tf.Tensor[] = [];
      for (let i = 0; i < level.length; i += ADD_N_CHUNK) {
        const chunk = level.slice(i, i + ADD_N_CHUNK);
        next.push(chunk.length === 1 ? chunk[0] : tf.addN(chunk));
      }
      level = next;
    }
    return tf.clone(level[0]);
  });
}

/**
 * Σ‖g‖² over all gradients (the square of the global norm that clipping reads): each tensor's
 * as a dot product with itself (one matMul, where square and sum are two kernels), then summed.
 */
export function squaredGlobalNorm(grads: Iterable<tf.Tensor>): tf.Scalar {
  return tf.tidy(() => {
    const parts = [...grads].map((g) => {
      const flat = tf.reshape(g, [1, g.size]) as tf.Tensor2D;
      return tf.reshape(tf.matMul(flat, flat, false, true), []);
    });
    return addAll(parts) as tf.Scalar;
  });
}
