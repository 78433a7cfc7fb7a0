/**
 * What the language-model worker holds and does (lm.worker.ts serves it; tests drive it in Node):
 * a Hugging Face model loaded from its folder's files, text episodes of a task's problems, GRPO
 * steps over LoRA adapters with the page's run config, and the adapters in PEFT's format.
 */
import * as tf from '@tensorflow/tfjs';
import { type FolderReader, filesFolderReader } from '../../core/io/hfFolder';
import { hubFolderReader } from '../../core/io/hubFolder';
import { encodeSafetensors } from '../../core/io/safetensors';
import { Lora, type LoraConfig, attentionTargets, peftAdapterConfig } from '../../core/model/lora';
import { samplingChooser } from '../../core/model/decoder';
import { ADAM_MOMENTS, AdamW } from '../../core/optim/adamw';
import { textGrpoStep } from '../../core/rl/textGrpo';
import { loraPolicy } from '../../core/policyModel';
import { Rng } from '../../core/rng';
import { runTextEpisode, textEpisodeTrace } from '../../core/rollout/textEpisode';
import type { TextModel } from '../../core/policyModel';
import { type TextEpisodeTrace } from '../../core/rollout/textTrace';
import { type TextLimits } from '../../core/rollout/textLimits';
import type { RunConfig } from '../../core/runConfig';
import { grpoConfigOf, taskMixOf } from '../../core/runConfigTargets';
import type { TaskName } from '../../core/tasks';
import { textPrompts } from '../../core/protocol/prompts';
import type { LmEvent, LmFiles, LmModelInfo, LmReplies } from './lmMessages';
import { type WeightStoragePreference, loadHfTextModel } from '../../core/io/hfTextModel';
import type { FrontierPoint } from '../../core/eval/frontier';
import { heldOutProblems } from '../../core/eval/evaluate';
import { HELD_OUT_SEED } from '../../core/eval/splits';
import { FRONTIER_DEFAULTS, frontierPoint } from '../../core/eval/frontier';
import { hfPolicyModel } from '../../core/policyModel';
import { LmStepper, type LmStepperState, type StepUntil } from './lmStepper';

/** A folder reader over files given by name (a folder's top level; nested paths are read by their last part). */
export const filesReader = (files: LmFiles): FolderReader => filesFolderReader(new Map(Object.entries(files).map(([k, v]) => [k, new Uint8Array(v)])));

/** Bytes as MB to three significant digits. */
const megabytes = (bytes: number): number => Number((bytes / 1e6).toPrecision(3));

/** The config's one task with its options (a mix is refused). */
function oneTask(config: RunConfig) {
  const mix = taskMixOf(config);
  if (mix.length !== 1) throw new Error(`the language model runs one task (the config names the mix ${config.task})`);
  return mix;
}

export class LmSession {
  private model: TextModel | null = null;
  private lora: Lora | null = null;
  private optimizer: AdamW | null = null;
  private step = 0;
  private stepper: { stepper: LmStepper; finish: () => Promise<TextEpisodeTrace> } | null = null;

  constructor(private readonly onProgress: (what: LmEvent['what'], done: number, total: number) => void = () => undefined) {}

  /** A model from its folder's files by name. */
  load(files: LmFiles, storage: WeightStoragePreference = 'auto'): Promise<LmModelInfo> {
    return this.loadFrom(filesReader(files), storage);
  }

  /** A model from the Hub (or a mirror serving its paths) by id. */
  loadHub(id: string, endpoint?: string, storage: WeightStoragePreference = 'auto'): Promise<LmModelInfo> {
    return this.loadFrom(hubFolderReader(id, endpoint === undefined ? {} : { endpoint }), storage);
  }

  private async loadFrom(read: FolderReader, storage: WeightStoragePreference): Promise<LmModelInfo> {
    await this.endStepper();
    // A refused folder throws here, before the model loaded before is let go: that one stays.
    const loaded = await loadHfTextModel(read, storage);
    await this.dispose();
    this.model = loaded.model;
    const { config, tokenizer } = loaded.model;
    const parameters = loaded.parameters;
    return {
      family: config.family,
      parameters,
      megabytes: megabytes(parameters * 4),
      heldMegabytes: megabytes(loaded.heldBytes),
      halfTensors: loaded.halfTensors,
      backendMegabytes: megabytes(tf.memory().numBytes),
      loadMs: loaded.loadMs,
      layers: config.layers,
      hiddenSize: config.hiddenSize,
      heads: config.heads,
      kvHeads: config.kvHeads,
      vocabSize: config.vocabSize,
      maxPositions: config.maxPositions,
      chatTemplate: tokenizer.hasChatTemplate,
      attentionTargets: attentionTargets(config),
    };
  }

  private need(): TextModel {
    if (this.model === null) throw new Error('no model is loaded: pick a Hugging Face model folder first');
    return this.model;
  }

  /** The model as it decodes now: with the adapters once a step has trained them. */
  private policyModel(): TextModel {
    const model = this.need();
    return this.lora ? { ...model, adapters: this.lora } : model;
  }

  /** `n` episodes of the config's task (its options), the problems from `seed`; temperature 0 decodes greedily. */
  async rollout(config: RunConfig, seed: number, n: number, temperature: number, limits: TextLimits): Promise<LmReplies['rollout']> {
    const model = this.policyModel();
    const [{ task, opts }] = oneTask(config);
    const rng = new Rng(seed);
    const traces = [];
    for (let i = 0; i < n; i++) {
      const problem = task.generate(rng, opts, `lm-${seed}-${i}`);
      const episode = await runTextEpisode(model, textPrompts(model.tokenizer.prompts).root(task.name as TaskName, problem), limits, {
        context: problem.context ?? {},
        choose: samplingChooser(model.config.vocabSize, temperature, rng.fork()),
      });
      traces.push(textEpisodeTrace(episode, model.tokenizer, problem, task.verify(problem, episode.answer).correct));
      this.onProgress('rollout', i + 1, n);
    }
    return { traces };
  }

  async trainStep(config: RunConfig, lora: LoraConfig, limits: TextLimits): Promise<LmReplies['trainStep']> {
    // A stepped episode decodes with the adapters this step changes: it ends first.
    await this.endStepper();
    const model = this.need();
    const mix = oneTask(config);
    const grpo = grpoConfigOf(config, Number.MAX_SAFE_INTEGER);
    if (this.lora === null || JSON.stringify(this.lora.config) !== JSON.stringify(lora)) {
      await this.resetAdapters();
      this.lora = Lora.init(model.config, lora, config.seed);
    }
    this.optimizer ??= new AdamW(this.lora.params, { ...ADAM_MOMENTS, lr: grpo.lr, weightDecay: grpo.weightDecay, gradClip: grpo.gradClip });
    this.optimizer.cfg = { ...this.optimizer.cfg, lr: grpo.lr, weightDecay: grpo.weightDecay, gradClip: grpo.gradClip };
    const [{ task, opts }] = mix;
    const { metrics, episodes, anatomy } = await textGrpoStep(
      loraPolicy(model, this.lora),
      this.optimizer,
      task,
      opts,
      { grpo, limits },
      this.step,
      (done, total) => this.onProgress('step', done, total),
    );
    this.step = metrics.step;
    const traces = episodes.map((e) => textEpisodeTrace(e.episode, model.tokenizer, e.problem, e.correct, { reward: e.reward, credits: e.credits }));
    return { metrics, traces, anatomy };
  }

  /**
   * The model's accuracy–cost points (delegate: the tool offered; mono: the whole problem in one
   * message) at each root token limit, greedy, on `n` problems of the held-out monitored split.
   */
  async frontier(
    config: RunConfig,
    methods: readonly ('delegate' | 'mono')[],
    rootLimits: readonly number[],
    n: number,
    limits: Omit<TextLimits, 'rootMaxTokens'>,
  ): Promise<LmReplies['frontier']> {
    await this.endStepper();
    const model = this.policyModel();
    const [{ task, opts }] = oneTask(config);
    const problems = heldOutProblems(task, opts, n, HELD_OUT_SEED, 'monitor');
    const points: FrontierPoint[] = [];
    const total = methods.length * rootLimits.length * n;
    const decoder = hfPolicyModel(model, model.tokenizer, new Map()).decoder(64);
    const rollout = { budgets: [limits.cloneBudget], maxClonesPerRound: limits.maxClones, maxRounds: limits.maxRounds };
    try {
      for (const method of methods) {
        for (const limit of rootLimits) {
          const done = points.length * n;
          points.push(
            await frontierPoint(
              decoder,
              task,
              problems,
              method,
              limit,
              { ...FRONTIER_DEFAULTS, rollout },
              () => [],
              (k) => this.onProgress('frontier', done + k, total),
            ),
          );
        }
      }
    } finally {
      decoder.dispose();
    }
    return { points };
  }

  /** A new episode of the config's task stepped token by token (LmStepper), stopped before its first token. */
  async stepperStart(config: RunConfig, seed: number, temperature: number, limits: TextLimits): Promise<LmReplies['stepperStart']> {
    await this.endStepper();
    const model = this.policyModel();
    const [{ task, opts }] = oneTask(config);
    const rng = new Rng(seed);
    const problem = task.generate(rng, opts, `lm-step-${seed}`);
    const stepper = new LmStepper(
      model,
      (o) => runTextEpisode(model, textPrompts(model.tokenizer.prompts).root(task.name as TaskName, problem), limits, { context: problem.context ?? {}, ...o }),
      temperature,
      rng.fork(),
    );
    this.stepper = {
      stepper,
      finish: async () => {
        const e = await stepper.episode;
        return textEpisodeTrace(e, model.tokenizer, problem, task.verify(problem, e.answer).correct);
      },
    };
    return this.stepperReply(await stepper.stop());
  }

  async stepperAdvance(until: StepUntil): Promise<LmReplies['stepperAdvance']> {
    if (this.stepper === null) throw new Error('no episode is being stepped: start one');
    return this.stepperReply(await this.stepper.stepper.advance(until));
  }

  private async stepperReply(state: LmStepperState): Promise<LmReplies['stepperStart']> {
    if (!state.done || this.stepper === null) return { state };
    const trace = await this.stepper.finish();
    return { state, trace };
  }

  async exportAdapter(): Promise<LmReplies['exportAdapter']> {
    if (this.lora === null) throw new Error('no adapters yet: train a step first');
    const config = new TextEncoder().encode(JSON.stringify(peftAdapterConfig(this.lora.config, this.need().config, null), null, 1) + '\n');
    const weights = encodeSafetensors(await this.lora.peftTensors());
    const buffer = (b: Uint8Array) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
    return { files: { 'adapter_config.json': buffer(config), 'adapter_model.safetensors': buffer(weights) } };
  }

  /** Ends the stepped episode, if any (LmStepper.cancel). */
  private async endStepper(): Promise<void> {
    const s = this.stepper;
    this.stepper = null;
    await s?.stepper.cancel();
  }

  async resetAdapters(): Promise<void> {
    await this.endStepper();
    this.optimizer?.dispose();
    this.optimizer = null;
    this.lora?.dispose();
    this.lora = null;
    this.step = 0;
  }

  async dispose(): Promise<void> {
    await this.resetAdapters();
    this.model?.params.forEach((t) => t.dispose());
    this.model = null;
  }
}
