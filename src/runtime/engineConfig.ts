/**
 * The playground's one-table config (core/playgroundConfig.ts) mapped onto the trainer's
 * configs. Values the table does not expose keep the CLI's defaults, so a playground run and
 * `npm run cli -- train` with the same flags take the same steps.
 */
import type { PlaygroundConfig } from '../core/playgroundConfig';
import { type RolloutConfig, validateRolloutConfig } from '../core/rollout/config';
import { SFT_DEFAULTS, type SftConfig, validateSftConfig } from '../core/rl/sft';
import { GRPO_DEFAULTS, type GrpoConfig, validateGrpoConfig } from '../core/rl/train';

/** Prompts per step are drawn from (seed, step); `steps` only bounds validation. */
const OPEN_ENDED_STEPS = 10_000_000;

export function rolloutConfigFor(c: PlaygroundConfig, overrides: Partial<RolloutConfig> = {}): RolloutConfig {
  return validateRolloutConfig({
    ...GRPO_DEFAULTS.rollout,
    temperature: c.temperature,
    budgets: [...c.budgets],
    maxClonesPerRound: c.maxClones,
    maxRounds: c.maxRounds,
    ...overrides,
  });
}

export function grpoConfigFor(c: PlaygroundConfig): GrpoConfig {
  return validateGrpoConfig({
    ...GRPO_DEFAULTS,
    task: c.task,
    steps: OPEN_ENDED_STEPS,
    seed: c.seed,
    group: c.group,
    batch: c.batch,
    lr: c.lr,
    loss: { ...GRPO_DEFAULTS.loss, beta: c.beta, clipLow: c.clip, clipHigh: c.clip, temperature: c.temperature },
    advantage: { ...GRPO_DEFAULTS.advantage, gating: c.gating, credit: c.credit, stdNormalize: c.std },
    reward: {
      ...GRPO_DEFAULTS.reward,
      rootTau: c.rootTau,
      rootPmax: c.rootPmax,
      cloneTau: c.cloneTau,
      clonePmax: c.clonePmax,
      callRate: c.callRate,
    },
    rollout: rolloutConfigFor(c),
  });
}

/**
 * The warm start in the page: the CLI's SFT recipe with smaller steps (1024 tokens), so that
 * progress shows every second or so even on wasm. The cosine schedule spans one request.
 */
export function sftConfigFor(c: PlaygroundConfig, steps: number): SftConfig {
  return validateSftConfig({
    ...SFT_DEFAULTS,
    task: c.task,
    steps,
    seed: c.seed,
    batchTokens: 1024,
    microTokens: 1024,
    warmup: Math.min(SFT_DEFAULTS.warmup, Math.floor(steps / 10)),
  });
}

/** Rollout workers when the config does not say: min(4, cores − 1), at least 1. */
export function defaultWorkerCount(hardwareConcurrency: number): number {
  const cores = Number.isFinite(hardwareConcurrency) && hardwareConcurrency > 0 ? Math.floor(hardwareConcurrency) : 2;
  return Math.max(1, Math.min(4, cores - 1));
}
