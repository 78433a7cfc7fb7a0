/**
 * The model's weights: one tf.Variable per entry of paramSpecs, keyed by its Hugging Face name.
 *
 * Initial values are drawn in JavaScript from the project's Rng, in paramSpecs order, so a seed
 * gives bit-identical weights on every backend (tf.randomNormal would depend on the backend).
 */
import * as tf from '@tensorflow/tfjs';
import { Rng } from '../rng';
import { type ModelConfig, type ParamSpec, paramSpecs, validateModelConfig } from './config';

export type GPTParams = Map<string, tf.Variable>;

export interface ParamOptions {
  /** Whether optimizers may update the variables (default true). */
  trainable?: boolean;
}

const INIT_STD = 0.02;

function sizeOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

function makeVariable(values: Float32Array, shape: number[], trainable: boolean): tf.Variable {
  // No variable name: tfjs names must be globally unique and several models (policy, frozen
  // reference, checkpoints in a test) coexist.
  return tf.tidy(() => tf.variable(tf.tensor(values, shape, 'float32'), trainable));
}

/** GPT-2 initialisation: N(0, 0.02), residual projections N(0, 0.02/sqrt(2·nLayer)), LN gains 1, biases 0. */
export function initParams(config: ModelConfig, seed: number, opts: ParamOptions = {}): GPTParams {
  validateModelConfig(config);
  const rng = new Rng(seed);
  const residualStd = INIT_STD / Math.sqrt(2 * config.nLayer);
  const params: GPTParams = new Map();
  for (const spec of paramSpecs(config)) {
    const values = new Float32Array(sizeOf(spec.shape));
    if (spec.init === 'ones') values.fill(1);
    else if (spec.init === 'normal' || spec.init === 'residual') {
      const std = spec.init === 'normal' ? INIT_STD : residualStd;
      for (let i = 0; i < values.length; i++) values[i] = std * rng.normal();
    }
    params.set(spec.name, makeVariable(values, spec.shape, opts.trainable ?? true));
  }
  return params;
}

/**
 * Builds variables from plain arrays (an imported checkpoint). Every name of paramSpecs must be
 * present with exactly the right number of finite values, and nothing else; otherwise it throws
 * a message naming the tensor, before any variable is created.
 */
export function paramsFromArrays(config: ModelConfig, arrays: ReadonlyMap<string, Float32Array>, opts: ParamOptions = {}): GPTParams {
  validateModelConfig(config);
  const specs = paramSpecs(config);
  const known = new Set(specs.map((s) => s.name));
  const unknown = [...arrays.keys()].filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new Error(`weights: unexpected tensor(s) ${unknown.slice(0, 5).join(', ')} for this model config`);
  }
  for (const spec of specs) checkArray(spec, arrays.get(spec.name));
  const params: GPTParams = new Map();
  for (const spec of specs) {
    params.set(spec.name, makeVariable(arrays.get(spec.name) as Float32Array, spec.shape, opts.trainable ?? true));
  }
  return params;
}

function checkArray(spec: ParamSpec, values: Float32Array | undefined): void {
  if (values === undefined) throw new Error(`weights: missing tensor ${spec.name} (shape [${spec.shape.join(', ')}])`);
  const expected = sizeOf(spec.shape);
  if (values.length !== expected) {
    throw new Error(`weights: ${spec.name} must have shape [${spec.shape.join(', ')}] (${expected} values), got ${values.length} values`);
  }
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i])) throw new Error(`weights: ${spec.name} has a non-finite value at index ${i}`);
  }
}

/** Reads every variable back, in the map's order (paramSpecs order for maps built here). */
export async function paramsToArrays(params: ReadonlyMap<string, tf.Tensor>): Promise<Map<string, Float32Array>> {
  const entries = [...params.entries()];
  const values = await Promise.all(entries.map(([, v]) => v.data()));
  const out = new Map<string, Float32Array>();
  entries.forEach(([name], i) => {
    const data = values[i];
    if (!(data instanceof Float32Array)) throw new Error(`weights: ${name} is not float32`);
    out.set(name, data);
  });
  return out;
}

export function disposeParams(params: GPTParams): void {
  for (const v of params.values()) v.dispose();
  params.clear();
}

/**
 * An independent copy (e.g. the frozen reference policy for the KL term, or the rollout
 * policy while the trainer moves on). Later assignments to either side do not affect the other.
 * `trainable` defaults to the source's flag.
 */
export function cloneParams(params: GPTParams, opts: ParamOptions = {}): GPTParams {
  const out: GPTParams = new Map();
  for (const [name, v] of params) {
    // tfjs tensors are immutable and Variable.assign swaps in new storage, so the copy can
    // start from a clone of the current value.
    out.set(
      name,
      tf.tidy(() => tf.variable(v.clone(), opts.trainable ?? v.trainable)),
    );
  }
  return out;
}
