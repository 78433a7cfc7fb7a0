/**
 * A GRPO run, step by step: the one loop that the CLI's `train` and the page's engine both drive,
 * so that the two produce the same steps by construction. It owns what makes a step the n-th step
 * of a run:
 *
 *   - the step counter (0-based before a step, the metrics row's `step` after it) and the policy
 *     version, which counts the GRPO steps applied to the weights (one per step, whatever the
 *     number of optimizer updates inside it; a warm-start step applied on the page counts too);
 *   - the token-cost schedule (`rewardAt`) and the optimizer restart at its switch
 *     (`restartsOptimizerAt`), asked of the front end through `restartOptimizer`;
 *   - the held-out evaluation every `evalEvery` steps (and after the last step of a bounded run):
 *     every task of a mix, on the monitor split from HELD_OUT_SEED, at the task's own root limit.
 *
 * What differs between front ends stays with them, behind the hooks: where rollouts run (a
 * worker pool or this thread), saving, logging, events, retries after a lost device.
 */
import type { ContextDecoder } from '../rollout/scheduler';
import { type FrontierPoint, type Method, frontierPoint } from '../eval/frontier';
import { heldOutProblems } from '../eval/evaluate';
import { HELD_OUT_SEED } from '../eval/splits';
import type { TaskMixEntry } from '../sft/sft';
import { type GrpoConfig, type ScoredEpisode, type StepMetrics, type TrainerDeps, grpoStep, restartsOptimizerAt, rewardAt } from './grpoStep';
import type { AdamW } from '../optim/adamw';

/** One held-out reading: a frontier point of the weights after `step`, for one task of the run's mix, with its mean reward. */
export interface HeldOutPoint extends FrontierPoint {
  task: string;
  step: number;
  /** Mean episode reward under the reward the run trained the step with. */
  meanReward: number;
}

export interface EvaluationSettings {
  /** Steps between evaluations (0: none). */
  every: number;
  /** Problems per evaluation (a fixed set: the first n of the monitor split from HELD_OUT_SEED). */
  n: number;
  /** Methods evaluated, each at the task's root limit (the CLI: delegate; the page: delegate and mono). */
  methods: readonly Method[];
}

/** What a step needs from its front end; `optimizer` is the run's current one. */
export type StepDeps = Omit<TrainerDeps<unknown>, 'optimizer' | 'task' | 'mix'> & { optimizer: AdamW };

export class GrpoRun {
  constructor(
    readonly cfg: GrpoConfig,
    /** The run's tasks with their options (one entry for a single task). */
    readonly mix: readonly TaskMixEntry[],
    readonly evaluation: EvaluationSettings,
    /** GRPO steps done (a resumed run starts where it stopped). */
    public steps = 0,
    /** The policy version of the weights (GRPO steps applied, and on the page warm-start steps too). */
    public version = steps,
  ) {
    if (mix.length === 0) throw new Error('GrpoRun: the mix has no task');
  }

  get done(): boolean {
    return this.steps >= this.cfg.steps;
  }

  /**
   * The next step: the optimizer restarts first when the cost switches on here (`restartOptimizer`
   * returns the new one), then rollouts, advantages and the PPO updates. The counters move only
   * when the step finished, so a step that throws can be redone as the same step.
   */
  async step(deps: StepDeps, restartOptimizer: () => AdamW): Promise<{ metrics: StepMetrics; episodes: ScoredEpisode[] }> {
    const optimizer = restartsOptimizerAt(this.cfg, this.steps) ? restartOptimizer() : deps.optimizer;
    const mix = this.mix.length > 1 ? { mix: this.mix } : { task: this.mix[0].task };
    const r = await grpoStep({ ...deps, ...mix, optimizer }, this.cfg, this.steps, this.version);
    this.steps++;
    this.version++;
    return r;
  }

  /** Whether the run evaluates after reaching `step` (evalEvery, and the last step of a bounded run). */
  evaluatesAt(step: number): boolean {
    const every = this.evaluation.every;
    return every > 0 && (step % every === 0 || step === this.cfg.steps);
  }

  /**
   * The held-out evaluation of the current weights (after `this.steps` steps): every task of the
   * mix × every method, greedy, at the task's root limit, on the same problems every time.
   */
  async evaluate(
    decoder: ContextDecoder,
    encode: (t: string) => number[],
    onPoint?: (p: HeldOutPoint) => void,
    onProgress?: (what: string, done: number, total: number) => void,
  ): Promise<HeldOutPoint[]> {
    const points: HeldOutPoint[] = [];
    const reward = rewardAt(this.cfg, Math.max(0, this.steps - 1));
    for (const { task, opts } of this.mix) {
      const rollout = { ...this.cfg.rollout, ...this.cfg.taskRollout?.[task.name] };
      const problems = heldOutProblems(task, opts, this.evaluation.n, HELD_OUT_SEED, 'monitor');
      const spec = { temperature: this.cfg.loss.temperature, seed: HELD_OUT_SEED, batch: 64, rollout, reward };
      for (const method of this.evaluation.methods) {
        const what = `evaluation: ${this.mix.length > 1 ? `${task.name}, ` : ''}${method} at ${rollout.rootMaxTokens}`;
        const progress = onProgress && ((done: number, total: number) => onProgress(what, done, total));
        const p = await frontierPoint(decoder, task, problems, method, rollout.rootMaxTokens, spec, encode, progress);
        const point: HeldOutPoint = { ...p, task: task.name, step: this.steps, meanReward: p.meanReward ?? NaN };
        points.push(point);
        onPoint?.(point);
      }
    }
    return points;
  }
}

/**
 * The fields a CLI metrics row gets from an evaluation's delegate points: evalAccuracy, evalTokens
 * and evalReward (for a mix, the mean over its tasks, and each task's own under `_<task>`), evalN.
 */
export function heldOutRowFields(points: readonly HeldOutPoint[]): Record<string, number> {
  const delegate = points.filter((p) => p.method === 'delegate');
  if (delegate.length === 0) return {};
  const mean = (f: (p: HeldOutPoint) => number) => delegate.reduce((a, p) => a + f(p), 0) / delegate.length;
  const row: Record<string, number> = {};
  if (delegate.length > 1) {
    for (const p of delegate)
      Object.assign(row, { [`evalAccuracy_${p.task}`]: p.accuracy, [`evalTokens_${p.task}`]: p.meanTokens, [`evalReward_${p.task}`]: p.meanReward });
  }
  return { evalAccuracy: mean((p) => p.accuracy), evalTokens: mean((p) => p.meanTokens), evalReward: mean((p) => p.meanReward), evalN: delegate[0].n, ...row };
}
