/**
 * A Hugging Face model folder as the engine's model (TrainerModel): the folder's files are its
 * origin (what `reset` and a lost device rebuild from, its weights the KL reference); the run
 * config says what trains (every weight with `loraR` 0, else LoRA adapters of `loraTargets`) and
 * how 16-bit weights are held (`weights`). Episodes run in the text protocol under its chat
 * template, the warm start's demonstrations are rendered in it, and the rollout and gradient
 * workers rebuild it from its weights when every weight trains.
 */
import * as tf from '@tensorflow/tfjs';
import { type FolderReader, HF_TRAINING_FILE, filesFolderReader } from '../../core/io/hfFolder';
import { type LoadedHfTextModel, loadHfTextModel } from '../../core/io/hfTextModel';
import type { ModelCounters } from '../../core/io/provenance';
import { ZERO_COUNTERS } from '../../core/io/provenance';
import { decodeSafetensors, encodeSafetensors } from '../../core/io/safetensors';
import { decoderForward, decoderTensorSpecs } from '../../core/model/decoder';
import { Lora, type LoraConfig, peftAdapterConfig } from '../../core/model/lora';
import type { TrainSequence } from '../../core/parallel/sequences';
import {
  type PolicyModel,
  type ReplicaSpec,
  type Scorer,
  type TextPolicy,
  hfPolicyModel,
  hfReferenceScorer,
  hfScorer,
  fullPolicy,
  loraPolicy,
  textTrainingOf,
} from '../../core/policyModel';
import { asFloat } from '../../core/model/halfWeights';
import type { Protocol } from '../../core/protocol/protocol';
import { textProtocol } from '../../core/protocol/textProtocol';
import type { RunConfig } from '../../core/runConfig';
import { rolloutConfigOf, taskMixOf } from '../../core/runConfigTargets';
import { textFit } from '../../core/protocol/textFit';
import { heldOutProblems } from '../../core/eval/evaluate';
import { HELD_OUT_SEED } from '../../core/eval/splits';
import type { TaskName } from '../../core/tasks';
import { type SftConfig, type SftLearner, scorerLearner } from '../../core/sft/sft';
import { textSftSequences } from '../../core/sft/textSft';
import type { HfTokenizer } from '../../core/tokenizer/hfTokenizer';
import { TrainerModel, logitsOf } from './trainerModel';
import type { ModelSnapshot } from './stepper';

/** The settings of the run config that make the model: what trains, how its weights are held, the adapters' seed. */
export type HfModelSettings = Pick<RunConfig, 'loraR' | 'loraAlpha' | 'loraTargets' | 'weights' | 'seed'>;

/** Files of a model folder the loader may not read but an export keeps. */
const CARRIED_FILES = ['generation_config.json', 'special_tokens_map.json', 'chat_template.jinja'];

export class HfModel extends TrainerModel {
  readonly kind = 'hf';
  policy: TextPolicy;
  /** The adapters that train (LoRA); null when every weight trains. */
  private lora: Lora | null;
  private protocol: Protocol;

  private constructor(
    /** The folder's files as loaded: the origin. */
    private readonly files: ReadonlyMap<string, Uint8Array>,
    private loaded: LoadedHfTextModel,
    private readonly settings: HfModelSettings,
    readonly training: { full: boolean; lora: LoraConfig },
    source: string,
    originCounters: ModelCounters,
  ) {
    super(source, originCounters, null);
    this.lora = training.full ? null : Lora.init(loaded.model.config, training.lora, settings.seed);
    this.policy = this.lora === null ? fullPolicy(loaded.model) : loraPolicy(loaded.model, this.lora);
    this.protocol = textProtocol(loaded.model.tokenizer);
    this.setCounters(originCounters);
  }

  /**
   * The model of a folder (config.json, model.safetensors or its shards, the tokenizer's files),
   * trained as `settings` say. The files it reads are kept: they are the origin.
   */
  static async load(read: FolderReader, source: string, settings: HfModelSettings, counters: ModelCounters = ZERO_COUNTERS): Promise<HfModel> {
    const files = new Map<string, Uint8Array>();
    const loaded = await loadHfTextModel(async (name) => {
      const bytes = await read(name);
      if (bytes !== null) files.set(name, bytes);
      return bytes;
    }, settings.weights);
    // The folder's other files a model folder carries go with its exports (the loader reads the tokenizer's own).
    for (const name of CARRIED_FILES) if (!files.has(name)) await read(name).then((b) => b !== null && files.set(name, b));
    let training;
    try {
      // Episodes and demonstrations are chats: a folder without a template cannot run them.
      if (!loaded.model.tokenizer.hasChatTemplate) {
        throw new Error('the tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja), which the episodes are rendered in');
      }
      training = textTrainingOf(settings, loaded.model.config);
    } catch (e) {
      disposeAll(loaded.model.params);
      throw e;
    }
    return new HfModel(files, loaded, { ...settings }, training, source, counters);
  }

  /**
   * A model that goes on where it was: the origin (KL reference, what `reset` returns to) from the
   * folder `read` gives, the trained weights and counters from an export's files (model.safetensors
   * when every weight trains, the PEFT adapter with LoRA).
   */
  static async resumed(
    read: FolderReader,
    originCounters: ModelCounters,
    current: ReadonlyMap<string, Uint8Array>,
    counters: ModelCounters,
    source: string,
    settings: HfModelSettings,
  ): Promise<HfModel> {
    const model = await HfModel.load(read, source, settings, originCounters);
    try {
      const file = model.lora === null ? 'model.safetensors' : 'adapter_model.safetensors';
      const bytes = current.get(file);
      if (bytes === undefined) throw new Error(`the trained weights lack ${file}`);
      const tensors = decodeSafetensors(bytes).tensors;
      // The adapter's names are PEFT's, the full weights the model's own.
      const nameOf = (key: string) => (model.lora === null ? key : model.lora.peftName(key));
      for (const [key, v] of model.policy.trainable) {
        const t = tensors.get(nameOf(key));
        if (t === undefined || t.shape.join(',') !== v.shape.join(','))
          throw new Error(`${file}: ${nameOf(key)} is missing or is not of shape [${v.shape.join(', ')}]`);
        tf.tidy(() => v.assign(tf.tensor(Float32Array.from(t.data), v.shape, 'float32')));
      }
    } catch (e) {
      model.dispose();
      throw e;
    }
    model.setCounters(counters);
    return model;
  }

  /** Whether `next` would train another model of the same folder (another LoRA setting or weight storage): then the model is made again. */
  changedBy(next: HfModelSettings): boolean {
    const s = this.settings;
    return next.loraR !== s.loraR || next.loraAlpha !== s.loraAlpha || next.loraTargets !== s.loraTargets || next.weights !== s.weights;
  }

  get preset(): string {
    return this.loaded.model.config.family;
  }

  get tokenizer(): HfTokenizer {
    return this.loaded.model.tokenizer;
  }

  get trainable(): Map<string, tf.Variable> {
    return this.policy.trainable;
  }

  get replica(): ReplicaSpec | null {
    return this.training.full ? { kind: 'hf', config: this.loaded.model.config } : null;
  }

  get poolProtocol(): Protocol {
    return this.protocol;
  }

  get parameters(): number {
    return this.loaded.parameters;
  }

  get maxPositions(): number {
    return this.loaded.model.config.maxPositions;
  }

  policyModel(): PolicyModel {
    return hfPolicyModel(this.policy.model, this.tokenizer, this.policy.trainable);
  }

  snapshot(): ModelSnapshot {
    const { config } = this.loaded.model;
    if (this.lora !== null) {
      const adapters = this.lora.clone();
      return {
        model: hfPolicyModel({ config, params: this.loaded.model.params, adapters }, this.tokenizer, new Map()),
        dispose: () => disposeAll(adapters.params),
      };
    }
    const params = new Map([...this.policy.trainable].map(([k, v]) => [k, tf.clone(v)]));
    return { model: hfPolicyModel({ config, params }, this.tokenizer, new Map()), dispose: () => disposeAll(params) };
  }

  referenceScorer(): Scorer {
    return hfReferenceScorer(this.loaded.model.config, this.policy.reference);
  }

  learner(): SftLearner {
    return scorerLearner(hfScorer(this.policy.model, this.policy.trainable));
  }

  /** Demonstrations in the text protocol: a root writes at most `rootMaxTokens` of the model's tokens, a clone the largest budget. */
  sftSequences(config: RunConfig, cfg: SftConfig): TrainSequence[] {
    const lengths = { rootMaxTokens: config.rootMaxTokens, cloneBudget: Math.max(...cfg.limits.budgets) };
    return textSftSequences(taskMixOf(config), cfg, this.sftSteps, this.tokenizer, lengths, this.maxPositions);
  }

  /**
   * What a run under `config` will not fit (textFit on 32 monitor problems of each task): the
   * root's prompt, limit and tool responses, or a clone's prompt and budget, against the window; a
   * chat template that drops the tool list. Each sentence names its task when the run has several.
   */
  fitWarnings(config: RunConfig): string[] {
    const rollout = rolloutConfigOf(config);
    const limits = {
      rootMaxTokens: rollout.rootMaxTokens,
      cloneBudget: Math.max(...rollout.budgets),
      maxClonesPerRound: rollout.maxClonesPerRound,
      maxRounds: rollout.maxRounds,
    };
    const mix = taskMixOf(config);
    return mix.flatMap(({ task, opts }) =>
      textFit(this.tokenizer, this.maxPositions, task.name as TaskName, heldOutProblems(task, opts, 32, HELD_OUT_SEED, 'monitor'), limits).warnings.map((w) =>
        mix.length > 1 ? `${task.name}: ${w}` : w,
      ),
    );
  }

  /** Logits of `text` in the model's own tokens (its tokenizer, no chat template), with its adapters. */
  async logits(text: string): Promise<{ tokens: number[]; logits: number[][] }> {
    const { params, config, adapters } = this.policy.model;
    return logitsOf(this.tokenizer.encode(text), this.maxPositions, (ids) => decoderForward(params, config, ids, null, adapters).logits);
  }

  async fresh(): Promise<HfModel> {
    return this.remade(this.settings);
  }

  /** The model of the same folder at its origin, trained as `settings` say. */
  remade(settings: HfModelSettings): Promise<HfModel> {
    return HfModel.load(filesFolderReader(this.files), this.source, settings, this.originCounters);
  }

  async weights(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    for (const [k, v] of this.policy.trainable) out.set(k, ((await v.data()) as Float32Array).slice());
    return out;
  }

  async rebuild(weights: ReadonlyMap<string, Float32Array>): Promise<void> {
    const again = await HfModel.load(filesFolderReader(this.files), this.source, this.settings);
    for (const [k, v] of again.policy.trainable) {
      const w = weights.get(k);
      if (w === undefined || w.length !== v.size) throw new Error(`rebuild: the weights lack ${k} or have another size`);
      tf.tidy(() => v.assign(tf.tensor(w, v.shape, 'float32')));
    }
    this.disposeOptimizers();
    this.disposeModel();
    // The new tensors take the old ones' places; counters and settings stay.
    this.loaded = again.loaded;
    this.policy = again.policy;
    this.lora = again.lora;
    this.protocol = again.protocol;
  }

  /**
   * Every weight trained: the folder with model.safetensors of these weights (config.json and the
   * tokenizer's files as loaded), which transformers and this engine load. LoRA: the adapter in
   * PEFT's format (the origin: the base folder as loaded). Beside them HF_TRAINING_FILE records the
   * counters and the page's training record.
   */
  protected async modelFiles(training: Record<string, unknown>, which: 'current' | 'origin', counters: ModelCounters): Promise<Map<string, Uint8Array>> {
    const config = this.loaded.model.config;
    const record = new TextEncoder().encode(JSON.stringify({ format: 'selfcest-hf-training', counters, training }, null, 1) + '\n');
    if (this.lora !== null) {
      // Copies: a reply may transfer what it sends, and the folder's files stay the origin.
      if (which === 'origin') return new Map([...[...this.files].map(([k, v]) => [k, v.slice()] as const), [HF_TRAINING_FILE, record]]);
      const tensors = await this.lora.peftTensors();
      return new Map([
        ['adapter_config.json', new TextEncoder().encode(JSON.stringify(peftAdapterConfig(this.training.lora, config, this.source), null, 1) + '\n')],
        ['adapter_model.safetensors', encodeSafetensors(tensors)],
        [HF_TRAINING_FILE, record],
      ]);
    }
    const params = which === 'origin' ? this.policy.reference : this.policy.trainable;
    const tensors = await Promise.all(
      decoderTensorSpecs(config).map(async ({ name, shape }) => {
        const t = params.get(name) as tf.Tensor;
        const w = asFloat(t);
        try {
          return { name, shape, data: (await w.data()) as Float32Array };
        } finally {
          if (w !== t) w.dispose();
        }
      }),
    );
    const out = new Map<string, Uint8Array>();
    for (const [name, bytes] of this.files) {
      // The weights go as one file; the loaded shards and their index do not.
      // Copies: a reply may transfer what it sends, and the folder's files stay the origin.
      if (!name.endsWith('.safetensors') && name !== 'model.safetensors.index.json' && name !== HF_TRAINING_FILE) out.set(name, bytes.slice());
    }
    out.set('model.safetensors', encodeSafetensors(tensors));
    out.set(HF_TRAINING_FILE, record);
    return out;
  }

  protected disposeModel(): void {
    try {
      // Every weight trained: the variables; LoRA: the adapters. The loaded weights either way.
      disposeAll(this.policy.trainable);
      disposeAll(this.loaded.model.params);
    } catch {
      // Tensors of a lost GPU device may fail to free; they are unreachable either way.
    }
  }
}

function disposeAll(params: ReadonlyMap<string, tf.Tensor>): void {
  params.forEach((t) => t.dispose());
}
