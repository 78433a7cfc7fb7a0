/**
 * The trainer's model: master weights, their origin (the loaded checkpoint or a seeded random
 * init, which `reset` returns to and the KL term is measured against), the optimizers, and the
 * policy version (one more for every optimizer update).
 */
import { type Checkpoint, encodeCheckpoint } from '../core/io/checkpoint';
import { type ModelConfig, PRESETS, parameterCount, presetConfig } from '../core/model/config';
import { type GPTParams, cloneParams, disposeParams, initParams, paramsFromArrays, paramsToArrays } from '../core/model/params';
import { type Policy, policyToCheckpoint } from '../core/policy';
import { ADAMW_DEFAULTS, AdamW, type AdamWConfig } from '../core/rl/optim';
import type { ModelReport } from './protocol';

type Origin = { kind: 'checkpoint'; tensors: ReadonlyMap<string, Float32Array> } | { kind: 'init'; seed: number };

export class TrainerModel {
  policy: Policy;
  /** Frozen copy of the origin for the KL term. */
  reference: GPTParams;
  version = 0;
  /** GRPO steps and SFT steps taken since the origin (they seed the next prompts). */
  grpoSteps = 0;
  sftSteps = 0;
  private grpoOpt: AdamW | null = null;
  private sftOpt: AdamW | null = null;

  private constructor(
    readonly config: ModelConfig,
    readonly preset: string,
    readonly source: string,
    private readonly origin: Origin,
  ) {
    this.policy = { config, params: this.originParams(true) };
    this.reference = cloneParams(this.policy.params, { trainable: false });
  }

  static fromCheckpoint(ckpt: Checkpoint, source: string): TrainerModel {
    const preset = ckpt.selfcest.preset ?? presetOf(ckpt.config) ?? 'custom';
    return new TrainerModel(ckpt.config, preset, source, { kind: 'checkpoint', tensors: ckpt.tensors });
  }

  static random(preset: string, seed: number): TrainerModel {
    return new TrainerModel(presetConfig(preset), preset, `random init (seed ${seed})`, { kind: 'init', seed });
  }

  /** A fresh model from the same origin (what `reset` gives). */
  fresh(): TrainerModel {
    return new TrainerModel(this.config, this.preset, this.source, this.origin);
  }

  report(): ModelReport {
    return { preset: this.preset, parameters: parameterCount(this.config), policyVersion: this.version, source: this.source };
  }

  /**
   * The GRPO optimizer with these settings. Its moments last from step to step (until `rebuild`);
   * the settings are the caller's current ones, so a changed weight decay or clip applies from
   * the next update.
   */
  grpoOptimizer(lr: number, weightDecay: number, gradClip: number): AdamW {
    this.grpoOpt = withSettings(this.grpoOpt, this.policy.params, { lr, weightDecay, gradClip });
    return this.grpoOpt;
  }

  /** The SFT optimizer with these settings (see grpoOptimizer). */
  sftOptimizer(lr: number, weightDecay: number, gradClip: number): AdamW {
    this.sftOpt = withSettings(this.sftOpt, this.policy.params, { lr, weightDecay, gradClip });
    return this.sftOpt;
  }

  /** The current weights, read back (copies, safe to keep and to pack). */
  async weights(): Promise<Map<string, Float32Array>> {
    const arrays = await paramsToArrays(this.policy.params);
    return new Map([...arrays].map(([name, a]) => [name, a.slice()]));
  }

  /**
   * Re-creates every tensor on the now active backend from a host copy of the weights (after a
   * lost GPU device). Optimizer moments lived on the lost device and restart from zero.
   */
  rebuild(weights: ReadonlyMap<string, Float32Array>): void {
    this.disposeTensors();
    this.policy = { config: this.config, params: paramsFromArrays(this.config, weights) };
    this.reference = this.originParams(false);
  }

  async exportFiles(training: Record<string, unknown>): Promise<Map<string, Uint8Array>> {
    const ckpt = await policyToCheckpoint(this.policy, { preset: this.preset, step: this.version, training });
    return encodeCheckpoint(ckpt);
  }

  dispose(): void {
    this.disposeTensors();
  }

  private originParams(trainable: boolean): GPTParams {
    return this.origin.kind === 'checkpoint' ? paramsFromArrays(this.config, this.origin.tensors, { trainable }) : initParams(this.config, this.origin.seed, { trainable });
  }

  private disposeTensors(): void {
    try {
      this.grpoOpt?.dispose();
      this.sftOpt?.dispose();
      disposeParams(this.policy.params);
      disposeParams(this.reference);
    } catch {
      // Tensors of a lost GPU device may fail to free; they are unreachable either way.
    }
    this.grpoOpt = null;
    this.sftOpt = null;
  }
}

/** `opt` (or a new optimizer over `params`) set to `settings`; its moments and step are kept. */
function withSettings(opt: AdamW | null, params: GPTParams, settings: Pick<AdamWConfig, 'lr' | 'weightDecay' | 'gradClip'>): AdamW {
  if (opt === null) return new AdamW(params, { ...ADAMW_DEFAULTS, ...settings });
  opt.cfg = { ...opt.cfg, ...settings };
  return opt;
}

function presetOf(c: ModelConfig): string | null {
  for (const [name, p] of Object.entries(PRESETS)) {
    if ((Object.keys(p) as (keyof ModelConfig)[]).every((k) => p[k] === c[k])) return name;
  }
  return null;
}
