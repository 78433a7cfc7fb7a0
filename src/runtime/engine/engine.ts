/**
 * The engine: everything behind its message protocol (messages.ts), independent of where it runs (a module worker in
 * the page, or Node). It owns the master weights, the optimizers and the GRPO loop (the CLI's
 * core code), and a pool of rollout workers that run the episodes through PooledDecoder.
 *
 * Concurrency, TF Playground style: model-changing requests run one at a time (Serial); a run
 * counter lets a superseded loop notice and stop between steps; a request that replaces the
 * model stops the loop first, but only after its input has been validated, so a bad file or
 * config leaves a running session untouched.
 */
import { type FrontierPoint, validateLimits, validateMethods, validateProblemCount } from '../../core/eval/frontier';
import { decodeCheckpoint } from '../../core/io/checkpoint';
import { type ModelCounters, makeProvenance } from '../../core/io/provenance';
import { type RunConfig, PAGE_DEFAULTS, validateRunConfig } from '../../core/runConfig';
import type { ScoredEpisode, StepMetrics } from '../../core/rl/grpoStep';
import { type EpisodeTrace, scoredTrace } from '../../core/rollout/trace';
import { Tokenizer } from '../../core/tokenizer/tokenizer';
import { Serial, yieldToEvents } from '../transport/async';
import { fetchCheckpointFiles, fileUrl, filesFromRecord } from '../checkpointFiles';
import { filesFolderReader } from '../../core/io/hfFolder';
import { hubFolderReader } from '../../core/io/hubFolder';
import { HfModel } from './hfModel';
import { rolloutConfigOf, taskMixOf } from '../../core/runConfigTargets';
import { probeCheckpoint } from '../../core/io/checkpointProbe';
import type { EngineHost } from './engineHost';
import type { BackendReport, EngineEvent, EngineReplies, EngineRequest, EngineRequestKind, ModelReport } from './messages';
import { type Reply, reply } from '../transport/rpc';
import { RunLog } from './runLog';
import { Stepper } from './stepper';
import { ToyModel, type TrainerModel } from './trainerModel';
import { Training } from './training';

/** Episodes per 'episodes' event: whole groups first (a step's traces are grouped by prompt). */
const EPISODES_PER_EVENT = 32;
/** Metrics rows are sent at most this often while training (and when a loop stops). */
const METRICS_EVERY_MS = 1000;
/** Progress inside a step or an evaluation is sent at most this often. */
const PROGRESS_EVERY_MS = 250;

type Handlers = { [K in EngineRequestKind]: (req: Extract<EngineRequest, { kind: K }>) => Promise<Reply<EngineReplies[K]>> };
type Status = Extract<EngineEvent, { kind: 'status' }>['state'];
type SettledStatus = Exclude<Status, 'pausing'>;
type BusyKind = 'sft' | 'train' | 'step' | 'frontier';

export class Engine {
  private config: RunConfig = { ...PAGE_DEFAULTS };
  private training: Training | null = null;
  private wasmPaths: string | undefined;
  /** Bumped to stop the running loop (pause, or a request that supersedes it). */
  private runId = 0;
  private busy: BusyKind | null = null;
  private busyDone: Promise<unknown> = Promise.resolve();
  private readonly serial = new Serial();
  private readonly stepperSerial = new Serial();
  private status: Status = 'idle';
  /** What the running loop is doing now (the "finishing …" of a pausing status). */
  private activity = 'the current step';
  private readonly log = new RunLog();
  private stepper: Stepper | null = null;
  private tokenizer: Tokenizer | null = null;
  private pendingMetrics: StepMetrics[] = [];
  private lastMetricsFlush = 0;

  constructor(
    private readonly host: EngineHost,
    private readonly emit: (e: EngineEvent) => void,
  ) {}

  handle(req: EngineRequest): Promise<Reply<unknown>> {
    const handler = Object.hasOwn(this.handlers, req.kind) ? (this.handlers[req.kind] as (r: EngineRequest) => Promise<Reply<unknown>>) : undefined;
    if (!handler) return Promise.reject(new Error(`engine: unknown request kind ${JSON.stringify(req.kind)}`));
    return handler(req);
  }

  /** Stops any loop and frees the pool and the model. */
  async dispose(): Promise<void> {
    await this.stopActive();
    await this.serial.run(async () => this.teardown());
  }

  /** For tests of the recovery path: behave as if a GPU device were lost. */
  simulateDeviceLoss(where: 'trainer' | number): Promise<void> {
    return this.requireTraining().simulateDeviceLoss(where);
  }

  private readonly handlers: Handlers = {
    init: async (req) => {
      const config = validateRunConfig(req.config, 'page');
      await this.stopActive();
      return this.serial.run(async () => {
        this.teardown();
        this.wasmPaths = req.wasmPaths;
        this.config = config;
        this.training = await Training.start(
          this.host,
          config,
          () => ToyModel.random(config.preset, config.seed),
          this.wasmPaths,
          (e) => this.emit(e),
        );
        this.log.clear();
        this.emit(this.training.backendEvent());
        this.setStatus('idle');
        return reply({ backend: this.training.backendReport(), workers: this.training.workers, gradWorkers: this.training.gradWorkers });
      });
    },
    loadUrl: async (req) => {
      this.requireTraining();
      const fetchFile = (url: string) => this.host.fetchFile(url);
      // A folder without selfcest.json is a Hugging Face model's (its files are read as the loader asks for them).
      if (typeof req.baseUrl === 'string' && req.baseUrl !== '' && (await fetchFile(fileUrl(req.baseUrl, 'selfcest.json'))) === null) {
        const model = await hfFolder('loadUrl', req.baseUrl, () => HfModel.load((name) => fetchFile(fileUrl(req.baseUrl, name)), req.baseUrl, this.config));
        return reply(await this.replaceModel(model));
      }
      const files = await fetchCheckpointFiles(req.baseUrl, fetchFile);
      const ckpt = decodeCheckpoint(files);
      await probeCheckpoint(ckpt); // before the running model is replaced
      return reply(await this.replaceModel(ToyModel.fromCheckpoint(ckpt, req.baseUrl)));
    },
    loadHub: async (req) => {
      this.requireTraining();
      if (typeof req.id !== 'string') throw new Error('loadHub: id must be a string (owner/name)');
      if (req.endpoint !== undefined && typeof req.endpoint !== 'string') throw new Error('loadHub: endpoint must be a string (a URL)');
      const read = hubFolderReader(req.id, req.endpoint === undefined ? {} : { endpoint: req.endpoint });
      return reply(await this.replaceModel(await HfModel.load(read, req.id, this.config)));
    },
    loadFiles: async (req) => {
      this.requireTraining();
      const files = filesFromRecord(req.files);
      const source = typeof req.source === 'string' && req.source !== '' ? req.source : [...files.keys()].join(', ');
      // A Hugging Face folder, or (resumed with LoRA) its adapter with the folder as the origin.
      if (isHfFolder(files) || (req.resume?.origin !== undefined && isHfFolder(filesFromRecord(req.resume.origin.files)))) {
        // A resumed model: its counters, its optimizers' moments, and its origin folder when that is not the loaded weights.
        const resume = req.resume;
        const counters = resume === undefined ? undefined : checkCounters(resume.counters, 'resume.counters');
        const log = resume?.log === undefined ? null : checkLog(resume.log);
        const name = resume?.source === undefined ? source : String(resume.source);
        let model: HfModel;
        if (resume?.origin === undefined) {
          model = await hfFolder('loadFiles', 'the files', () => HfModel.load(filesFolderReader(files), name, this.config, counters));
        } else {
          const origin = filesFromRecord(resume.origin.files);
          const originCounters = checkCounters(resume.origin.counters, 'resume.origin.counters');
          model = await hfFolder('loadFiles', 'the origin files', () =>
            HfModel.resumed(filesFolderReader(origin), originCounters, files, counters as ModelCounters, name, this.config),
          );
        }
        return reply(await this.installLoaded(model, files, log));
      }
      const ckpt = decodeCheckpoint(files);
      await probeCheckpoint(ckpt);
      if (req.resume === undefined) return reply(await this.replaceModel(ToyModel.fromCheckpoint(ckpt, source)));
      // A resumed model: its counters, and its origin when that is not the loaded weights.
      const resume = req.resume;
      const counters = checkCounters(resume.counters, 'resume.counters');
      const name = resume.source === undefined ? source : String(resume.source);
      const log = resume.log === undefined ? null : checkLog(resume.log);
      let model: TrainerModel;
      if (resume.origin === undefined) {
        model = ToyModel.fromCheckpoint(ckpt, name, counters);
      } else {
        const origin = decodeCheckpoint(filesFromRecord(resume.origin.files));
        await probeCheckpoint(origin);
        const originCounters = checkCounters(resume.origin.counters, 'resume.origin.counters');
        model = ToyModel.resumed(origin, originCounters, ckpt, counters, name);
      }
      return reply(await this.installLoaded(model, files, log));
    },
    setConfig: async (req) => {
      const training = this.requireTraining();
      const config = validateRunConfig(req.config, 'page');
      await this.stopActive();
      return this.serial.run(async () => {
        const old = this.config;
        this.config = config;
        if (old.backend !== config.backend || old.workers !== config.workers || old.gradWorkers !== config.gradWorkers) {
          try {
            await training.restartBackend(config);
          } catch (e) {
            this.config = old; // the same request again restarts again
            throw e;
          }
          this.emit(training.backendEvent());
        }
        // The model follows the preset: a changed preset, or a model of another known preset
        // (e.g. a warm start of another size) is replaced by a random init of this one. A Hugging
        // Face model trained another way (LoRA settings, weight storage) is made again from its
        // folder; settings it refuses leave the config and the model as they were.
        const model = training.model;
        const mismatch = model.preset !== config.preset && (model.preset === 'tiny' || model.preset === 'small');
        let next: TrainerModel | null = null;
        if (old.preset !== config.preset || mismatch) next = ToyModel.random(config.preset, config.seed);
        else if (model instanceof HfModel && model.changedBy(config)) {
          try {
            next = await model.remade(config);
          } catch (e) {
            this.config = old;
            training.setConfig(old);
            throw e;
          }
        }
        if (next !== null) this.swapModel(next);
        training.setConfig(config);
        await training.syncPool();
        return reply(this.report());
      });
    },
    sft: async (req) => {
      if (!Number.isInteger(req.steps) || req.steps < 1 || req.steps > 1_000_000) {
        throw new Error(`sft: steps must be an integer in [1, 1000000] (got ${JSON.stringify(req.steps)})`);
      }
      const result = await this.runBusy('sft', async (run) => {
        this.setStatus('sft');
        return this.requireTraining().sft(req.steps, this.encode, () => this.runId !== run);
      });
      return reply(result);
    },
    train: async () => {
      const steps = await this.runBusy('train', async (run) => {
        this.setStatus('training');
        let n = 0;
        // The starting point of the run's frontier trajectory.
        if (this.runId === run && this.requireTraining().model.grpoSteps === 0) await this.liveFrontier(0);
        while (this.runId === run) {
          const r = await this.grpoStep();
          this.recordStep(r);
          n++;
          if (this.runId === run) await this.liveFrontier(r.metrics.step);
          await yieldToEvents();
        }
        return n;
      });
      return reply({ steps });
    },
    pause: async () => {
      // The page shows "pausing…" until a status event says otherwise; one always comes before this reply.
      const loop = this.busy === 'train' || this.busy === 'sft' || this.busy === 'step';
      if (loop) this.setPausing(this.busy === 'sft' ? 'the current warm-start step' : this.activity);
      await this.stopActive();
      if (!loop) this.setStatus(this.status === 'pausing' ? 'paused' : this.status);
      return reply({ policyVersion: this.training?.model.version ?? 0 });
    },
    step: async () => {
      const metrics = await this.runBusy('step', async () => {
        this.setStatus('training');
        const r = await this.grpoStep();
        this.recordStep(r);
        await this.liveFrontier(r.metrics.step);
        return r.metrics;
      });
      return reply({ metrics });
    },
    slowStep: async () => {
      const anatomy = await this.runBusy('step', async () => {
        this.setStatus('training');
        const training = this.requireTraining();
        const before = training.model.version;
        const r = await this.grpoStep();
        this.recordStep(r);
        const a = await training.anatomy(r, before);
        await this.liveFrontier(r.metrics.step);
        return a;
      });
      return reply(anatomy);
    },
    reset: async () => {
      const training = this.requireTraining();
      await this.stopActive();
      return this.serial.run(async () => {
        this.swapModel(await training.model.fresh());
        await training.syncPool();
        return reply(this.report());
      });
    },
    randomInit: async () => reply(await this.replaceModel(ToyModel.random(this.config.preset, this.config.seed))),
    stepperStart: async (req) => {
      const training = this.requireTraining();
      if (!Number.isInteger(req.seed)) throw new Error(`stepper: seed must be an integer (got ${JSON.stringify(req.seed)})`);
      return this.stepperSerial.run(async () => {
        this.stepper?.dispose();
        this.stepper = null;
        const { model } = training;
        const [{ task, opts }] = taskMixOf(this.config);
        const stepper = new Stepper(model.snapshot(this.encode), {
          task,
          options: opts,
          seed: req.seed,
          ...(req.prompt === undefined ? {} : { prompt: req.prompt }),
          rollout: rolloutConfigOf(this.config, { allowSpawn: req.allowSpawn }),
          policyVersion: model.version,
          encode: this.encode,
        });
        this.stepper = stepper;
        return reply(stepper.state());
      });
    },
    stepperAdvance: async (req) => {
      if (!['token', 'spawn', 'end'].includes(req.until)) throw new Error(`stepper: until must be token, spawn or end (got ${JSON.stringify(req.until)})`);
      return this.stepperSerial.run(async () => {
        const stepper = this.stepper;
        if (stepper === null) throw new Error('stepper: no episode in progress (send stepperStart first)');
        const state = await stepper.advance(req.until);
        if (state.done) this.stepper = null;
        return reply(state);
      });
    },
    frontier: async (req) => {
      const methods = validateMethods(Array.isArray(req.methods) ? req.methods : []);
      const limits = validateLimits(Array.isArray(req.limits) ? req.limits : []);
      const n = validateProblemCount(req.n ?? this.config.evalN);
      const points = await this.runBusy('frontier', async () => {
        const training = this.requireTraining();
        const label = { checkpoint: `v${training.model.version}` };
        return training.frontier(methods, limits, n, this.encode, label, this.emitPoint, this.emitProgress);
      });
      return reply({ points });
    },
    logits: async (req) => reply(await this.requireTraining().model.logits(req.text, this.encode)),
    exportWeights: async (req) => {
      const { model } = this.requireTraining();
      const which = req.origin === true ? 'origin' : 'current';
      // The rows of every step these weights took go out before the reply (same port, in order):
      // the page has them when the weights arrive, so a save holds weights and rows of one step.
      if (which === 'current') this.flushMetrics();
      if (req.provenance !== undefined && !Array.isArray(req.provenance)) throw new Error('exportWeights: provenance must be an array of events');
      // Counters and weights are read in this same turn (exportFiles reads before its first await), so they agree.
      const provenance = req.provenance === undefined ? {} : { provenance: makeProvenance(model.counters(which), req.provenance) };
      const { files, counters } = await model.exportFiles({ playground: this.config, ...provenance }, which, { optimizer: req.optimizer === true });
      const record: Record<string, Uint8Array> = Object.fromEntries(files);
      return reply({ files: record, counters }, [...new Set([...files.values()].map((b) => b.buffer as ArrayBuffer))]);
    },
    exportTraces: async () => reply({ jsonl: this.log.tracesJsonl() }),
    exportMetrics: async (req) => {
      if (req.format !== 'jsonl' && req.format !== 'csv') throw new Error(`exportMetrics: format must be jsonl or csv (got ${JSON.stringify(req.format)})`);
      return reply({ text: this.log.metricsText(req.format) });
    },
  };

  private readonly encode = (text: string): number[] => {
    this.tokenizer ??= Tokenizer.builtin();
    return this.tokenizer.encode(text);
  };

  private requireTraining(): Training {
    if (this.training === null) throw new Error('engine: not initialised (send init first)');
    return this.training;
  }

  /** Runs a loop or step exclusively; `run` is the run id it must keep checking. */
  private async runBusy<T>(kind: BusyKind, job: (run: number) => Promise<T>): Promise<T> {
    this.requireTraining();
    if (this.busy !== null) throw new Error(`engine: busy with ${this.busy} (pause first)`);
    this.busy = kind;
    const before = this.status;
    const run = this.runId;
    const done = this.serial.run(() => job(run));
    this.busyDone = done;
    try {
      return await done;
    } catch (e) {
      this.emit({ kind: 'log', level: 'error', message: `${kind}: ${(e as Error).message}` });
      throw e;
    } finally {
      this.busy = null;
      this.flushMetrics();
      // An evaluation leaves the run's state as it was.
      this.setStatus(kind === 'frontier' && before !== 'pausing' ? before : 'paused');
    }
  }

  /** The periodic held-out evaluation of a training run (Training.heldOut), every evalEvery steps. */
  private async liveFrontier(step: number): Promise<void> {
    const training = this.requireTraining();
    if (!training.evaluatesAt(step)) return;
    // The page has the rows of every finished step before an evaluation keeps the loop busy.
    this.flushMetrics();
    this.activity = `the evaluation at step ${step}`;
    await training.heldOut(this.encode, this.emitPoint, (what, done, total) => this.emitProgress(`${what} (step ${step})`, done, total));
  }

  private readonly emitPoint = (p: FrontierPoint): void => this.emit({ kind: 'frontier', points: [p] });

  private lastProgress = 0;
  /** A 'progress' event, at most every PROGRESS_EVERY_MS (the last of a phase too, so it ends at its total). */
  private readonly emitProgress = (what: string, done: number, total: number): void => {
    const now = Date.now();
    if (now - this.lastProgress < PROGRESS_EVERY_MS && done < total) return;
    this.lastProgress = now;
    this.emit({ kind: 'progress', what, done, total });
  };

  private async stopActive(): Promise<void> {
    this.runId++;
    await this.busyDone.catch(() => undefined);
  }

  /** A loaded model with the optimizer moments among `files` (checked before the running model is replaced), then its run's history. */
  private async installLoaded(model: TrainerModel, files: ReadonlyMap<string, Uint8Array>, log: ReturnType<typeof checkLog> | null): Promise<ModelReport> {
    try {
      model.loadOptimizers(files);
    } catch (e) {
      model.dispose();
      throw new Error(`loadFiles: ${(e as Error).message}`);
    }
    const report = await this.replaceModel(model);
    if (log) this.log.restore(log.metrics, log.traces);
    return report;
  }

  private async replaceModel(model: TrainerModel): Promise<ModelReport> {
    await this.stopActive();
    return this.serial.run(async () => {
      const training = this.requireTraining();
      this.swapModel(model);
      await training.syncPool();
      return this.report();
    });
  }

  /** The model's report, with what a run under the current config will not fit (a Hugging Face model). */
  private report(): ModelReport {
    const { model } = this.requireTraining();
    const report = model.report();
    if (!(model instanceof HfModel)) return report;
    const warnings = model.fitWarnings(this.config);
    return warnings.length > 0 ? { ...report, warnings } : report;
  }

  /** A new model in place of the current one: the run's log and the stepper go with the old one. */
  private swapModel(model: TrainerModel): void {
    this.requireTraining().replaceModel(model);
    this.log.clear();
    this.pendingMetrics = [];
    this.stepper?.dispose();
    this.stepper = null;
    this.setStatus('idle');
  }

  /** Keeps a step's results and tells the page: the new policy version and its episodes now, its metrics in batches. */
  private recordStep(r: { metrics: StepMetrics; episodes: ScoredEpisode[] }): void {
    const traces = r.episodes.map(scoredTrace);
    this.log.add(r.metrics, traces);
    this.emit({ kind: 'policyVersion', policyVersion: this.requireTraining().model.version });
    this.emit({ kind: 'episodes', step: r.metrics.step, traces: traces.slice(0, EPISODES_PER_EVENT) });
    this.pendingMetrics.push(r.metrics);
    if (Date.now() - this.lastMetricsFlush >= METRICS_EVERY_MS) this.flushMetrics();
  }

  private flushMetrics(): void {
    this.lastMetricsFlush = Date.now();
    if (this.pendingMetrics.length === 0) return;
    this.emit({ kind: 'metrics', rows: this.pendingMetrics.splice(0) });
  }

  private setStatus(state: SettledStatus): void {
    this.status = state;
    this.emit({ kind: 'status', state, policyVersion: this.training?.model.version ?? 0 });
  }

  private setPausing(finishing: string): void {
    this.status = 'pausing';
    this.emit({ kind: 'status', state: 'pausing', finishing, policyVersion: this.training?.model.version ?? 0 });
  }

  /** One GRPO step of a run or of Step, named for a pause that has to wait for it, telling its progress. */
  private grpoStep(): ReturnType<Training['grpoStep']> {
    const training = this.requireTraining();
    const name = `step ${training.model.grpoSteps + 1}`;
    this.activity = name;
    return training.grpoStep(this.encode, (p) => this.emitProgress(`${name}: ${p.phase === 'rollouts' ? 'rollouts' : 'updates'}`, p.done, p.total));
  }

  private teardown(): void {
    this.stepper?.dispose();
    this.stepper = null;
    this.training?.dispose();
    this.training = null;
  }

  get state(): { status: Status; backend: BackendReport | null } {
    return { status: this.status, backend: this.training?.backendReport() ?? null };
  }
}

/** Files of a Hugging Face model folder: a config.json without the toy checkpoint's selfcest.json. */
function isHfFolder(files: ReadonlyMap<string, Uint8Array>): boolean {
  const names = new Set([...files.keys()].map((k) => k.split('/').at(-1)));
  return names.has('config.json') && !names.has('selfcest.json');
}

/** A folder without selfcest.json read as a Hugging Face model's; its failure says both what it is not and why it is not the other. */
async function hfFolder(request: string, where: string, load: () => Promise<HfModel>): Promise<HfModel> {
  try {
    return await load();
  } catch (e) {
    throw new Error(
      `${request}: no selfcest.json in ${where}, so not a checkpoint of this project, and not a Hugging Face model folder either: ${(e as Error).message}`,
    );
  }
}

/** A resumed run's history from a message: arrays of metrics rows (each with its step) and of { step, trace }. */
function checkLog(log: unknown): { metrics: StepMetrics[]; traces: { step: number; trace: EpisodeTrace }[] } {
  const o = (typeof log === 'object' && log !== null ? log : {}) as Record<string, unknown>;
  if (!Array.isArray(o.metrics) || !o.metrics.every((m) => typeof m === 'object' && m !== null && Number.isInteger((m as StepMetrics).step))) {
    throw new Error('loadFiles: resume.log.metrics must be an array of metrics rows, each with an integer step');
  }
  if (
    !Array.isArray(o.traces) ||
    !o.traces.every(
      (t) => typeof t === 'object' && t !== null && Number.isInteger((t as { step: unknown }).step) && typeof (t as { trace: unknown }).trace === 'object',
    )
  ) {
    throw new Error('loadFiles: resume.log.traces must be an array of { step, trace }');
  }
  return { metrics: o.metrics as StepMetrics[], traces: o.traces as { step: number; trace: EpisodeTrace }[] };
}

/** Counters from a message: non-negative integers, named when not. */
function checkCounters(c: unknown, name: string): ModelCounters {
  const o = (typeof c === 'object' && c !== null ? c : {}) as Record<string, unknown>;
  for (const k of ['policyVersion', 'grpoSteps', 'sftSteps']) {
    const v = o[k];
    if (!Number.isInteger(v) || (v as number) < 0) throw new Error(`loadFiles: ${name}.${k} must be a non-negative integer (got ${JSON.stringify(v)})`);
  }
  return { policyVersion: o.policyVersion as number, grpoSteps: o.grpoSteps as number, sftSteps: o.sftSteps as number };
}
