/**
 * The trainer's model: master weights, their origin (the loaded checkpoint or a seeded random
 * init, which `reset` returns to and the KL term is measured against), the optimizers, and the
 * policy version (one more for every optimizer update).
 */
import { type Checkpoint, encodeCheckpoint } from '../../core/io/checkpoint';
import { OPTIMIZER_FILES, decodeOptimizerFile, encodeOptimizerFile } from '../../core/io/optimizerFile';
import { type ModelCounters, ZERO_COUNTERS } from '../../core/io/provenance';
import { type ModelConfig, PRESETS, parameterCount, presetConfig } from '../../core/model/config';
import { type GPTParams, cloneParams, disposeParams, initParams, paramsFromArrays, paramsToArrays } from '../../core/model/params';
import { type Policy, policyToCheckpoint } from '../../core/policy';
import { ADAM_MOMENTS, AdamW, type AdamWConfig } from '../../core/optim/adamw';
import type { ModelReport } from './messages';

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
    /** The counters at the origin (0 unless it was loaded to resume), which `fresh` starts from. */
    private readonly originCounters: ModelCounters = ZERO_COUNTERS,
    /** What trained the origin checkpoint, when its record says (ModelReport.trainedBy). */
    readonly trainedBy: 'grpo' | 'sft' | null = null,
  ) {
    this.policy = { config, params: this.originParams(true) };
    this.reference = cloneParams(this.policy.params, { trainable: false });
    this.setCounters(originCounters);
  }

  static fromCheckpoint(ckpt: Checkpoint, source: string, counters: ModelCounters = ZERO_COUNTERS): TrainerModel {
    const preset = ckpt.selfcest.preset ?? presetOf(ckpt.config) ?? 'custom';
    return new TrainerModel(ckpt.config, preset, source, { kind: 'checkpoint', tensors: ckpt.tensors }, counters, trainedByOf(ckpt.selfcest.training));
  }

  /**
   * A model that goes on where it was: the origin (KL reference, what `reset` returns to) from
   * one checkpoint, the current weights and counters from another of the same shape. Optimizer
   * moments come separately (loadOptimizers); without them Adam restarts from zero.
   */
  static resumed(origin: Checkpoint, originCounters: ModelCounters, current: Checkpoint, counters: ModelCounters, source: string): TrainerModel {
    const a = origin.config;
    const b = current.config;
    const differ = (Object.keys(a) as (keyof ModelConfig)[]).filter((k) => a[k] !== b[k]);
    if (differ.length > 0)
      throw new Error(`loadFiles: the origin weights are of another shape than the current ones (${differ.map((k) => `${k} ${a[k]} vs ${b[k]}`).join(', ')})`);
    const model = TrainerModel.fromCheckpoint(origin, source, originCounters);
    model.rebuild(current.tensors);
    model.setCounters(counters);
    return model;
  }

  static random(preset: string, seed: number): TrainerModel {
    return new TrainerModel(presetConfig(preset), preset, `random init (seed ${seed})`, { kind: 'init', seed });
  }

  /** A fresh model from the same origin (what `reset` gives). */
  fresh(): TrainerModel {
    return new TrainerModel(this.config, this.preset, this.source, this.origin, this.originCounters, this.trainedBy);
  }

  counters(which: 'current' | 'origin' = 'current'): ModelCounters {
    return which === 'origin' ? { ...this.originCounters } : { policyVersion: this.version, grpoSteps: this.grpoSteps, sftSteps: this.sftSteps };
  }

  private setCounters(c: ModelCounters): void {
    this.version = c.policyVersion;
    this.grpoSteps = c.grpoSteps;
    this.sftSteps = c.sftSteps;
  }

  report(): ModelReport {
    return { preset: this.preset, parameters: parameterCount(this.config), policyVersion: this.version, source: this.source, trainedBy: this.trainedBy };
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

  /** Drops the GRPO optimizer's moments and step: the next `grpoOptimizer` starts from zero (GrpoConfig.restartOptimizer). */
  restartGrpoOptimizer(): void {
    this.grpoOpt?.dispose();
    this.grpoOpt = null;
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

  /**
   * The checkpoint files of the current weights (or of the origin's), with their counters: both
   * read in the same turn, before any await, so a step that runs meanwhile cannot tear them apart.
   */
  async exportFiles(
    training: Record<string, unknown>,
    which: 'current' | 'origin' = 'current',
    opts: { optimizer?: boolean } = {},
  ): Promise<{ files: Map<string, Uint8Array>; counters: ModelCounters }> {
    const counters = this.counters(which);
    const policy = which === 'origin' ? { config: this.config, params: this.reference } : this.policy;
    // With the current weights, optionally the optimizers' moments (OPTIMIZER_FILES): their reads start in this turn too.
    const optimizers =
      which === 'current' && opts.optimizer === true
        ? (['grpo', 'sft'] as const).flatMap((k) => {
            const opt = k === 'grpo' ? this.grpoOpt : this.sftOpt;
            return opt === null ? [] : [[OPTIMIZER_FILES[k], opt.state()] as const];
          })
        : [];
    const ckpt = await policyToCheckpoint(policy, { preset: this.preset, step: counters.policyVersion, training });
    const files = encodeCheckpoint(ckpt);
    for (const [name, state] of optimizers) files.set(name, encodeOptimizerFile(await state));
    return { files, counters };
  }

  /**
   * Optimizer moments saved with these weights (OPTIMIZER_FILES; either may be absent), so that
   * Adam goes on where it was instead of restarting from zero. Each file is checked whole against
   * this model's parameters before anything is assigned; errors name the file.
   */
  loadOptimizers(files: ReadonlyMap<string, Uint8Array>): void {
    const loaded = new Map<'grpo' | 'sft', AdamW>();
    try {
      for (const k of ['grpo', 'sft'] as const) {
        const name = OPTIMIZER_FILES[k];
        const bytes = files.get(name);
        if (bytes === undefined) continue;
        const { step, tensors } = decodeOptimizerFile(bytes, name);
        const opt = new AdamW(this.policy.params, { ...ADAM_MOMENTS, lr: 0, weightDecay: 0, gradClip: 0 });
        loaded.set(k, opt);
        try {
          opt.load(step, tensors);
        } catch (e) {
          throw new Error(`${name}: ${(e as Error).message}`);
        }
      }
    } catch (e) {
      loaded.forEach((o) => o.dispose());
      throw e;
    }
    // All checked: only now do they replace the running ones.
    for (const [k, opt] of loaded) {
      if (k === 'grpo') {
        this.grpoOpt?.dispose();
        this.grpoOpt = opt;
      } else {
        this.sftOpt?.dispose();
        this.sftOpt = opt;
      }
    }
  }

  /** Update counts of the optimizers (null: not made yet), for tests and reports. */
  optimizerSteps(): { grpo: number | null; sft: number | null } {
    return { grpo: this.grpoOpt?.step ?? null, sft: this.sftOpt?.step ?? null };
  }

  dispose(): void {
    this.disposeTensors();
  }

  private originParams(trainable: boolean): GPTParams {
    return this.origin.kind === 'checkpoint'
      ? paramsFromArrays(this.config, this.origin.tensors, { trainable })
      : initParams(this.config, this.origin.seed, { trainable });
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
  if (opt === null) return new AdamW(params, { ...ADAM_MOMENTS, ...settings });
  opt.cfg = { ...opt.cfg, ...settings };
  return opt;
}

/** The CLI writes its command's kind into selfcest.json's `training` (train: GRPO, sft: the warm start). */
function trainedByOf(training: Record<string, unknown> | undefined): 'grpo' | 'sft' | null {
  const kind = training?.kind;
  return kind === 'train' ? 'grpo' : kind === 'sft' ? 'sft' : null;
}

function presetOf(c: ModelConfig): string | null {
  for (const [name, p] of Object.entries(PRESETS)) {
    if ((Object.keys(p) as (keyof ModelConfig)[]).every((k) => p[k] === c[k])) return name;
  }
  return null;
}
