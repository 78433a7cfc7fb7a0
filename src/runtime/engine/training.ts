/**
 * The trainer side of a session: this thread's backend, the master model, the rollout pool it
 * keeps in sync (one broadcast per GRPO step, tagged with the policy version), the
 * gradient workers that share each update's gradient (data parallel: they get the weights
 * before each update, the trainer keeps the one optimizer), and the GRPO and SFT steps with
 * recovery from a lost GPU device or a dead worker.
 *
 * Recovery: a rollout worker whose device is lost falls back to wasm by itself; the failed
 * step's rollouts are dropped (no update was applied yet), the worker gets the weights again and
 * the step is redone with the same seed. A lost trainer device falls back the same way and
 * rebuilds the weights from the host copy made at the last broadcast (optimizer moments restart).
 */
import { heldOutProblems } from '../../core/eval/evaluate';
import { HELD_OUT_SEED } from '../../core/eval/splits';
import { type FrontierPoint, type Method, frontierPoint } from '../../core/eval/frontier';
import { type RunConfig, TOY_MODEL_ONLY, runConfigDefaults } from '../../core/runConfig';
import { cosineLr, sftMetricsRow, sftStepOf } from '../../core/sft/sft';
import { canShareMemory } from '../../core/parallel/shares';
import { type StepAnatomy, stepAnatomy } from '../../core/rl/anatomy';
import { type ScoredEpisode, type StepMetrics, type StepProgress } from '../../core/rl/grpoStep';
import { GrpoRun, type HeldOutPoint } from '../../core/rl/grpoRun';
import { type Alarm, alarm, yieldToEvents } from '../transport/async';
import { grpoConfigOf, rolloutConfigOf, sftConfigOf, taskMixOf } from '../../core/runConfigTargets';
import type { EngineHost } from './engineHost';
import { PooledDecoder } from '../rollout/pooledDecoder';
import type { BackendReport, EngineEvent } from './messages';
import { RolloutPool } from '../rollout/rolloutPool';
import { GradPool } from '../gradient/gradPool';
import { DEVICE_LOST } from '../rollout/rolloutMessages';
import { CodedError, RpcError } from '../transport/rpc';
import { fallBackAfterLoss, watchDeviceLoss } from '../selectBackend';
import type { TrainerModel } from './trainerModel';
import type { ContextDecoder } from '../../core/rollout/scheduler';
import { packWeights } from '../transport/weights';

type Encode = (text: string) => number[];
/** Attempts of one step when devices keep failing. */
const MAX_ATTEMPTS = 3;
const PROGRESS_EVERY_MS = 250;
/** The page trains open-ended: prompts come from (seed, step), `steps` only bounds the schedule. */
const OPEN_ENDED_STEPS = 10_000_000;

export class Training {
  /** The rollout pool's decoder; null when the model decodes here (the workers cannot rebuild LoRA adapters over frozen weights). */
  private decoder: PooledDecoder | null;
  /** What the pool holds: which model at which version, and the host copy of those weights. */
  private synced: { model: TrainerModel; version: number; weights: Map<string, Float32Array> } | null = null;
  private trainerLost: Alarm = alarm();
  private stopWatching: () => void = () => {};
  /** Notes about device losses and restarts since init. */
  private readonly notes: string[] = [];

  private constructor(
    private readonly host: EngineHost,
    private config: RunConfig,
    public model: TrainerModel,
    private backend: BackendReport,
    private pool: RolloutPool,
    private grads: GradPool,
    private readonly wasmPaths: string | undefined,
    private readonly emit: (e: EngineEvent) => void,
  ) {
    this.decoder = decoderOf(pool, model);
    this.watchTrainer();
    pool.onBackendChange((i, report) => this.onWorkerBackend(i, report));
  }

  /** Selects the trainer's backend, then starts the pool and sends it the weights. */
  static async start(
    host: EngineHost,
    config: RunConfig,
    makeModel: () => TrainerModel,
    wasmPaths: string | undefined,
    emit: (e: EngineEvent) => void,
  ): Promise<Training> {
    const backend = await host.selectBackend(config.backend, wasmPaths);
    const model = makeModel();
    let pool: RolloutPool;
    let grads: GradPool;
    try {
      pool = await startPool(host, config, wasmPaths);
    } catch (e) {
      model.dispose();
      throw e;
    }
    try {
      grads = await startGradPool(host, config, wasmPaths);
    } catch (e) {
      pool.terminate();
      model.dispose();
      throw e;
    }
    const t = new Training(host, config, model, backend, pool, grads, wasmPaths, emit);
    try {
      await t.syncPool();
    } catch (e) {
      t.dispose();
      throw e;
    }
    return t;
  }

  get workers(): number {
    return this.pool.size;
  }

  get gradWorkers(): number {
    return this.grads.size;
  }

  /** The trainer's backend, with notes on selection, workers on another backend, and device losses. */
  backendReport(): BackendReport {
    const other = (what: string, backends: (BackendReport | null)[]) =>
      backends.flatMap((b, i) =>
        b !== null && b.backend !== this.backend.backend ? [`${what} ${i}: ${b.backend}${b.notes.length ? ` (${b.notes.join('; ')})` : ''}`] : [],
      );
    return {
      ...this.backend,
      notes: [...this.backend.notes, ...other('rollout worker', this.pool.backends()), ...other('gradient worker', this.grads.backends()), ...this.notes],
    };
  }

  /** The 'backend' event: the report and the worker counts. */
  backendEvent(): EngineEvent {
    return { kind: 'backend', report: this.backendReport(), workers: this.workers, gradWorkers: this.gradWorkers };
  }

  setConfig(config: RunConfig): void {
    this.config = config;
  }

  /** A different backend preference or pool size: re-select here, restart the pools, move the weights. */
  async restartBackend(config: RunConfig): Promise<void> {
    const weights = await this.model.weights();
    this.pool.terminate();
    this.grads.terminate();
    this.backend = await this.host.selectBackend(config.backend, this.wasmPaths);
    await this.model.rebuild(weights);
    this.watchTrainer();
    this.pool = await startPool(this.host, config, this.wasmPaths);
    this.pool.onBackendChange((i, report) => this.onWorkerBackend(i, report));
    this.grads = await startGradPool(this.host, config, this.wasmPaths);
    this.decoder = decoderOf(this.pool, this.model);
    this.synced = null;
    this.config = config;
  }

  replaceModel(model: TrainerModel): void {
    this.model.dispose();
    this.model = model;
    this.decoder = decoderOf(this.pool, model);
  }

  /** Sends the weights if the pool is behind, repairs replicas that lost them, and restarts dead gradient workers. */
  async syncPool(): Promise<void> {
    const { model } = this;
    if (this.synced?.model !== model || this.synced.version !== model.version) {
      const weights = await model.weights();
      // A model the workers cannot rebuild (LoRA adapters over frozen weights) decodes here instead.
      if (model.replica !== null) await this.pool.broadcast({ version: model.version, model: model.replica, payload: packWeights(weights, canShareMemory()) });
      this.synced = { model, version: model.version, weights };
    }
    if (!this.pool.healthy) this.addNotes(await this.pool.repair());
    if (!this.grads.healthy) this.addNotes(await this.grads.repair());
  }

  /**
   * The run as the core loop sees it (core/rl/grpoRun.ts), at the model's counters: the page
   * trains open-ended, so the schedule is bounded only by OPEN_ENDED_STEPS.
   */
  private grpoRun(): GrpoRun {
    const methods: Method[] = ['delegate', 'mono'];
    return new GrpoRun(
      grpoConfigOf(this.config, OPEN_ENDED_STEPS),
      taskMixOf(this.config),
      { every: this.config.evalEvery, n: this.config.evalN, methods },
      this.model.grpoSteps,
      this.model.version,
    );
  }

  /** Refuses, by name, settings the model cannot honour (a Hugging Face model: the toy-only ones, when set away from their defaults). */
  private checkSettings(): void {
    if (this.model.kind === 'toy') return;
    const base = runConfigDefaults('page', this.config.task);
    const set = TOY_MODEL_ONLY.filter((k) => JSON.stringify(this.config[k]) !== JSON.stringify(base[k]));
    if (set.length > 0) {
      throw new Error(
        `${set.join(', ')}: only the toy model honours ${set.length === 1 ? 'it' : 'them'} (a limit drawn below the problem's chain counts the toy's tokens; label smoothing reads every logit); set ${set.length === 1 ? 'it' : 'them'} back to the default for a ${this.model.preset} model`,
      );
    }
  }

  /** One GRPO step (GrpoRun.step): rollouts in the pool, the updates here (shared with the gradient workers), then the new weights to the pool. */
  async grpoStep(encode: Encode, onProgress?: (p: StepProgress) => void): Promise<{ metrics: StepMetrics; episodes: ScoredEpisode[] }> {
    this.checkSettings();
    for (let attempt = 1; ; attempt++) {
      const model = this.model;
      try {
        await this.syncPool();
        const run = this.grpoRun();
        const { cfg } = run;
        // The copy syncPool just broadcast is the weights the step starts from: the gradient workers get it too.
        const gradients =
          model.replica === null
            ? undefined
            : this.grads.share(model.replica, this.synced?.model === model && this.synced.version === model.version ? this.synced.weights : undefined);
        const deps = {
          model: model.policyModel(encode),
          reference: cfg.loss.beta > 0 ? model.referenceScorer() : null,
          optimizer: model.grpoOptimizer(cfg.lr, cfg.weightDecay, cfg.gradClip),
          encode,
          ...(this.decoder === null ? {} : { decoder: this.decoder }),
          ...(gradients ? { gradients } : {}),
          ...(onProgress ? { onProgress } : {}),
        };
        // A step redone after a device loss restarts the optimizer again: no update of it was kept.
        const restart = () => {
          model.restartGrpoOptimizer();
          return model.grpoOptimizer(cfg.lr, cfg.weightDecay, cfg.gradClip);
        };
        const r = await this.guard(run.step(deps, restart));
        model.grpoSteps = run.steps;
        model.version = run.version;
        await this.syncPool();
        return r;
      } catch (e) {
        if (attempt >= MAX_ATTEMPTS || !(await this.recover(e))) throw e;
      }
    }
  }

  /** Whether the run evaluates the held-out set after reaching `step` (GrpoRun.evaluatesAt). */
  evaluatesAt(step: number): boolean {
    return this.grpoRun().evaluatesAt(step);
  }

  /**
   * The run's held-out evaluation of the current weights (GrpoRun.evaluate): delegate and mono at
   * each task's training limit, for every task of a mix, each point labelled with its step.
   */
  async heldOut(
    encode: Encode,
    onPoint: (p: FrontierPoint) => void,
    onProgress?: (what: string, done: number, total: number) => void,
  ): Promise<FrontierPoint[]> {
    await this.syncPool();
    const label = (p: HeldOutPoint): FrontierPoint => ({ ...p, checkpoint: `step ${p.step}` });
    const points = await this.withDecoder(encode, (decoder) => this.guard(this.grpoRun().evaluate(decoder, encode, (p) => onPoint(label(p)), onProgress)));
    return points.map(label);
  }

  /** The slow-motion view of a step that has just run (`r`), read under the weights it produced. */
  async anatomy(r: { metrics: StepMetrics; episodes: ScoredEpisode[] }, versionBefore: number): Promise<StepAnatomy> {
    const { model } = this;
    // The anatomy reads only the model's scores, never its encoder.
    return this.guard(
      stepAnatomy(
        model.policyModel(() => []),
        grpoConfigOf(this.config, OPEN_ENDED_STEPS),
        r,
        versionBefore,
        model.version,
      ),
    );
  }

  /** Supervised warm start; stops early when `stopped()` turns true. */
  async sft(steps: number, encode: Encode, stopped: () => boolean): Promise<{ steps: number; loss: number }> {
    // Each request is its own cosine schedule (its warm-up at most a tenth of it).
    this.checkSettings();
    const cfg = sftConfigOf(this.config, steps);
    const t0 = Date.now();
    let done = 0;
    let tokens = 0;
    let loss = NaN;
    let lastProgress = 0;
    while (done < steps && !stopped()) {
      const model = this.model;
      const lr = cosineLr(done, steps, cfg.lr, cfg.warmup, cfg.minLrFrac);
      const seqs = model.sftSequences(this.config, cfg, encode);
      try {
        const optimizer = model.sftOptimizer(cfg.lr, cfg.weightDecay, cfg.gradClip);
        if (!this.grads.healthy) this.addNotes(await this.grads.repair());
        // The gradient workers rebuild the model from its trained weights: not LoRA adapters alone.
        const remote = model.replica !== null && this.grads.size > 0;
        if (remote) await this.guard(this.grads.sync(model.trainable, model.replica));
        const r = await this.guard(
          sftStepOf(model.learner(), optimizer, seqs, lr, cfg.microTokens, remote ? this.grads.sftRemotes() : [], this.grads.patience, cfg.labelSmoothing ?? 0),
        );
        model.sftSteps++;
        if (r.applied) model.version++;
        loss = r.loss;
        tokens += r.tokens;
        this.emit({ kind: 'sftMetrics', rows: [sftMetricsRow(model.sftSteps, r, lr, (Date.now() - t0) / 1000)] });
        // The status bar's version moves with each applied step, as it does for GRPO.
        if (r.applied) this.emit({ kind: 'policyVersion', policyVersion: model.version });
      } catch (e) {
        if (!(await this.recover(e))) throw e;
        continue;
      }
      done++;
      const elapsed = (Date.now() - t0) / 1000;
      if (Date.now() - lastProgress >= PROGRESS_EVERY_MS || done === steps) {
        lastProgress = Date.now();
        this.emit({ kind: 'sftProgress', step: done, steps, loss, tokensPerSec: tokens / Math.max(elapsed, 1e-3), etaSec: (elapsed / done) * (steps - done) });
      }
      await yieldToEvents();
    }
    await this.syncPool();
    return { steps: done, loss };
  }

  /**
   * Frontier points of the current weights on the fixed held-out set: each method at each
   * root limit, episodes run by the rollout pool. `onPoint` sees each point when it is done.
   */
  async frontier(
    methods: readonly Method[],
    limits: readonly number[],
    n: number,
    encode: Encode,
    label: { checkpoint: string; step?: number },
    onPoint: (p: FrontierPoint) => void,
    onProgress?: (what: string, done: number, total: number) => void,
  ): Promise<FrontierPoint[]> {
    await this.syncPool();
    // The configured options (the long-context multihop setting, say), not the task's defaults.
    const [{ task, opts }] = taskMixOf(this.config);
    const problems = heldOutProblems(task, opts, n, HELD_OUT_SEED, 'monitor');
    const spec = { temperature: this.config.temperature, seed: HELD_OUT_SEED, batch: 64, rollout: rolloutConfigOf(this.config) };
    const points: FrontierPoint[] = [];
    for (const method of methods) {
      for (const limit of limits) {
        const what = `evaluation: ${method} at ${limit}`;
        const progress = onProgress && ((done: number, total: number) => onProgress(what, done, total));
        const p: FrontierPoint = {
          ...(await this.withDecoder(encode, (decoder) => this.guard(frontierPoint(decoder, task, problems, method, limit, spec, encode, progress)))),
          ...label,
        };
        points.push(p);
        onPoint(p);
      }
    }
    return points;
  }

  /** Test hook: the recovery path of a lost device, in the trainer or in one rollout worker. */
  async simulateDeviceLoss(where: 'trainer' | number): Promise<void> {
    if (where === 'trainer') this.trainerLost.fire(new CodedError(DEVICE_LOST, 'trainer: device lost (simulated device loss)'));
    else await this.pool.request(where, { kind: 'loseDevice' });
  }

  dispose(): void {
    this.stopWatching();
    this.pool.terminate();
    this.grads.terminate();
    this.model.dispose();
  }

  /** Runs `work` on the pool's decoder, or on one over the weights here when the workers cannot hold the model (LoRA). */
  private async withDecoder<T>(encode: Encode, work: (decoder: ContextDecoder) => Promise<T>): Promise<T> {
    if (this.decoder !== null) return work(this.decoder);
    const local = this.model.policyModel(encode).decoder(64);
    try {
      return await work(local);
    } finally {
      local.dispose();
    }
  }

  /** Races trainer work against the loss of its device (a lost device can hang a readback). */
  private guard<T>(work: Promise<T>): Promise<T> {
    return Promise.race([work, this.trainerLost.promise]);
  }

  /** Gets ready to redo a step after a device loss or a dead worker; false when `e` is another failure. */
  private async recover(e: unknown): Promise<boolean> {
    const code = e instanceof RpcError || e instanceof CodedError ? e.code : undefined;
    const trainerLost = this.trainerLost.fired !== null;
    if (!trainerLost && code !== DEVICE_LOST && code !== 'closed') return false;
    await this.decoder?.reset();
    if (trainerLost) await this.recoverTrainer();
    await this.syncPool();
    this.emit({ kind: 'log', level: 'warn', message: `step redone after: ${(e as Error).message}` });
    return true;
  }

  private async recoverTrainer(): Promise<void> {
    const reason = this.trainerLost.fired?.message ?? 'device lost';
    const synced = this.synced;
    this.stopWatching();
    const report = await fallBackAfterLoss(reason, this.wasmPaths === undefined ? {} : { wasmPaths: this.wasmPaths });
    this.backend = { ...report, notes: [] };
    if (synced === null || synced.model !== this.model) throw new Error(`trainer: ${reason}, and no copy of the weights to restore`);
    await this.model.rebuild(synced.weights);
    this.model.version = synced.version;
    this.trainerLost = alarm();
    this.watchTrainer();
    this.addNotes([`trainer: ${report.notes[0] ?? reason}; weights restored from version ${synced.version}, optimizer state reset`]);
  }

  private watchTrainer(): void {
    this.stopWatching();
    this.stopWatching = watchDeviceLoss((reason) => this.trainerLost.fire(new CodedError(DEVICE_LOST, `trainer: device lost (${reason})`)));
  }

  private onWorkerBackend(index: number, report: BackendReport): void {
    this.pool.invalidate(index);
    this.addNotes([`rollout worker ${index}: ${report.notes[0] ?? `now on ${report.backend}`}`]);
  }

  private addNotes(notes: string[]): void {
    if (notes.length === 0) return;
    this.notes.push(...notes);
    this.emit(this.backendEvent());
  }
}

/** The pool's decoder for `model` in its protocol; null when the workers cannot rebuild it (LoRA adapters over frozen weights). */
function decoderOf(pool: RolloutPool, model: TrainerModel): PooledDecoder | null {
  return model.replica === null ? null : new PooledDecoder(pool, model.replica, model.poolProtocol);
}

function startPool(host: EngineHost, config: RunConfig, wasmPaths: string | undefined): Promise<RolloutPool> {
  return RolloutPool.start((i) => host.startRolloutWorker(i), config.workers, { backend: config.backend, ...(wasmPaths === undefined ? {} : { wasmPaths }) });
}

function startGradPool(host: EngineHost, config: RunConfig, wasmPaths: string | undefined): Promise<GradPool> {
  return GradPool.start((i) => host.startGradWorker(i), config.gradWorkers, { backend: config.backend, ...(wasmPaths === undefined ? {} : { wasmPaths }) });
}
