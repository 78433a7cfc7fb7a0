import { checkRewardConfig, defaultGrpoConfig } from '../../core/runConfigTargets';
import { rewardAt } from '../../core/rl/grpoStep';
/**
 * The reward file for verl: selfcest_reward.py (next to this file, standard-library Python) with
 * a run's reward settings written into its CONFIG block. The Python holds the formula once; only
 * the block between the two marker lines changes from run to run.
 */
import { readFileSync } from 'node:fs';
import type { GateMode } from '../../core/rl/advantage';
import { REWARD_FIELDS, type RewardConfig } from '../../core/rl/reward';
import { REFERENCE_RECIPE, VERL_RECIPES, type VerlRecipe } from '../../core/verl/config';

export interface VerlRewardConfig {
  /** Whose reward formulas: the playground's (src/core/rl/reward.ts) or the reference's (clone_reward_2.py). Default playground. */
  recipe?: VerlRecipe;
  /** The verdict the Python applies: one of VERL_REWARD_TASKS. */
  task: string;
  reward: RewardConfig;
  gating: boolean;
  gateMode: GateMode;
  /** A clone's budget when verl's clone rollout does not carry one (its max response length). */
  cloneMaxTokens: number;
  /** The reference recipe's gate: a clone with no `answer:` (any case) past this many tokens gets 0. Default 192. */
  formatMaxTokens?: number;
  /** How the root's answer is read: the playground's exact verdict, or the last integer of a real model's prose. Default exact. */
  answers?: VerlAnswerRule;
  /** Write the reward's parts into the samples' extra fields, for selfcest_dump.py to log. Default true. */
  logParts?: boolean;
}

/** How selfcest_reward.py reads an answer (its CONFIG "answers"). */
export const VERL_ANSWER_RULES = ['exact', 'last-integer'] as const;
export type VerlAnswerRule = (typeof VERL_ANSWER_RULES)[number];

/** Tasks whose verdict selfcest_reward.py implements. */
export const VERL_REWARD_TASKS: readonly string[] = ['arithmetic', 'multihop'];

export const CONFIG_BEGIN = '# --- CONFIG (written by export-verl) ---';
export const CONFIG_END = '# --- end CONFIG ---';

/** selfcest_reward.py with `cfg` in its CONFIG block. */
export function rewardPythonSource(cfg: VerlRewardConfig): string {
  const source = readFileSync(new URL('./selfcest_reward.py', import.meta.url), 'utf8');
  return withRewardConfig(source, cfg, 'selfcest_reward.py');
}

/** `source` with its CONFIG block replaced by `cfg` (a Python dict literal). */
export function withRewardConfig(source: string, cfg: VerlRewardConfig, name = 'the reward source'): string {
  const begin = source.indexOf(CONFIG_BEGIN);
  const end = source.indexOf(CONFIG_END);
  if (begin < 0 || end < 0 || end < begin || source.indexOf(CONFIG_BEGIN, begin + 1) >= 0) {
    throw new Error(`${name}: expected one CONFIG block between the lines "${CONFIG_BEGIN}" and "${CONFIG_END}"; the markers are missing or out of order`);
  }
  const after = source.indexOf('\n', begin);
  return source.slice(0, after + 1) + pythonConfig(cfg) + source.slice(end);
}

function pythonConfig(cfg: VerlRewardConfig): string {
  const recipe = cfg.recipe ?? 'playground';
  if (!VERL_RECIPES.includes(recipe)) throw new Error(`verl reward: recipe must be one of ${VERL_RECIPES.join(', ')} (got ${JSON.stringify(recipe)})`);
  const formatMaxTokens = cfg.formatMaxTokens ?? REFERENCE_RECIPE.formatMaxTokens;
  if (!Number.isInteger(formatMaxTokens) || formatMaxTokens < 0)
    throw new Error(`verl reward: formatMaxTokens must be an integer ≥ 0 (got ${String(formatMaxTokens)})`);
  const answers = cfg.answers ?? 'exact';
  if (!VERL_ANSWER_RULES.includes(answers))
    throw new Error(`verl reward: answers must be one of ${VERL_ANSWER_RULES.join(', ')} (got ${JSON.stringify(answers)})`);
  const logParts = cfg.logParts ?? true;
  if (typeof logParts !== 'boolean') throw new Error(`verl reward: logParts must be true or false (got ${String(logParts)})`);
  if (!VERL_REWARD_TASKS.includes(cfg.task)) {
    throw new Error(`verl reward: task must be one of ${VERL_REWARD_TASKS.join(', ')} (got ${JSON.stringify(cfg.task)})`);
  }
  const reward = checkRewardConfig(cfg.reward, rewardAt(defaultGrpoConfig(cfg.task), 0));
  if (typeof cfg.gating !== 'boolean') throw new Error(`verl reward: gating must be true or false (got ${String(cfg.gating)})`);
  if (cfg.gateMode !== 'reference' && cfg.gateMode !== 'protocol') {
    throw new Error(`verl reward: gateMode must be "reference" or "protocol" (got ${JSON.stringify(cfg.gateMode)})`);
  }
  if (!Number.isInteger(cfg.cloneMaxTokens) || cfg.cloneMaxTokens < 1) {
    throw new Error(`verl reward: cloneMaxTokens must be an integer ≥ 1 (got ${String(cfg.cloneMaxTokens)})`);
  }
  const entries: [string, string | number | boolean][] = [
    ['recipe', recipe],
    ['task', cfg.task],
    ...REWARD_FIELDS.map((f): [string, number | boolean] => [f, reward[f]]),
    ['gating', cfg.gating],
    ['gateMode', cfg.gateMode],
    ['cloneMaxTokens', cfg.cloneMaxTokens],
    ['formatMaxTokens', formatMaxTokens],
    ['answers', answers],
    ['logParts', logParts],
  ];
  // JSON numbers and strings read the same in Python (shortest round-trip doubles); booleans differ.
  const literal = (v: string | number | boolean) => (typeof v === 'boolean' ? (v ? 'True' : 'False') : JSON.stringify(v));
  return `CONFIG = {\n${entries.map(([k, v]) => `    ${JSON.stringify(k)}: ${literal(v)},\n`).join('')}}\n`;
}
