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
