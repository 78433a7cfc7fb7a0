/** Gradient bookkeeping shared by the SFT and policy-gradient updates. */
import * as tf from '@tensorflow/tfjs';

/**
 * Adds one micro-batch's gradients (keyed by variable name, as tf.variableGrads returns
 * them) into running sums keyed by parameter name. Takes ownership of `grads`.
 */
export function accumulateGrads(sums: Map<string, tf.Tensor>, params: ReadonlyMap<string, tf.Variable>, grads: tf.NamedTensorMap): void {
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

/**
 * One micro-batch's part of an update, computed on this thread: its gradients by parameter name
 * and its scalars (the loss, then whatever else the update sums), not yet read back.
 */
export interface GradItem {
  grads: Map<string, tf.Tensor>;
  scalars: tf.Tensor1D;
}

/** The same computed by a gradient worker, read back: flat arrays by parameter name, and numbers. */
export interface GradItemAway {
  grads: ReadonlyMap<string, Float32Array>;
  scalars: number[];
}

export function releaseGradItem(item: GradItem): void {
  item.grads.forEach((g) => g.dispose());
  item.scalars.dispose();
}

/** A gradient item read back (for the wire); the tensors are disposed. */
export async function readGradItem(item: GradItem): Promise<GradItemAway> {
  try {
    const grads = new Map<string, Float32Array>();
    for (const [name, g] of item.grads) grads.set(name, (await g.data()) as Float32Array);
    return { grads, scalars: Array.from(await item.scalars.data()) };
  } finally {
    releaseGradItem(item);
  }
}

/**
 * The items of an update added up in index order, whoever computed them: `add` them in that
 * order (it takes them over), then `finish`. The gradients are each the left fold g₀ + g₁ + …,
 * as one thread adds them, kept as running sums; the scalars (`width` an item) are read back
 * once at the end for the items computed here and summed in double precision.
 */
export class GradFold {
  readonly grads = new Map<string, tf.Tensor>();
  private readonly scalars: (tf.Tensor1D | number[])[] = [];

  constructor(
    private readonly params: ReadonlyMap<string, tf.Variable>,
    private readonly width: number,
  ) {}

  /** Takes the next item over; one that does not fit (checked first) throws and stays the caller's. */
  add(item: { here: GradItem } | { away: GradItemAway }): void {
    if ('here' in item) {
      if (item.here.scalars.size !== this.width) throw new Error(`gradients: an item with ${item.here.scalars.size} scalars, ${this.width} expected`);
      this.scalars.push(item.here.scalars);
      for (const [name, g] of item.here.grads) addInto(this.grads, name, g);
      return;
    }
    const { grads, scalars } = item.away;
    if (scalars.length !== this.width) throw new Error(`gradient worker: an item with ${scalars.length} scalars, ${this.width} expected`);
    for (const [name, data] of grads) {
      const v = this.params.get(name);
      if (!v) throw new Error(`gradient worker: a gradient for ${name}, which the policy does not have`);
      if (data.length !== v.size) throw new Error(`gradient worker: ${data.length} values for ${name}, which has ${v.size}`);
    }
    this.scalars.push(scalars);
    for (const [name, data] of grads) addInto(this.grads, name, tf.tensor(data, (this.params.get(name) as tf.Variable).shape));
  }

  /** The summed scalars (one readback). The gradients stay in `grads`, the caller's to dispose. */
  async finish(): Promise<number[]> {
    const local = this.scalars.filter((s): s is tf.Tensor1D => !Array.isArray(s));
    let read: Float32Array = new Float32Array(0);
    if (local.length > 0) {
      const all = tf.concat(local);
      try {
        read = (await all.data()) as Float32Array;
      } finally {
        all.dispose();
      }
    }
    const sums = new Array<number>(this.width).fill(0);
    let at = 0;
    for (const s of this.scalars) {
      const values = Array.isArray(s) ? s : read.subarray(at, (at += this.width));
      values.forEach((v, j) => (sums[j] += v));
    }
    this.releaseScalars();
    return sums;
  }

  /** Frees everything held (after a failure). */
  release(): void {
    this.grads.forEach((t) => t.dispose());
    this.grads.clear();
    this.releaseScalars();
  }

  private releaseScalars(): void {
    for (const s of this.scalars) if (!Array.isArray(s)) s.dispose();
    this.scalars.length = 0;
  }
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
