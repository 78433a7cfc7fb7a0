/**
 * The trainer's model: master weights, their origin (what `reset` returns to and the KL term is
 * measured against), the optimizers, and the policy version (one more for every optimizer
 * update). One class for every model: the toy (ToyModel: a checkpoint or a seeded random init of a
 * preset) and a Hugging Face folder (HfModel, hfModel.ts: every weight or LoRA adapters trained);
 * what differs is behind the model seam (core/policyModel.ts) and the few methods below.
 */
import * as tf from '@tensorflow/tfjs';
import { forwardLogits } from '../../core/model/gpt';
import { type Checkpoint, encodeCheckpoint } from '../../core/io/checkpoint';
import { OPTIMIZER_FILES, decodeOptimizerFile, encodeOptimizerFile } from '../../core/io/optimizerFile';
import { type ModelCounters, ZERO_COUNTERS } from '../../core/io/provenance';
import { type ModelConfig, PRESETS, parameterCount, presetConfig } from '../../core/model/config';
import { type GPTParams, cloneParams, disposeParams, initParams, paramsFromArrays, paramsToArrays } from '../../core/model/params';
import { type Policy, policyToCheckpoint } from '../../core/policy';
import { type PolicyModel, type ReplicaSpec, type Scorer, toyPolicyModel, toyScorer } from '../../core/policyModel';
import type { Protocol } from '../../core/protocol/protocol';
import type { TrainSequence } from '../../core/parallel/sequences';
import type { RunConfig } from '../../core/runConfig';
import { taskMixOf } from '../../core/runConfigTargets';
import { type SftConfig, type SftLearner, sftMixSequences, toyLearner } from '../../core/sft/sft';
import { ADAM_MOMENTS, AdamW, type AdamWConfig } from '../../core/optim/adamw';
import type { ModelReport } from './messages';
import type { ModelSnapshot } from './stepper';

type Encode = (text: string) => number[];

/** What every model the engine trains keeps alike: counters, the two optimizers, their files. */
export abstract class TrainerModel {
  version = 0;
  /** GRPO steps and SFT steps taken since the origin (they seed the next prompts). */
  grpoSteps = 0;
  sftSteps = 0;
  private grpoOpt: AdamW | null = null;
  private sftOpt: AdamW | null = null;

  protected constructor(
    readonly source: string,
    /** The counters at the origin (0 unless it was loaded to resume), which `fresh` starts from. */
    protected readonly originCounters: ModelCounters,
    /** What trained the origin checkpoint, when its record says (ModelReport.trainedBy). */
    readonly trainedBy: 'grpo' | 'sft' | null,
  ) {}

  /** The model's kind and what the page names it by: the toy's preset, or the folder's family. */
  abstract readonly kind: 'toy' | 'hf';
  abstract readonly preset: string;
  /** The variables the optimizers update (every weight of the toy; a Hugging Face model's adapters or every weight). */
  abstract readonly trainable: Map<string, tf.Variable>;
  /** What a rollout or gradient worker rebuilds the model from (`trainable` is then the whole model); null where it cannot (LoRA). */
  abstract readonly replica: ReplicaSpec | null;
  /** The protocol the rollout pool's episodes run in, when it is not the toy's grammar (PooledDecoder). */
  abstract readonly poolProtocol: Protocol | undefined;
  abstract readonly parameters: number;
  abstract readonly maxPositions: number;
  /** The model as the one runner and trainer see it, weights as they are now (`encode`: the toy's tokenizer). */
  abstract policyModel(encode: Encode): PolicyModel;
  /** The model with its weights as they are now copied and frozen (the stepper's episode); the caller disposes it. */
  abstract snapshot(encode: Encode): ModelSnapshot;
  /** The frozen origin's scorer, the KL term's reference. */
  abstract referenceScorer(): Scorer;
  /** The warm start's step over this model. */
  abstract learner(): SftLearner;
  /** A warm-start step's demonstrations in this model's protocol. */
  abstract sftSequences(config: RunConfig, cfg: SftConfig, encode: Encode): TrainSequence[];
  /** The trained weights, read back (copies, safe to keep and to pack). */
  abstract weights(): Promise<Map<string, Float32Array>>;
  /**
   * Re-creates every tensor on the now active backend, the trained ones from a host copy of them
   * (after a lost GPU device or a change of backend). Optimizer moments restart from zero.
   */
  abstract rebuild(weights: ReadonlyMap<string, Float32Array>): Promise<void>;
  /** A fresh model from the same origin (what `reset` gives). */
  abstract fresh(): Promise<TrainerModel>;
  /** The files of the current weights (or of the origin's); `training` is the record a toy checkpoint keeps in selfcest.json. */
  protected abstract modelFiles(training: Record<string, unknown>, which: 'current' | 'origin', counters: ModelCounters): Promise<Map<string, Uint8Array>>;
  protected abstract disposeModel(): void;
  /** Logits [T, V] of `text` in the model's own tokens (the toy's: `encode`), under the current weights. */
  abstract logits(text: string, encode: Encode): Promise<{ tokens: number[]; logits: number[][] }>;

  counters(which: 'current' | 'origin' = 'current'): ModelCounters {
    return which === 'origin' ? { ...this.originCounters } : { policyVersion: this.version, grpoSteps: this.grpoSteps, sftSteps: this.sftSteps };
  }

  protected setCounters(c: ModelCounters): void {
    this.version = c.policyVersion;
    this.grpoSteps = c.grpoSteps;
    this.sftSteps = c.sftSteps;
  }

  report(): ModelReport {
    return { kind: this.kind, preset: this.preset, parameters: this.parameters, policyVersion: this.version, source: this.source, trainedBy: this.trainedBy };
  }

  /**
   * The GRPO optimizer with these settings. Its moments last from step to step (until `rebuild`);
   * the settings are the caller's current ones, so a changed weight decay or clip applies from
   * the next update.
   */
  grpoOptimizer(lr: number, weightDecay: number, gradClip: number): AdamW {
    this.grpoOpt = withSettings(this.grpoOpt, this.trainable, { lr, weightDecay, gradClip });
    return this.grpoOpt;
  }

  /** Drops the GRPO optimizer's moments and step: the next `grpoOptimizer` starts from zero (GrpoConfig.restartOptimizer). */
  restartGrpoOptimizer(): void {
    this.grpoOpt?.dispose();
    this.grpoOpt = null;
  }

  /** The SFT optimizer with these settings (see grpoOptimizer). */
  sftOptimizer(lr: number, weightDecay: number, gradClip: number): AdamW {
    this.sftOpt = withSettings(this.sftOpt, this.trainable, { lr, weightDecay, gradClip });
    return this.sftOpt;
  }

  /**
   * The model's files of the current weights (or of the origin's), with their counters: both
   * read in the same turn, before any await, so a step that runs meanwhile cannot tear them apart.
   */
  async exportFiles(
    training: Record<string, unknown>,
    which: 'current' | 'origin' = 'current',
    opts: { optimizer?: boolean } = {},
  ): Promise<{ files: Map<string, Uint8Array>; counters: ModelCounters }> {
    const counters = this.counters(which);
    // With the current weights, optionally the optimizers' moments (OPTIMIZER_FILES): their reads start in this turn too.
    const optimizers =
      which === 'current' && opts.optimizer === true
        ? (['grpo', 'sft'] as const).flatMap((k) => {
            const opt = k === 'grpo' ? this.grpoOpt : this.sftOpt;
            return opt === null ? [] : [[OPTIMIZER_FILES[k], opt.state()] as const];
          })
        : [];
    const files = await this.modelFiles(training, which, counters);
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
        const opt = new AdamW(this.trainable, { ...ADAM_MOMENTS, lr: 0, weightDecay: 0, gradClip: 0 });
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
    this.disposeOptimizers();
    this.disposeModel();
  }

  protected disposeOptimizers(): void {
    try {
      this.grpoOpt?.dispose();
      this.sftOpt?.dispose();
    } catch {
      // Tensors of a lost GPU device may fail to free; they are unreachable either way.
    }
    this.grpoOpt = null;
    this.sftOpt = null;
  }
}

type Origin = { kind: 'checkpoint'; tensors: ReadonlyMap<string, Float32Array> } | { kind: 'init'; seed: number };

/** The toy GPT: a checkpoint of this project, or a seeded random init of a preset. */
export class ToyModel extends TrainerModel {
  readonly kind = 'toy';
  policy: Policy;
  /** Frozen copy of the origin for the KL term. */
  reference: GPTParams;

  private constructor(
    readonly config: ModelConfig,
    readonly preset: string,
    source: string,
    private readonly origin: Origin,
    originCounters: ModelCounters = ZERO_COUNTERS,
    trainedBy: 'grpo' | 'sft' | null = null,
  ) {
    super(source, originCounters, trainedBy);
    this.policy = { config, params: this.originParams(true) };
    this.reference = cloneParams(this.policy.params, { trainable: false });
    this.setCounters(originCounters);
  }

  static fromCheckpoint(ckpt: Checkpoint, source: string, counters: ModelCounters = ZERO_COUNTERS): ToyModel {
    const preset = ckpt.selfcest.preset ?? presetOf(ckpt.config) ?? 'custom';
    return new ToyModel(ckpt.config, preset, source, { kind: 'checkpoint', tensors: ckpt.tensors }, counters, trainedByOf(ckpt.selfcest.training));
  }

  /**
   * A model that goes on where it was: the origin (KL reference, what `reset` returns to) from
   * one checkpoint, the current weights and counters from another of the same shape. Optimizer
   * moments come separately (loadOptimizers); without them Adam restarts from zero.
   */
  static resumed(origin: Checkpoint, originCounters: ModelCounters, current: Checkpoint, counters: ModelCounters, source: string): ToyModel {
    const a = origin.config;
    const b = current.config;
    const differ = (Object.keys(a) as (keyof ModelConfig)[]).filter((k) => a[k] !== b[k]);
    if (differ.length > 0)
      throw new Error(`loadFiles: the origin weights are of another shape than the current ones (${differ.map((k) => `${k} ${a[k]} vs ${b[k]}`).join(', ')})`);
    const model = ToyModel.fromCheckpoint(origin, source, originCounters);
    model.replaceWeights(current.tensors);
    model.setCounters(counters);
    return model;
  }

  static random(preset: string, seed: number): ToyModel {
    return new ToyModel(presetConfig(preset), preset, `random init (seed ${seed})`, { kind: 'init', seed });
  }

  get trainable(): GPTParams {
    return this.policy.params;
  }

  get replica(): ReplicaSpec {
    return { kind: 'toy', config: this.config };
  }

  readonly poolProtocol = undefined;

  get parameters(): number {
    return parameterCount(this.config);
  }

  get maxPositions(): number {
    return this.config.nPositions;
  }

  policyModel(encode: Encode): PolicyModel {
    return toyPolicyModel(this.policy, encode);
  }

  referenceScorer(): Scorer {
    return toyScorer(this.reference, this.config);
  }

  snapshot(encode: Encode): ModelSnapshot {
    const policy = { config: this.config, params: cloneParams(this.policy.params, { trainable: false }) };
    return { model: toyPolicyModel(policy, encode), dispose: () => disposeParams(policy.params) };
  }

  learner(): SftLearner {
    return toyLearner(this.policy.params, this.config);
  }

  sftSequences(config: RunConfig, cfg: SftConfig, encode: Encode): TrainSequence[] {
    return sftMixSequences(taskMixOf(config), cfg, this.sftSteps, encode, this.config.nPositions);
  }

  async fresh(): Promise<ToyModel> {
    return new ToyModel(this.config, this.preset, this.source, this.origin, this.originCounters, this.trainedBy);
  }

  async weights(): Promise<Map<string, Float32Array>> {
    const arrays = await paramsToArrays(this.policy.params);
    return new Map([...arrays].map(([name, a]) => [name, a.slice()]));
  }

  async rebuild(weights: ReadonlyMap<string, Float32Array>): Promise<void> {
    this.replaceWeights(weights);
  }

  private replaceWeights(weights: ReadonlyMap<string, Float32Array>): void {
    this.dispose();
    this.policy = { config: this.config, params: paramsFromArrays(this.config, weights) };
    this.reference = this.originParams(false);
  }

  protected async modelFiles(training: Record<string, unknown>, which: 'current' | 'origin', counters: ModelCounters): Promise<Map<string, Uint8Array>> {
    const policy = which === 'origin' ? { config: this.config, params: this.reference } : this.policy;
    return encodeCheckpoint(await policyToCheckpoint(policy, { preset: this.preset, step: counters.policyVersion, training }));
  }

  async logits(text: string, encode: Encode): Promise<{ tokens: number[]; logits: number[][] }> {
    return logitsOf(encode(text), this.config.nPositions, (ids) => forwardLogits(this.policy.params, this.config, ids));
  }

  private originParams(trainable: boolean): GPTParams {
    return this.origin.kind === 'checkpoint'
      ? paramsFromArrays(this.config, this.origin.tensors, { trainable })
      : initParams(this.config, this.origin.seed, { trainable });
  }

  protected disposeModel(): void {
    try {
      disposeParams(this.policy.params);
      disposeParams(this.reference);
    } catch {
      // Tensors of a lost GPU device may fail to free; they are unreachable either way.
    }
  }
}

/** The logits of `tokens` by `forward` (a [1, T] batch), checked against the model's window. */
export async function logitsOf(
  tokens: number[],
  maxPositions: number,
  forward: (ids: tf.Tensor2D) => tf.Tensor3D,
): Promise<{ tokens: number[]; logits: number[][] }> {
  if (tokens.length === 0) throw new Error('logits: text is empty');
  if (tokens.length > maxPositions) throw new Error(`logits: text has ${tokens.length} tokens; the model holds ${maxPositions}`);
  const out = tf.tidy(() => forward(tf.tensor2d([tokens], [1, tokens.length], 'int32')));
  try {
    return { tokens, logits: (await out.array())[0] };
  } finally {
    out.dispose();
  }
}

/** `opt` (or a new optimizer over `params`) set to `settings`; its moments and step are kept. */
function withSettings(opt: AdamW | null, params: Map<string, tf.Variable>, settings: Pick<AdamWConfig, 'lr' | 'weightDecay' | 'gradClip'>): AdamW {
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
