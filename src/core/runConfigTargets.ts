/**
 * The run configuration (runConfig.ts) mapped onto the trainer's configs: GRPO (loss,
 * advantage, reward, rollout), the warm start (SFT and the teacher's limits) and evaluation.
 * Page and CLI build through these functions, so the same RunConfig takes the same steps.
 * Values the table does not hold keep the defaults of the config they belong to.
 */
import type { ProtocolLimits } from './protocol/grammar';
import { type RolloutConfig, validateRolloutConfig } from './rollout/config';
import { ADVANTAGE_DEFAULTS } from './rl/advantage';
import { POLICY_LOSS_DEFAULTS } from './rl/grpo';
import { REWARD_DEFAULTS } from './rl/reward';
import { SFT_DEFAULTS, type SftConfig, type TaskMixEntry } from './rl/sft';
import { GRPO_DEFAULTS, type GrpoConfig } from './rl/train';
import { type RunConfig, RunConfigError, miniBatchError } from './runConfig';
import { type TaskEntry, getTask, withOptions } from './tasks';

/** The spawn limits of rollouts and of the teacher's demonstrations. */
export function limitsOf(c: RunConfig): ProtocolLimits {
  return { budgets: [...c.budgets], maxClonesPerRound: c.maxClones, maxRounds: c.maxRounds };
}

export function rolloutConfigOf(c: RunConfig, overrides: Partial<RolloutConfig> = {}): RolloutConfig {
  return validateRolloutConfig({ ...GRPO_DEFAULTS.rollout, ...limitsOf(c), rootMaxTokens: c.rootMaxTokens, temperature: c.temperature, ...overrides });
}

/**
 * The tasks of `c.task` with their validated options: one task's options directly, a mix's by
 * task name. Errors name `name` (e.g. `--options`).
 */
export function taskMixOf(c: RunConfig, name = 'taskOptions'): TaskMixEntry[] {
  const entries = c.task.split(',').map((part) => {
    const [taskName, w] = part.trim().split(':');
    return { taskName, weight: w === undefined ? 1 : Number(w) };
  });
  const names = entries.map((e) => e.taskName);
  const options = c.taskOptions;
  // One task may give its options directly; a mix gives them by task name.
  const byName: Record<string, unknown> = names.length === 1 && !Object.hasOwn(options, names[0]) ? { [names[0]]: options } : options;
  const unknown = Object.keys(byName).filter((k) => !names.includes(k));
  if (unknown.length > 0) throw new RunConfigError([`${name}: ${unknown.join(', ')} is not a task of ${c.task}`]);
  return entries.map(({ taskName, weight }): TaskMixEntry => {
    const given = Object.hasOwn(byName, taskName) ? byName[taskName] : {};
    return { ...taskEntryOf(taskName, given, name), weight };
  });
}

/**
 * One task with its options from outside (JSON): an unknown field is named with the fields the
 * task has, a bad value by the task's own check; `name` is the field or flag the options came in.
 */
export function taskEntryOf(taskName: string, given: unknown, name = 'taskOptions'): TaskEntry {
  if (typeof given !== 'object' || given === null || Array.isArray(given)) throw new RunConfigError([`${name}: the options of ${taskName} must be a JSON object`]);
  const known = Object.keys(getTask(taskName).defaultOptions);
  const stray = Object.keys(given).filter((k) => !known.includes(k));
  if (stray.length > 0) throw new RunConfigError([`${name}: ${taskName} has no option ${stray.join(', ')} (it has ${known.join(', ')})`]);
  try {
    return withOptions(taskName, given);
  } catch (e) {
    throw new RunConfigError([`${name}: ${(e as Error).message}`]);
  }
}

/** Resolved task options as a run records them: one task's own, a mix's by task name. */
export function resolvedTaskOptions(mix: readonly TaskMixEntry[]): Record<string, unknown> {
  return mix.length === 1 ? { ...mix[0].opts } : Object.fromEntries(mix.map((m) => [m.task.name, m.opts]));
}

/** GRPO for `steps` steps (the page runs open-ended: any large number). */
export function grpoConfigOf(c: RunConfig, steps: number): GrpoConfig {
  const mix = taskMixOf(c);
  if (mix.length !== 1) throw new RunConfigError([`task: GRPO runs one task (got the mix ${JSON.stringify(c.task)})`]);
  const mb = miniBatchError(c);
  if (mb) throw new RunConfigError([mb]);
  return {
    ...GRPO_DEFAULTS,
    task: c.task,
    taskOptions: resolvedTaskOptions(mix),
    steps,
    seed: c.seed,
    group: c.group,
    batch: c.batch,
    miniBatch: c.miniBatch,
    lr: c.lr,
    weightDecay: c.weightDecay,
    gradClip: c.gradClip,
    innerEpochs: c.epochs,
    dynamicSampling: c.dynamicSampling ? { factor: c.oversample, maxRounds: c.sampleRounds } : null,
    loss: { ...POLICY_LOSS_DEFAULTS, beta: c.beta, clipLow: c.clip, clipHigh: c.clipHigh ?? c.clip, dualClip: c.dualClip, aggregation: c.aggregation, temperature: c.temperature },
    advantage: { ...ADVANTAGE_DEFAULTS, gating: c.gating, gateMode: c.gateMode, gatedKl: c.gatedKl, gateRoots: c.gateRoots, credit: c.credit, stdNormalize: c.std },
    reward: { ...REWARD_DEFAULTS, partialCredit: c.partialCredit, rootTau: c.rootTau, rootPmax: c.rootPmax, cloneTau: c.cloneTau, clonePmax: c.clonePmax, callRate: c.callRate, budgetRate: c.budgetRate },
    rollout: rolloutConfigOf(c),
  };
}

/** The warm start over `steps` steps; the teacher demonstrates within the run's spawn limits. */
export function sftConfigOf(c: RunConfig, steps: number): SftConfig {
  return {
    ...SFT_DEFAULTS,
    task: c.task.split(',').map((t) => t.trim()).join(','),
    taskOptions: resolvedTaskOptions(taskMixOf(c)),
    steps,
    seed: c.seed,
    lr: c.sftLr,
    batchTokens: c.sftBatchTokens,
    microTokens: c.sftMicroTokens,
    // A short run (the page runs one per request) warms up for at most a tenth of its steps.
    warmup: Math.min(c.sftWarmup, Math.floor(steps / 10)),
    delegateFraction: c.sftDelegateFraction,
    teacher: c.sftTeacher,
    limits: limitsOf(c),
  };
}
