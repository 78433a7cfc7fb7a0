/**
 * The run configuration (runConfig.ts) mapped onto the trainer's configs: GRPO (loss,
 * advantage, reward, rollout), the warm start (SFT and the teacher's limits) and evaluation.
 * Page and CLI build through these functions, so the same RunConfig takes the same steps.
 * Every value a run can set comes from the table (RUN_CONFIG_FIELDS); the few the table does not
 * hold are constants of the code they belong to (named below where they are used), not defaults.
 * `defaultGrpoConfig` and `defaultSftConfig` are the table's defaults as trainer configs.
 */
import type { ProtocolLimits } from './protocol/grammar';
import { ANSWER_MAX_CHARS, type EpisodeLimits, type RolloutConfig } from './rollout/config';
import { CREDIT_EPS, RATIO_CLAMP } from './rl/advantage';
import { CALL_FREE, REWARD_FIELDS, type RewardConfig } from './rl/reward';
import { SFT_FIXED, type SftConfig, type TaskMixEntry } from './sft/sft';
import { GRPO_MICRO_TOKENS, type GrpoConfig } from './rl/grpoStep';
import {
  type RunConfig,
  type RunConfigKey,
  RunConfigError,
  checkField,
  fieldOf,
  miniBatchError,
  runConfigDefaults,
  taskEntryOf,
  taskPartsOf,
} from './runConfig';

/** The spawn limits of rollouts and of the teacher's demonstrations. */
export function limitsOf(c: RunConfig): ProtocolLimits {
  return { budgets: [...c.budgets], maxClonesPerRound: c.maxClones, maxRounds: c.maxRounds };
}

export function rolloutConfigOf(c: RunConfig, overrides: Partial<RolloutConfig> = {}): RolloutConfig {
  const knowsLimit =
    c.rootLimitMin !== null ? { rootLimitMin: c.rootLimitMin, ...(c.rootLimitStraddle > 0 ? { rootLimitStraddle: c.rootLimitStraddle } : {}) } : {};
  return checkRolloutConfig({
    ...limitsOf(c),
    rootMaxTokens: c.rootMaxTokens,
    answerMaxChars: ANSWER_MAX_CHARS,
    temperature: c.temperature,
    // Top-k truncation is not a run setting: rollouts sample from the whole distribution.
    topK: 0,
    greedy: false,
    allowSpawn: true,
    ...knowsLimit,
    ...overrides,
  });
}

/**
 * The table's rollout for `task` (its own root and spawn limits) with `overrides`: episodes run
 * outside a training run (rollout, eval, frontier, tests).
 */
export function defaultRolloutConfig(task = 'arithmetic', overrides: Partial<RolloutConfig> = {}): RolloutConfig {
  return rolloutConfigOf(runConfigDefaults('train', task), overrides);
}

/** The rollout fields that are run settings, with the table's field of each. */
const ROLLOUT_SETTING_FIELDS: readonly (readonly [keyof RolloutConfig, RunConfigKey])[] = [
  ['budgets', 'budgets'],
  ['maxClonesPerRound', 'maxClones'],
  ['maxRounds', 'maxRounds'],
  ['rootMaxTokens', 'rootMaxTokens'],
  ['temperature', 'temperature'],
  ['rootLimitMin', 'rootLimitMin'],
  ['rootLimitStraddle', 'rootLimitStraddle'],
];

/**
 * `r` checked against the table's ranges (the error names the rollout field and the range); a
 * limit drawn from below the root's token limit. Returns `r`.
 */
export function checkRolloutConfig(r: RolloutConfig): RolloutConfig {
  const errors: string[] = [];
  for (const [field, key] of ROLLOUT_SETTING_FIELDS) {
    if (r[field] === undefined) continue;
    const e = checkField(fieldOf(key), r[field], field);
    if (e) errors.push(e);
  }
  if (errors.length === 0 && r.rootLimitMin !== undefined && r.rootLimitMin > r.rootMaxTokens) {
    errors.push(`rootLimitMin must be at most rootMaxTokens = ${r.rootMaxTokens} (got ${r.rootLimitMin})`);
  }
  if (errors.length > 0) throw new Error(`rollout: ${errors.join('; ')}`);
  return r;
}

/**
 * A reward config given from outside (the verl reward file's, a recorded run's): fields it leaves
 * out take `base`'s; each is checked against the table's range (callFree, a term the table does
 * not hold, only for being a number ≥ 0). Errors name the field.
 */
export function checkRewardConfig(given: Partial<RewardConfig>, base: Partial<RewardConfig> = {}): RewardConfig {
  const c = { ...base, ...given } as RewardConfig;
  const errors: string[] = [];
  for (const f of REWARD_FIELDS) {
    if (c[f] === undefined) errors.push(`${f} is missing`);
    else if (f === 'callFree') {
      // A term of the formula the table does not hold (runs use CALL_FREE); a reward file may set it.
      if (!(typeof c.callFree === 'number' && Number.isFinite(c.callFree) && c.callFree >= 0)) {
        errors.push(`callFree must be a finite number ≥ 0 (got ${JSON.stringify(c.callFree)})`);
      }
    } else {
      const e = checkField(fieldOf(f), c[f], f);
      if (e) errors.push(e);
    }
  }
  if (errors.length > 0) throw new Error(`reward: ${errors.join('; ')}`);
  return c;
}

/**
 * The tasks of `c.task` with their validated options: one task's options directly, a mix's by
 * task name. Errors name `name` (e.g. `--options`); the checks are the table's (taskOptionsError).
 */
export function taskMixOf(c: RunConfig, name = 'taskOptions'): TaskMixEntry[] {
  return taskPartsOf(c.task, c.taskOptions, name).map(({ taskName, given, weight }): TaskMixEntry => ({ ...taskEntryOf(taskName, given, name), weight }));
}

export { taskEntryOf };

/** Resolved task options as a run records them: one task's own, a mix's by task name. */
export function resolvedTaskOptions(mix: readonly TaskMixEntry[]): Record<string, unknown> {
  return mix.length === 1 ? { ...mix[0].opts } : Object.fromEntries(mix.map((m) => [m.task.name, m.opts]));
}

/** The episode limits a mix can set per task, with the run config's field of each. */
const EPISODE_LIMIT_FIELDS = [
  ['rootMaxTokens', 'rootMaxTokens'],
  ['maxClonesPerRound', 'maxClones'],
  ['maxRounds', 'maxRounds'],
] as const;

/**
 * Each task's rollout limits in a mix. A mix's default for a limit is the largest of its
 * tasks' (runConfigDefaults), which would let arithmetic's long monolithic chains fit under
 * multihop's root limit; so a limit left at the mix's default takes each task's own default,
 * and a limit set to anything else applies to every task as given (docs/DECISIONS.md).
 */
export function taskRolloutOf(c: RunConfig, mix: readonly TaskMixEntry[]): Record<string, Partial<EpisodeLimits>> {
  const mixDefaults = runConfigDefaults('train', c.task);
  const out: Record<string, Partial<EpisodeLimits>> = {};
  for (const { task } of mix) {
    const own = runConfigDefaults('train', task.name);
    const limits: Partial<EpisodeLimits> = {};
    for (const [limit, field] of EPISODE_LIMIT_FIELDS) limits[limit] = c[field] === mixDefaults[field] ? own[field] : c[field];
    out[task.name] = limits;
  }
  return out;
}

/** GRPO for `steps` steps (the page runs open-ended: any large number); a mix draws each prompt's task by weight. */
export function grpoConfigOf(c: RunConfig, steps: number): GrpoConfig {
  const mix = taskMixOf(c);
  const mb = miniBatchError(c);
  if (mb) throw new RunConfigError([mb]);
  return {
    task: c.task,
    taskOptions: resolvedTaskOptions(mix),
    // Only a mix records the field, so one task's run.json (and its resume check) is as before.
    ...(mix.length > 1 ? { taskRollout: taskRolloutOf(c, mix) } : {}),
    steps,
    seed: c.seed,
    group: c.group,
    batch: c.batch,
    miniBatch: c.miniBatch,
    lr: c.lr,
    // Only a run that warms up records the field, so other runs' run.json (and resume checks) are as before.
    ...(c.lrWarmup > 0 ? { lrWarmup: c.lrWarmup } : {}),
    weightDecay: c.weightDecay,
    gradClip: c.gradClip,
    innerEpochs: c.epochs,
    microTokens: GRPO_MICRO_TOKENS,
    dynamicSampling: c.dynamicSampling ? { factor: c.oversample, maxRounds: c.sampleRounds } : null,
    loss: {
      beta: c.beta,
      clipLow: c.clip,
      clipHigh: c.clipHigh ?? c.clip,
      dualClip: c.dualClip,
      aggregation: c.aggregation,
      temperature: c.temperature,
    },
    advantage: {
      gating: c.gating,
      gateMode: c.gateMode,
      gatedKl: c.gatedKl,
      gateRoots: c.gateRoots,
      credit: c.credit,
      stdNormalize: c.std,
      eps: CREDIT_EPS,
      ratioClamp: RATIO_CLAMP,
    },
    reward: {
      partialCredit: c.partialCredit,
      rootTau: c.rootTau,
      rootRho: c.rootRho,
      rootPmax: c.rootPmax,
      cloneTau: c.cloneTau,
      cloneRho: c.cloneRho,
      clonePmax: c.clonePmax,
      callRate: c.callRate,
      callFree: CALL_FREE,
      budgetRate: c.budgetRate,
      tokenRate: c.tokenRate,
    },
    tokenRateAfter: c.tokenRateAfter,
    restartOptimizer: c.restartOptimizer,
    rollout: rolloutConfigOf(c),
  };
}

/** The warm start over `steps` steps; the teacher demonstrates within the run's spawn limits. */
export function sftConfigOf(c: RunConfig, steps: number): SftConfig {
  return {
    ...SFT_FIXED,
    task: c.task
      .split(',')
      .map((t) => t.trim())
      .join(','),
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
    ...(c.sftSloppyClones > 0 ? { sloppyClones: c.sftSloppyClones } : {}),
    ...(c.sftLabelSmoothing > 0 ? { labelSmoothing: c.sftLabelSmoothing } : {}),
    limits: limitsOf(c),
    ...(c.rootLimitMin !== null ? { rootLimits: { min: c.rootLimitMin, max: c.rootMaxTokens } } : {}),
  };
}

/** The table's defaults (surface `train`, the task's own) as a GRPO config of `steps` steps. */
export function defaultGrpoConfig(task = 'arithmetic', steps = 1): GrpoConfig {
  return grpoConfigOf(runConfigDefaults('train', task), steps);
}

/** The table's defaults (surface `sft`, the task's own) as a warm-start config of `steps` steps. */
export function defaultSftConfig(task = 'arithmetic', steps = 1): SftConfig {
  return sftConfigOf(runConfigDefaults('sft', task), steps);
}
