/**
 * LoRA adapters over a decoder's linear layers, as PEFT defines them: for a target module with
 * weight W [out, in], y = x·Wᵀ + (α / r)·(x·Aᵀ)·Bᵀ with A [r, in] and B [out, r] trained and W
 * frozen (PEFT's `LoraLayer`, no dropout, no rsLoRA, no bias). A module is a target when its last
 * name part is in `targetModules` (PEFT's list form). The adapter's files are PEFT's:
 * adapter_config.json and adapter_model.safetensors with tensors named
 * `base_model.model.<module>.lora_A.weight` / `lora_B.weight`.
 */
import * as tf from '@tensorflow/tfjs';
import { asFloat } from './halfWeights';
import type { DecodedTensor, TensorToEncode } from '../io/safetensors';
import { Rng } from '../rng';
import { type Adapters, type DecoderConfig, conv1dWeights, decoderTensorSpecs } from './decoder';

export interface LoraConfig {
  r: number;
  alpha: number;
  /** Last name parts of the linear layers adapted (q_proj, v_proj, …). */
  targetModules: string[];
}

export class LoraConfigError extends Error {
  constructor(message: string) {
    super(`adapter_config.json: ${message}`);
    this.name = 'LoraConfigError';
  }
}

/** The linear layers a decoder has, by module name (HF, without .weight), with [out, in] (GPT-2's Conv1D weights are stored [in, out]). */
export function linearModules(c: DecoderConfig): Map<string, [number, number]> {
  const out = new Map<string, [number, number]>();
  const conv1d = conv1dWeights(c);
  for (const { name, shape } of decoderTensorSpecs(c)) {
    const linear = conv1d ? name.startsWith('transformer.h.') && shape.length === 2 : name.startsWith('model.layers.') && name.endsWith('_proj.weight');
    if (!linear) continue;
    out.set(name.slice(0, -'.weight'.length), conv1d ? [shape[1], shape[0]] : [shape[0], shape[1]]);
  }
  return out;
}

/** The attention projections of a family, the default LoRA targets: q/k/v/o, or GPT-2's fused c_attn (its `c_proj` would also take the MLP's). */
export function attentionTargets(c: Pick<DecoderConfig, 'family'>): string[] {
  return c.family === 'gpt2' ? ['c_attn'] : ['q_proj', 'k_proj', 'v_proj', 'o_proj'];
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * PEFT's adapter_config.json, refusing what this implementation would compute differently.
 * `fan_in_fan_out` must say how the model stores its weights: true for GPT-2's Conv1D, as PEFT sets it.
 */
export function loraConfigFromPeft(raw: unknown, c: Pick<DecoderConfig, 'family'>): LoraConfig {
  if (!isObject(raw)) throw new LoraConfigError('must be a JSON object');
  if (raw.peft_type !== undefined && raw.peft_type !== 'LORA') throw new LoraConfigError(`peft_type ${JSON.stringify(raw.peft_type)} is not LORA`);
  const r = raw.r;
  if (!(typeof r === 'number' && Number.isInteger(r) && r > 0)) throw new LoraConfigError(`r must be a positive integer (got ${JSON.stringify(r)})`);
  const alpha = raw.lora_alpha ?? 8;
  if (!(typeof alpha === 'number' && Number.isFinite(alpha) && alpha > 0))
    throw new LoraConfigError(`lora_alpha must be a positive number (got ${JSON.stringify(alpha)})`);
  const targets = raw.target_modules;
  if (!(Array.isArray(targets) && targets.length > 0 && targets.every((t) => typeof t === 'string'))) {
    throw new LoraConfigError(`target_modules must be a non-empty list of module names (got ${JSON.stringify(targets)}; a regex string is not read)`);
  }
  for (const [key, ok] of [
    ['use_rslora', (v: unknown) => v === undefined || v === false],
    ['use_dora', (v: unknown) => v === undefined || v === false],
    ['fan_in_fan_out', (v: unknown) => (conv1dWeights(c) ? v === true : v === undefined || v === false)],
    ['bias', (v: unknown) => v === undefined || v === 'none'],
    ['lora_bias', (v: unknown) => v === undefined || v === false],
    ['rank_pattern', (v: unknown) => v === undefined || v === null || (isObject(v) && Object.keys(v).length === 0)],
    ['alpha_pattern', (v: unknown) => v === undefined || v === null || (isObject(v) && Object.keys(v).length === 0)],
    ['layers_to_transform', (v: unknown) => v === undefined || v === null],
    ['modules_to_save', (v: unknown) => v === undefined || v === null],
  ] as const) {
    if (!ok(raw[key])) throw new LoraConfigError(`${key} ${JSON.stringify(raw[key])} is not supported`);
  }
  return { r, alpha, targetModules: [...(targets as string[])] };
}

/** PEFT's adapter_config.json for a config (what `save_pretrained` writes, the fields PEFT needs to load it). */
export function peftAdapterConfig(l: LoraConfig, c: Pick<DecoderConfig, 'family'>, baseModel: string | null): Record<string, unknown> {
  return {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: baseModel,
    r: l.r,
    lora_alpha: l.alpha,
    lora_dropout: 0,
    target_modules: l.targetModules,
    bias: 'none',
    fan_in_fan_out: conv1dWeights(c),
    use_rslora: false,
    use_dora: false,
    inference_mode: false,
  };
}

/** The adapted modules of a decoder under a config; refuses a target the model does not have. */
function targetsOf(c: DecoderConfig, l: LoraConfig): Map<string, [number, number]> {
  const modules = linearModules(c);
  const parts = new Set([...modules.keys()].map((m) => m.split('.').at(-1) as string));
  for (const t of l.targetModules)
    if (!parts.has(t)) throw new LoraConfigError(`target module ${t} is not a linear layer of this model (${[...parts].sort().join(', ')})`);
  return new Map([...modules].filter(([m]) => l.targetModules.includes(m.split('.').at(-1) as string)));
}

const PEFT_PREFIX = 'base_model.model.';

/**
 * A trainable variable holding `t`'s values; `t`'s own handle is released (else its data outlives
 * the variable). Unnamed: tfjs names it uniquely, so two models' adapters may live at once.
 */
function variableOf(t: tf.Tensor): tf.Variable {
  const v = tf.variable(t, true);
  t.dispose();
  return v;
}

export class Lora implements Adapters {
  private constructor(
    readonly config: LoraConfig,
    /** The base stores its weights [in, out] (GPT-2's Conv1D): a merge adds (B·A)ᵀ. */
    private readonly conv1d: boolean,
    /** `${module}.lora_A` [r, in] and `${module}.lora_B` [out, r], trainable. */
    readonly params: Map<string, tf.Variable>,
  ) {}

  get scale(): number {
    return this.config.alpha / this.config.r;
  }

  /** New adapters as PEFT initialises them: A Kaiming-uniform (bound 1/√in), B zero, so the model starts as the base. */
  static init(c: DecoderConfig, l: LoraConfig, seed: number): Lora {
    const params = new Map<string, tf.Variable>();
    [...targetsOf(c, l)].forEach(([m, [outDim, inDim]], index) => {
      const rng = Rng.stream(seed, 'lora-init', index);
      const bound = 1 / Math.sqrt(inDim);
      const a = Float32Array.from({ length: l.r * inDim }, () => (rng.next() * 2 - 1) * bound);
      params.set(`${m}.lora_A`, variableOf(tf.tensor2d(a, [l.r, inDim])));
      params.set(`${m}.lora_B`, variableOf(tf.zeros([outDim, l.r])));
    });
    return new Lora(l, conv1dWeights(c), params);
  }

  /** Adapters from PEFT's adapter_model.safetensors tensors, every target's A and B present with its shape. */
  static fromPeft(c: DecoderConfig, l: LoraConfig, tensors: ReadonlyMap<string, DecodedTensor>): Lora {
    const params = new Map<string, tf.Variable>();
    try {
      for (const [m, [outDim, inDim]] of targetsOf(c, l)) {
        for (const [part, shape] of [
          ['lora_A', [l.r, inDim]],
          ['lora_B', [outDim, l.r]],
        ] as const) {
          const name = `${PEFT_PREFIX}${m}.${part}.weight`;
          const t = tensors.get(name);
          if (!t) throw new Error(`adapter_model.safetensors lacks ${name}`);
          if (t.shape.length !== 2 || t.shape[0] !== shape[0] || t.shape[1] !== shape[1]) {
            throw new Error(`adapter_model.safetensors: ${name} has shape [${t.shape.join(', ')}], the config needs [${shape.join(', ')}]`);
          }
          params.set(`${m}.${part}`, variableOf(tf.tensor2d(t.data, [shape[0], shape[1]])));
        }
      }
    } catch (e) {
      params.forEach((v) => v.dispose());
      throw e;
    }
    return new Lora(l, conv1dWeights(c), params);
  }

  delta(module: string, x: tf.Tensor): tf.Tensor | null {
    const a = this.params.get(`${module}.lora_A`);
    const b = this.params.get(`${module}.lora_B`);
    if (!a || !b) return null;
    const shape = x.shape;
    const flat = tf.reshape(x, [-1, shape[shape.length - 1]]);
    const low = tf.matMul(tf.matMul(flat, a, false, true), b, false, true);
    return tf.mul(tf.reshape(low, [...shape.slice(0, -1), b.shape[0]]), this.scale);
  }

  /** A copy of the adapters as they are now, in variables of its own (the caller disposes them). */
  clone(): Lora {
    return new Lora(this.config, this.conv1d, new Map([...this.params].map(([k, v]) => [k, variableOf(tf.clone(v))])));
  }

  /** The name in adapter_model.safetensors of the adapter `key` (`${module}.lora_A`). */
  peftName(key: string): string {
    const cut = key.lastIndexOf('.');
    return `${PEFT_PREFIX}${key.slice(0, cut)}.${key.slice(cut + 1)}.weight`;
  }

  /** The tensors of adapter_model.safetensors, PEFT's names. */
  async peftTensors(): Promise<TensorToEncode[]> {
    return Promise.all([...this.params].map(async ([key, v]) => ({ name: this.peftName(key), shape: [...v.shape], data: (await v.data()) as Float32Array })));
  }

  /**
   * The base weights with the adapters merged in, W + (α / r)·B·A for each target ((B·A)ᵀ for a
   * Conv1D weight; as PEFT's merge_and_unload): the model's own tensors, to save in its HF format.
   */
  async merged(base: ReadonlyMap<string, tf.Tensor>): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    for (const [name, t] of base) {
      const m = name.endsWith('.weight') ? name.slice(0, -'.weight'.length) : null;
      const a = m && this.params.get(`${m}.lora_A`);
      const b = m && this.params.get(`${m}.lora_B`);
      const w = tf.tidy(() => {
        if (!a || !b) return asFloat(t);
        const ba = this.conv1d ? tf.matMul(a, b, true, true) : tf.matMul(b, a);
        return tf.add(asFloat(t), tf.mul(ba, this.scale));
      });
      out.set(name, (await w.data()) as Float32Array);
      if (w !== t) w.dispose();
    }
    return out;
  }

  dispose(): void {
    this.params.forEach((v) => v.dispose());
  }
}
