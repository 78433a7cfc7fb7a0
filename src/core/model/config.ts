/**
 * Model configuration and the parameter table.
 *
 * Parameters are named exactly as in Hugging Face's GPT2LMHeadModel so that export is a
 * rename-free write and a reader of either codebase recognises them. Linear weights use
 * the Conv1D layout [in, out], so the forward pass is x · W with no transposes.
 */
import { VOCAB_SIZE } from '../tokenizer/vocab';

export interface ModelConfig {
  nLayer: number;
  nEmbd: number;
  nHead: number;
  /** Maximum context length (positions). */
  nPositions: number;
  vocabSize: number;
  /** LayerNorm epsilon; GPT-2 uses 1e-5. */
  layerNormEps: number;
}

export type PresetName = 'tiny' | 'small';

export const PRESETS: Record<PresetName, ModelConfig> = {
  // For tests and the software-WebGPU browser: trains in seconds.
  tiny: { nLayer: 2, nEmbd: 64, nHead: 4, nPositions: 256, vocabSize: VOCAB_SIZE, layerNormEps: 1e-5 },
  // The default: 0.8M parameters, a few hours of warm start on one core.
  small: { nLayer: 4, nEmbd: 128, nHead: 4, nPositions: 256, vocabSize: VOCAB_SIZE, layerNormEps: 1e-5 },
};

export function presetConfig(name: string): ModelConfig {
  if (name !== 'tiny' && name !== 'small') {
    throw new Error(`preset must be one of tiny, small (got ${JSON.stringify(name)})`);
  }
  return { ...PRESETS[name] };
}

/** Throws a message naming the field and its allowed range. */
/** Same architecture, field by field (weights of one fit the other). */
export function sameModel(a: ModelConfig, b: ModelConfig): boolean {
  return (Object.keys(a) as (keyof ModelConfig)[]).every((k) => a[k] === b[k]) && Object.keys(a).length === Object.keys(b).length;
}

export function validateModelConfig(c: ModelConfig): void {
  const positiveInt = (field: keyof ModelConfig, max: number) => {
    const v = c[field];
    if (!Number.isInteger(v) || v < 1 || v > max) {
      throw new Error(`model config: ${field} must be an integer in [1, ${max}] (got ${v})`);
    }
  };
  positiveInt('nLayer', 48);
  positiveInt('nEmbd', 4096);
  positiveInt('nHead', 64);
  positiveInt('nPositions', 8192);
  positiveInt('vocabSize', 1 << 20);
  if (c.nEmbd % c.nHead !== 0) {
    throw new Error(`model config: nEmbd (${c.nEmbd}) must be divisible by nHead (${c.nHead})`);
  }
  if (!(c.layerNormEps > 0 && c.layerNormEps < 1)) {
    throw new Error(`model config: layerNormEps must be in (0, 1) (got ${c.layerNormEps})`);
  }
}

export interface ParamSpec {
  name: string;
  shape: number[];
  /** How the parameter is initialised (GPT-2 scheme). */
  init: 'normal' | 'residual' | 'zeros' | 'ones';
}

/** Every trainable tensor, in a fixed order (export order, optimizer order). */
export function paramSpecs(c: ModelConfig): ParamSpec[] {
  const d = c.nEmbd;
  const specs: ParamSpec[] = [
    { name: 'transformer.wte.weight', shape: [c.vocabSize, d], init: 'normal' },
    { name: 'transformer.wpe.weight', shape: [c.nPositions, d], init: 'normal' },
  ];
  for (let i = 0; i < c.nLayer; i++) {
    const p = `transformer.h.${i}`;
    specs.push(
      { name: `${p}.ln_1.weight`, shape: [d], init: 'ones' },
      { name: `${p}.ln_1.bias`, shape: [d], init: 'zeros' },
      { name: `${p}.attn.c_attn.weight`, shape: [d, 3 * d], init: 'normal' },
      { name: `${p}.attn.c_attn.bias`, shape: [3 * d], init: 'zeros' },
      // Residual projections are scaled by 1/sqrt(2·nLayer) so the residual stream's
      // variance does not grow with depth (GPT-2 paper, §2.3).
      { name: `${p}.attn.c_proj.weight`, shape: [d, d], init: 'residual' },
      { name: `${p}.attn.c_proj.bias`, shape: [d], init: 'zeros' },
      { name: `${p}.ln_2.weight`, shape: [d], init: 'ones' },
      { name: `${p}.ln_2.bias`, shape: [d], init: 'zeros' },
      { name: `${p}.mlp.c_fc.weight`, shape: [d, 4 * d], init: 'normal' },
      { name: `${p}.mlp.c_fc.bias`, shape: [4 * d], init: 'zeros' },
      { name: `${p}.mlp.c_proj.weight`, shape: [4 * d, d], init: 'residual' },
      { name: `${p}.mlp.c_proj.bias`, shape: [d], init: 'zeros' },
    );
  }
  specs.push({ name: 'transformer.ln_f.weight', shape: [d], init: 'ones' }, { name: 'transformer.ln_f.bias', shape: [d], init: 'zeros' });
  return specs;
}

export function parameterCount(c: ModelConfig): number {
  return paramSpecs(c).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}
