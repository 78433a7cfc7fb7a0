/**
 * The run configuration: one table, each field once, with its default, allowed range, label,
 * CLI flag, URL-hash key and target (the part of the trainer's configs it sets). The page form,
 * the URL hash, the flags of `train` and `sft`, and the builders of the GRPO, rollout, reward,
 * SFT and teacher configs all derive from it, and a value is checked here, once, where it
 * enters (a typed flag, a hash, a form field, a message to the engine worker).
 *
 * Surfaces: a field is shown in the page (`page`) and/or set by CLI commands (`train`, `sft`).
 * Every field the page shows, `train` or `sft` can set. A few fields start from another default
 * in the page (`pageDefault`), where the page's steps must stay short; the page shows them, so
 * a CLI run with the same values reproduces a page run. Fields with `taskDefault` start from
 * the task's need (e.g. one clone per multihop chunk).
 */
import { BUDGET_BUCKETS } from './tokenizer/vocab';
import { SEED_MAX, checkSeed } from './rng';

import { TASKS, TASK_NAMES, TEACHER_STYLES, type TaskEntry, type TaskName, type TeacherStyle, getTask, isTaskName, withOptions } from './tasks';

export { TASK_NAMES };

export interface RunConfig {
  /** One task, or for `sft` a weighted mix `name[:weight],…`. */
  task: string;
  /** Task options as JSON: the task's own fields, or by task name for a mix. */
  taskOptions: Record<string, unknown>;
  preset: 'tiny' | 'small';
  // a Hugging Face model's training (refused for the toy, which trains every weight in float32)
  /** LoRA rank; 0 trains every weight. */
  loraR: number;
  loraAlpha: number;
  /** The linear layers adapted, by the last part of their name, comma-separated; '' is the attention's. */
  loraTargets: string;
  /** How a float16/bfloat16 checkpoint's matrices are held. */
  weights: 'auto' | 'half' | 'float32';
  seed: number;
  // GRPO
  group: number;
  batch: number;
  /** Prompts per PPO mini-batch (one optimizer update each); null: the whole batch. */
  miniBatch: number | null;
  /** DAPO dynamic sampling: over-sample prompts, train on groups whose rewards differ. */
  dynamicSampling: boolean;
  /** Dynamic sampling: prompts a round samples per group still missing. */
  oversample: number;
  /** Dynamic sampling: rounds at most, the first included. */
  sampleRounds: number;
  lr: number;
  /** GRPO steps over which the learning rate rises linearly to `lr` (0: none). */
  lrWarmup: number;
  weightDecay: number;
  gradClip: number;
  epochs: number;
  beta: number;
  clip: number;
  /** Upper clip ε; null: the same as `clip`. */
  clipHigh: number | null;
  /** Dual-clip constant c for negative advantages; null: off. */
  dualClip: number | null;
  aggregation: 'token-mean' | 'sequence-mean';
  temperature: number;
  gating: boolean;
  gateMode: 'reference' | 'protocol';
  gatedKl: boolean;
  gateRoots: boolean;
  credit: 'ratio' | 'broadcast';
  std: boolean;
  // reward
  partialCredit: boolean;
  rootTau: number;
  rootRho: number;
  rootPmax: number;
  cloneTau: number;
  cloneRho: number;
  clonePmax: number;
  callRate: number;
  budgetRate: number;
  tokenRate: number;
  /** Steps without the token cost before it starts (0: from the first step). */
  tokenRateAfter: number;
  /** At the step the token cost starts, Adam's moments and step count restart from zero. */
  restartOptimizer: boolean;
  // rollout (and the teacher's demonstrations)
  budgets: number[];
  maxClones: number;
  maxRounds: number;
  rootMaxTokens: number;
  rootLimitMin: number | null;
  rootLimitStraddle: number;
  // held-out evaluation during training
  evalEvery: number;
  evalN: number;
  // warm start (SFT)
  sftLr: number;
  sftBatchTokens: number;
  sftMicroTokens: number;
  sftWarmup: number;
  sftDelegateFraction: number;
  /** The teacher of the delegation demonstrations (TeacherStyle). */
  sftTeacher: TeacherStyle;
  sftSloppyClones: number;
  /** Label smoothing of the warm start's cross-entropy (0: none). */
  sftLabelSmoothing: number;
  // the page's process
  workers: number;
  gradWorkers: number;
  backend: 'auto' | 'webgpu' | 'wasm' | 'cpu';
  /** The shipped checkpoint the page starts from (auto: see startCheckpoint). */
  checkpoint: ShippedCheckpoint;
}

/** Checkpoints shipped under public/checkpoints/, with the preset each one is. */
export const SHIPPED_CHECKPOINTS = {
  warmstart: { preset: 'small', label: 'warm start, expert teacher (delegates well already)' },
  'warmstart-naive': { preset: 'small', label: 'warm start, naive teacher (protocol without strategy)' },
  'selfcest-arith': { preset: 'small', label: 'GRPO on arithmetic from the naive warm start, then a token cost: delegates only the long problems' },
  'warmstart-mix': { preset: 'small', label: 'two-task warm start (arithmetic and multihop)' },
  'selfcest-mix': { preset: 'small', label: 'GRPO on multihop from the two-task warm start (both tasks)' },
  'warmstart-tiny': { preset: 'tiny', label: 'tiny warm start' },
  // A Hugging Face folder (no selfcest.json): a Qwen2 made by `init --family qwen2`, warm-started in the text protocol; any preset.
  'text-warmstart': { preset: null, label: 'Qwen2 warm start in the text protocol (tool calls under a chat template), naive teacher' },
} as const;
export type ShippedName = keyof typeof SHIPPED_CHECKPOINTS;
export type ShippedCheckpoint = 'auto' | ShippedName | 'random';

/**
 * Names a shipped checkpoint had before, read as the name it has now, so that a saved session,
 * a kept run or a link that named the old one still loads (and starts from the same weights).
 */
export const RENAMED_CHECKPOINTS: Readonly<Record<string, ShippedName>> = {
  // r2's weights were shipped as selfcest-arith-tokens before they became selfcest-arith.
  'selfcest-arith-tokens': 'selfcest-arith',
};

/** A checkpoint value with an old name replaced by the current one; anything else as given. */
export function currentCheckpointName(value: unknown): unknown {
  return typeof value === 'string' && Object.hasOwn(RENAMED_CHECKPOINTS, value) ? RENAMED_CHECKPOINTS[value] : value;
}

/**
 * The shipped checkpoint a config starts from, or null for a random init. Auto on `small`: the
 * recipe's start for arithmetic (GRPO learns from the naive warm start, docs/TRAINING.md; the
 * expert one has little left to learn), the two-task warm start once multihop is in the task (the
 * arithmetic-only warm starts never saw a chunk).
 */
export function startCheckpoint(c: Pick<RunConfig, 'checkpoint' | 'preset' | 'task'>): ShippedName | null {
  if (c.checkpoint === 'random') return null;
  if (c.checkpoint === 'auto') {
    if (c.preset === 'tiny') return 'warmstart-tiny';
    return taskNamesOf(c.task).includes('multihop') ? 'warmstart-mix' : 'warmstart-naive';
  }
  return c.checkpoint;
}

export type RunConfigKey = keyof RunConfig;

/** Fields only a Hugging Face model reads (the toy trains every weight in float32). */
export const HF_MODEL_ONLY: readonly RunConfigKey[] = ['loraR', 'loraAlpha', 'loraTargets', 'weights'];
/**
 * Fields only the toy model honours, refused for a Hugging Face model when set: a limit drawn
 * below the problem's chain counts the toy's tokens, label smoothing reads every logit (the toy's loss only).
 */
export const TOY_MODEL_ONLY: readonly RunConfigKey[] = ['rootLimitStraddle', 'sftLabelSmoothing'];
export type Surface = 'page' | 'train' | 'sft';
export type Target = 'task' | 'model' | 'grpo' | 'loss' | 'advantage' | 'reward' | 'rollout' | 'eval' | 'sft' | 'page';

interface Base<K extends RunConfigKey> {
  key: K;
  label: string;
  /** One line for `--help` and the form's tooltip. */
  help: string;
  /** `--flag` for the commands in `surfaces` (default: the key in kebab case). */
  flag?: string;
  /** Which part of the trainer's configs the field sets. */
  target: Target;
  surfaces: readonly Surface[];
  default: RunConfig[K];
  pageDefault?: RunConfig[K];
  taskDefault?: Partial<Record<TaskName, RunConfig[K]>>;
}

type NumberKey = { [K in RunConfigKey]: RunConfig[K] extends number ? K : never }[RunConfigKey];
type BoolKey = { [K in RunConfigKey]: RunConfig[K] extends boolean ? K : never }[RunConfigKey];
type EnumKey = 'preset' | 'aggregation' | 'gateMode' | 'credit' | 'backend' | 'sftTeacher' | 'checkpoint' | 'weights';

export type Field =
  | ({ type: 'number'; min: number; max: number; int?: boolean } & Base<NumberKey>)
  | ({ type: 'seed' } & Base<'seed'>)
  | ({ type: 'optionalNumber'; min: number; max: number; int?: boolean } & Base<'clipHigh' | 'miniBatch' | 'dualClip' | 'rootLimitMin'>)
  | ({ type: 'enum'; values: readonly string[] } & Base<EnumKey>)
  | ({ type: 'bool' } & Base<BoolKey>)
  | ({ type: 'budgets' } & Base<'budgets'>)
  | ({ type: 'task' } & Base<'task'>)
  | ({ type: 'json' } & Base<'taskOptions'>)
  | ({ type: 'names' } & Base<'loraTargets'>);

/** A task's own rollout limits (Task.rolloutDefaults), by task name: one definition, in the task. */
function taskRolloutDefaults(field: 'maxClonesPerRound' | 'maxRounds' | 'rootMaxTokens'): Partial<Record<TaskName, number>> {
  const out: Partial<Record<TaskName, number>> = {};
  for (const n of TASK_NAMES) {
    const v = TASKS[n].rolloutDefaults?.[field];
    if (v !== undefined) out[n] = v;
  }
  return out;
}

/** The sampling temperature's range, for the flags of commands outside the table (rollout, eval). */
export const TEMPERATURE = { min: 0.05, max: 5 } as const;

/** The root token limit's range (rootMaxTokens, rootLimitMin), for the flags of commands outside the table (eval). */
export const ROOT_LIMIT = { min: 1, max: 8192 } as const;

const ALL: readonly Surface[] = ['page', 'train', 'sft'];
const GRPO: readonly Surface[] = ['page', 'train'];
const SFT: readonly Surface[] = ['page', 'sft'];
const TRAIN_ONLY: readonly Surface[] = ['train'];
const PAGE_ONLY: readonly Surface[] = ['page'];

/** Every field, in display order. */
export const RUN_CONFIG_FIELDS: readonly Field[] = [
  {
    key: 'task',
    type: 'task',
    label: 'Task',
    help: `task (${TASK_NAMES.join(', ')}); train and sft also take a weighted mix, e.g. arithmetic:1,multihop:3`,
    target: 'task',
    surfaces: ALL,
    default: 'arithmetic',
  },
  {
    key: 'taskOptions',
    type: 'json',
    flag: 'options',
    label: 'Task options',
    help: 'task options as JSON, fields not given keep the task\'s defaults (by task name for a mix), e.g. {"chunks":6,"perChunk":4,"filler":24} for multihop\'s long context',
    target: 'task',
    surfaces: ALL,
    default: {},
  },
  {
    key: 'preset',
    type: 'enum',
    values: ['tiny', 'small'],
    label: 'Model preset',
    help: 'model size of a fresh model',
    target: 'model',
    surfaces: SFT,
    default: 'small',
  },
  {
    key: 'loraR',
    type: 'number',
    min: 0,
    max: 1024,
    int: true,
    label: 'LoRA rank',
    help: 'LoRA rank of a Hugging Face model; 0 trains every weight (full fine-tuning)',
    target: 'model',
    surfaces: ALL,
    default: 8,
  },
  {
    key: 'loraAlpha',
    type: 'number',
    min: 1e-6,
    max: 1e6,
    label: 'LoRA alpha',
    help: 'LoRA alpha of a Hugging Face model (the update is scaled by alpha / r)',
    target: 'model',
    surfaces: ALL,
    default: 16,
  },
  {
    key: 'loraTargets',
    type: 'names',
    label: 'LoRA layers',
    help: "the linear layers of a Hugging Face model LoRA adapts, by the last part of their name, comma-separated (empty: the attention's, q_proj,k_proj,v_proj,o_proj or GPT-2's c_attn)",
    target: 'model',
    surfaces: ALL,
    default: '',
  },
  {
    key: 'weights',
    type: 'enum',
    values: ['auto', 'half', 'float32'],
    label: 'Weight storage',
    help: "how a Hugging Face model's float16/bfloat16 matrices are held: auto (16-bit on webgpu, float32 elsewhere), half (16-bit, widened where read: half the memory, slower on wasm), float32",
    target: 'model',
    surfaces: ALL,
    default: 'auto',
  },
  { key: 'seed', type: 'seed', label: 'Seed', help: `seed of init, data and sampling, an integer in [0, 2^53 − 1]`, target: 'task', surfaces: ALL, default: 0 },
  {
    key: 'group',
    type: 'number',
    min: 2,
    max: 64,
    int: true,
    label: 'Group size G',
    help: 'episodes per prompt (G)',
    target: 'grpo',
    surfaces: GRPO,
    default: 4,
  },
  {
    key: 'batch',
    type: 'number',
    min: 1,
    max: 1024,
    int: true,
    label: 'Prompts per step B',
    help: 'prompts per step (B)',
    target: 'grpo',
    surfaces: GRPO,
    default: 16,
  },
  {
    key: 'miniBatch',
    type: 'optionalNumber',
    min: 1,
    max: 1024,
    int: true,
    label: 'Prompts per mini-batch',
    help: 'prompts per PPO mini-batch, one optimizer update each; must divide the batch (empty: the whole batch, one update)',
    target: 'grpo',
    surfaces: GRPO,
    default: 4,
  },
  { key: 'lr', type: 'number', min: 1e-7, max: 0.1, label: 'Learning rate', help: 'GRPO learning rate', target: 'grpo', surfaces: GRPO, default: 2e-5 },
  {
    key: 'lrWarmup',
    type: 'number',
    min: 0,
    max: 100_000,
    int: true,
    label: 'Learning-rate warm-up',
    help: 'GRPO steps over which the learning rate rises linearly to lr (step k of N trains at lr·k/N; 0 = none)',
    target: 'grpo',
    surfaces: GRPO,
    default: 0,
  },
  {
    key: 'weightDecay',
    type: 'number',
    min: 0,
    max: 0.5,
    label: 'Weight decay',
    help: 'AdamW weight decay (GRPO)',
    target: 'grpo',
    surfaces: TRAIN_ONLY,
    default: 0,
  },
  {
    key: 'gradClip',
    type: 'number',
    min: 0,
    max: 100,
    label: 'Gradient clip',
    help: 'global gradient-norm clip (0 = off)',
    target: 'grpo',
    surfaces: TRAIN_ONLY,
    default: 1,
  },
  {
    key: 'epochs',
    type: 'number',
    min: 1,
    max: 16,
    int: true,
    label: 'Inner epochs',
    help: 'optimizer passes over each rollout batch (each reshuffles the mini-batches)',
    target: 'grpo',
    surfaces: TRAIN_ONLY,
    default: 1,
  },
  {
    key: 'dynamicSampling',
    type: 'bool',
    label: 'Dynamic sampling',
    help: 'over-sample prompts and train only on groups whose rewards differ (DAPO)',
    target: 'grpo',
    surfaces: GRPO,
    default: false,
  },
  {
    key: 'oversample',
    type: 'number',
    min: 1,
    max: 8,
    label: 'Over-sampling factor',
    help: 'dynamic sampling: prompts a round samples per group still missing (1: the first round is the plain batch)',
    target: 'grpo',
    surfaces: GRPO,
    default: 1.5,
  },
  {
    key: 'sampleRounds',
    type: 'number',
    min: 1,
    max: 16,
    int: true,
    label: 'Sampling rounds',
    help: 'dynamic sampling: rounds at most, then train on the groups kept',
    target: 'grpo',
    surfaces: GRPO,
    default: 3,
  },
  {
    key: 'beta',
    type: 'number',
    min: 0,
    max: 1,
    label: 'KL β',
    help: 'KL coefficient against the starting weights',
    target: 'loss',
    surfaces: GRPO,
    default: 5e-4,
  },
  {
    key: 'clip',
    type: 'number',
    min: 0.01,
    max: 0.99,
    label: 'Clip ε',
    help: 'ratio clip ε (low, and high unless --clip-high)',
    target: 'loss',
    surfaces: GRPO,
    default: 0.2,
  },
  {
    key: 'clipHigh',
    type: 'optionalNumber',
    min: 0.01,
    max: 9.99,
    label: 'Clip ε high',
    help: 'upper ratio clip ε (default: the same as clip)',
    target: 'loss',
    surfaces: TRAIN_ONLY,
    default: null,
  },
  {
    key: 'dualClip',
    type: 'optionalNumber',
    min: 1.01,
    max: 100,
    label: 'Dual clip c',
    help: 'dual-clip PPO: the objective of a token with A < 0 is at least c·A (the reference: 3; empty: off)',
    target: 'loss',
    surfaces: GRPO,
    default: 3,
  },
  {
    key: 'aggregation',
    type: 'enum',
    values: ['token-mean', 'sequence-mean'],
    label: 'Loss aggregation',
    help: 'loss aggregation',
    target: 'loss',
    surfaces: TRAIN_ONLY,
    default: 'token-mean',
  },
  {
    key: 'temperature',
    type: 'number',
    min: TEMPERATURE.min,
    max: TEMPERATURE.max,
    label: 'Temperature',
    help: 'rollout sampling temperature',
    target: 'rollout',
    surfaces: GRPO,
    default: 1,
  },
  {
    key: 'gating',
    type: 'bool',
    label: 'Rollout gating',
    help: 'rollout gating (--no-gating for the ablation)',
    target: 'advantage',
    surfaces: GRPO,
    default: true,
  },
  {
    key: 'gateMode',
    type: 'enum',
    values: ['reference', 'protocol'],
    label: 'Gate mode',
    help: 'which clones gating catches: reference (no answer and its budget spent) or protocol (any clone violation)',
    target: 'advantage',
    surfaces: GRPO,
    default: 'reference',
  },
  {
    key: 'gatedKl',
    type: 'bool',
    label: 'Gated keep KL',
    help: 'a gated context keeps its KL term (advantage 0, stays in the batch); --no-gated-kl drops it',
    target: 'advantage',
    surfaces: GRPO,
    default: true,
  },
  {
    key: 'gateRoots',
    type: 'bool',
    label: 'Gate roots',
    help: 'also gate roots with protocol violations',
    target: 'advantage',
    surfaces: TRAIN_ONLY,
    default: false,
  },
  {
    key: 'credit',
    type: 'enum',
    values: ['ratio', 'broadcast'],
    label: 'Clone credit',
    help: 'clone credit',
    target: 'advantage',
    surfaces: GRPO,
    default: 'ratio',
  },
  {
    key: 'std',
    type: 'bool',
    label: 'Std normalisation',
    help: 'divide advantages by the group std (--no-std: Dr. GRPO)',
    target: 'advantage',
    surfaces: GRPO,
    default: true,
  },
  {
    key: 'partialCredit',
    type: 'bool',
    label: 'Partial credit',
    help: 'partial numeric credit for wrong answers',
    target: 'reward',
    surfaces: GRPO,
    default: true,
  },
  {
    key: 'rootTau',
    type: 'number',
    min: 0,
    max: 4096,
    int: true,
    label: 'Root penalty τ',
    help: 'root tokens free of the length penalty',
    target: 'reward',
    surfaces: GRPO,
    default: 64,
  },
  {
    key: 'rootRho',
    type: 'number',
    min: 1,
    max: 65536,
    label: 'Root penalty ramp ρ',
    help: 'root tokens past τ over which the penalty rises by 1 − 1/e of Pmax',
    target: 'reward',
    surfaces: TRAIN_ONLY,
    default: 64,
  },
  {
    key: 'rootPmax',
    type: 'number',
    min: 0,
    max: 1,
    label: 'Root penalty Pmax',
    help: 'largest root length penalty',
    target: 'reward',
    surfaces: GRPO,
    default: 0.3,
  },
  {
    key: 'cloneTau',
    type: 'number',
    min: 0,
    max: 4096,
    int: true,
    label: 'Clone penalty τ',
    help: 'clone tokens free of the length penalty',
    target: 'reward',
    surfaces: GRPO,
    default: 32,
  },
  {
    key: 'cloneRho',
    type: 'number',
    min: 1,
    max: 65536,
    label: 'Clone penalty ramp ρ',
    help: 'clone tokens past τ over which the penalty rises by 1 − 1/e of Pmax',
    target: 'reward',
    surfaces: TRAIN_ONLY,
    default: 32,
  },
  {
    key: 'clonePmax',
    type: 'number',
    min: 0,
    max: 1,
    label: 'Clone penalty Pmax',
    help: 'largest clone length penalty',
    target: 'reward',
    surfaces: GRPO,
    default: 0.2,
  },
  {
    key: 'callRate',
    type: 'number',
    min: 0,
    max: 1,
    label: 'Spawn-call penalty',
    help: 'penalty per spawn call beyond the free ones',
    target: 'reward',
    surfaces: GRPO,
    default: 0.1,
  },
  {
    key: 'budgetRate',
    type: 'number',
    min: 0,
    max: 0.1,
    label: 'Budget cost',
    help: 'reward cost per reserved clone-budget token the clone did not use (0 = off)',
    target: 'reward',
    surfaces: GRPO,
    default: 0,
  },
  {
    key: 'tokenRate',
    type: 'number',
    min: 0,
    max: 0.1,
    label: 'Token cost',
    help: 'reward cost per generated token, root and clones (0 = off): a monolithic chain that fits then beats a longer delegation of the same problem',
    target: 'reward',
    surfaces: GRPO,
    default: 0.003,
  },
  {
    key: 'tokenRateAfter',
    type: 'number',
    min: 0,
    max: 10_000_000,
    int: true,
    label: 'Token cost after (steps)',
    help: 'steps trained without the token cost before it starts (0 = from the first step): the policy first learns to solve, then to be brief',
    target: 'reward',
    surfaces: GRPO,
    default: 250,
  },
  {
    key: 'restartOptimizer',
    type: 'bool',
    label: 'Restart Adam when the cost starts',
    help: "at the step the token cost starts (--token-rate-after), Adam's moments restart from zero, as in a second run started from the first one's weights",
    target: 'grpo',
    surfaces: GRPO,
    default: true,
  },
  {
    key: 'budgets',
    type: 'budgets',
    label: 'Budget buckets',
    help: `clone budget buckets a spawn may ask for (subset of ${BUDGET_BUCKETS.join(',')}); the teacher demonstrates only these`,
    target: 'rollout',
    surfaces: ALL,
    default: [...BUDGET_BUCKETS],
  },
  {
    key: 'maxClones',
    type: 'number',
    min: 1,
    max: 30,
    int: true,
    label: 'Clones per round',
    help: 'clones one spawn round may start (teacher and rollouts)',
    target: 'rollout',
    surfaces: ALL,
    default: 4,
    taskDefault: taskRolloutDefaults('maxClonesPerRound'),
  },
  {
    key: 'maxRounds',
    type: 'number',
    min: 0,
    max: 10,
    int: true,
    label: 'Spawn rounds',
    help: 'spawn rounds per episode (teacher and rollouts)',
    target: 'rollout',
    surfaces: ALL,
    default: 3,
    taskDefault: taskRolloutDefaults('maxRounds'),
  },
  {
    key: 'rootMaxTokens',
    type: 'number',
    ...ROOT_LIMIT,
    int: true,
    label: 'Root token limit',
    help: 'tokens the root may generate in an episode (arithmetic 48: a long monolithic chain does not fit, so delegation pays; multihop 224: a spawn per chunk per hop)',
    target: 'rollout',
    surfaces: ALL,
    default: 48,
    taskDefault: taskRolloutDefaults('rootMaxTokens'),
  },
  {
    key: 'rootLimitMin',
    type: 'optionalNumber',
    ...ROOT_LIMIT,
    int: true,
    label: 'Root limit drawn from',
    help: 'a root that knows its limit: the limit is written in the root prompt (<root>#48 …), each GRPO prompt draws it from [this, the root token limit], and the warm start demonstrates under a drawn one (empty: no limit in the prompt)',
    target: 'rollout',
    surfaces: ALL,
    default: null,
  },
  {
    key: 'rootLimitStraddle',
    type: 'number',
    min: 0,
    max: 1,
    label: 'Limits below the chain',
    help: "with a root limit drawn per prompt: the share of GRPO prompts whose limit is drawn below the tokens of the problem's monolithic chain (the teacher's), so the chain does not fit and delegation is what can pay; the rest draw from the whole range",
    target: 'rollout',
    surfaces: GRPO,
    default: 0,
  },
  {
    key: 'evalEvery',
    type: 'number',
    min: 0,
    max: 100000,
    int: true,
    label: 'Held-out eval every (steps)',
    help: 'steps between held-out evaluations (0 = off; the page adds frontier points)',
    target: 'eval',
    surfaces: ALL,
    default: 0,
    pageDefault: 10,
  },
  {
    key: 'evalN',
    type: 'number',
    min: 1,
    max: 2000,
    int: true,
    label: 'Held-out eval problems',
    help: 'problems per held-out evaluation (a fixed set)',
    target: 'eval',
    surfaces: ['page', 'train', 'sft'],
    default: 64,
    pageDefault: 32,
  },
  {
    key: 'sftLr',
    type: 'number',
    min: 1e-7,
    max: 0.1,
    flag: 'lr',
    label: 'Warm-start learning rate',
    help: 'peak learning rate of the warm start (cosine schedule)',
    target: 'sft',
    surfaces: SFT,
    default: 3e-3,
  },
  {
    key: 'sftBatchTokens',
    type: 'number',
    min: 64,
    max: 1 << 20,
    int: true,
    flag: 'batch-tokens',
    label: 'Warm-start tokens per step',
    help: 'tokens per warm-start step',
    target: 'sft',
    surfaces: SFT,
    default: 4096,
    pageDefault: 1024,
  },
  {
    key: 'sftMicroTokens',
    type: 'number',
    min: 64,
    max: 1 << 20,
    int: true,
    flag: 'micro-tokens',
    label: 'Warm-start micro-batch',
    help: 'largest padded micro-batch (tokens)',
    target: 'sft',
    surfaces: SFT,
    default: 2048,
    pageDefault: 1024,
  },
  {
    key: 'sftWarmup',
    type: 'number',
    min: 0,
    max: 1_000_000,
    int: true,
    flag: 'warmup',
    label: 'Warm-up steps',
    help: 'warm-up steps of the schedule (at most a tenth of the steps)',
    target: 'sft',
    surfaces: SFT,
    default: 50,
  },
  {
    key: 'sftDelegateFraction',
    type: 'number',
    min: 0,
    max: 1,
    flag: 'delegate-fraction',
    label: 'Delegation demos',
    help: 'share of delegation demonstrations',
    target: 'sft',
    surfaces: SFT,
    default: 0.5,
  },
  {
    key: 'sftTeacher',
    type: 'enum',
    values: TEACHER_STYLES,
    flag: 'teacher',
    label: 'Warm-start teacher',
    help: 'who demonstrates delegation: expert (balanced splits, budgets that fit) or naive (no strategy: 1–4 clones at random cuts, budgets from all buckets)',
    target: 'sft',
    surfaces: SFT,
    default: 'expert',
  },
  {
    key: 'sftSloppyClones',
    type: 'number',
    min: 0,
    max: 1,
    flag: 'sloppy-clones',
    label: 'Sloppy clone demos',
    help: 'share of clone demonstrations that break the protocol: the clone forgets its answer block and rambles past every budget (a warm start whose clones violate often, where rollout gating matters; 0 = none)',
    target: 'sft',
    surfaces: SFT,
    default: 0,
  },
  {
    key: 'sftLabelSmoothing',
    type: 'number',
    min: 0,
    max: 0.5,
    flag: 'label-smoothing',
    label: 'Label smoothing',
    help: 'label smoothing ε of the warm start: the target is (1 − ε) on the demonstrated token and ε spread evenly over the vocabulary, so the warm start keeps some entropy for GRPO to work with (0 = none)',
    target: 'sft',
    surfaces: SFT,
    default: 0,
  },
  {
    key: 'workers',
    type: 'number',
    min: 1,
    max: 16,
    int: true,
    label: 'Rollout workers',
    help: 'rollout workers in the page',
    target: 'page',
    surfaces: PAGE_ONLY,
    default: 2,
  },
  {
    key: 'gradWorkers',
    type: 'number',
    min: 0,
    max: 16,
    int: true,
    label: 'Gradient workers',
    help: "extra threads that share each update's gradient with the trainer (data parallel, one optimizer; 0 = the trainer thread only)",
    target: 'page',
    surfaces: PAGE_ONLY,
    default: 1,
  },
  {
    key: 'backend',
    type: 'enum',
    values: ['auto', 'webgpu', 'wasm', 'cpu'],
    label: 'Backend',
    help: 'tfjs backend in the page; auto passes over a software WebGPU adapter for wasm',
    target: 'page',
    surfaces: PAGE_ONLY,
    default: 'auto',
  },
  {
    key: 'checkpoint',
    type: 'enum',
    values: ['auto', ...Object.keys(SHIPPED_CHECKPOINTS), 'random'],
    label: 'Start from',
    help: 'the shipped checkpoint the page loads (auto: the tiny warm start for tiny; for small the naive warm start, or the two-task warm start when the task has multihop; text-warmstart: a Qwen2 Hugging Face folder in the text protocol, whatever the preset; random: a seeded random init)',
    target: 'page',
    surfaces: PAGE_ONLY,
    default: 'auto',
  },
];

export const fieldOf = (key: RunConfigKey): Field => RUN_CONFIG_FIELDS.find((f) => f.key === key)!;

/** The field's `--flag` name (without dashes). */
export function flagName(f: Field): string {
  return f.flag ?? f.key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

export const fieldsOf = (surface: Surface): Field[] => RUN_CONFIG_FIELDS.filter((f) => f.surfaces.includes(surface));

/** The known task names of a task or mix text. */
const taskNamesOf = (task: unknown): TaskName[] =>
  typeof task === 'string'
    ? task
        .split(',')
        .map((p) => p.split(':')[0].trim())
        .filter(isTaskName)
    : [];

/** A field's default on a surface; for a mix, the largest of its tasks' defaults (every task's demos must fit). */
function defaultOf<K extends RunConfigKey>(f: Base<K>, surface: Surface, tasks: readonly TaskName[]): RunConfig[K] {
  const base = surface === 'page' && f.pageDefault !== undefined ? f.pageDefault : f.default;
  const perTask = tasks.map((t) => f.taskDefault?.[t] ?? base);
  const v = perTask.length === 0 ? base : perTask.reduce((a, b) => (typeof a === 'number' && typeof b === 'number' ? (Math.max(a, b) as RunConfig[K]) : a));
  return (Array.isArray(v) ? [...v] : v) as RunConfig[K];
}

/** The defaults of a surface for a task. */
export function runConfigDefaults(surface: Surface, task: string = 'arithmetic'): RunConfig {
  const tasks = taskNamesOf(task);
  const c = {} as Record<RunConfigKey, unknown>;
  for (const f of RUN_CONFIG_FIELDS) c[f.key] = defaultOf(f as Base<RunConfigKey>, surface, tasks);
  c.task = task;
  return c as RunConfig;
}

/** The page's defaults (the first visit, a Reset of the form). */
export const PAGE_DEFAULTS: RunConfig = runConfigDefaults('page');

/**
 * Named recipes the page offers over its config: each sets only the fields it names (the rest
 * stay as they are). `recipe` is the project's, as the defaults have it (docs/TRAINING.md);
 * `reference` the paper's reference settings (the reference's clone_tool_grpo_alt.yaml: G 4, batch 32 in mini-batches of 8
 * prompts, clip 0.1, dual clip 3, KL k3 5e-4; token mean, grad clip 1 and one epoch are the
 * page's fixed values already; its lr 6e-7 is a 4B model's and is not copied); the ablation arm
 * turns gating off; Dr. GRPO drops the std. Page fields only.
 */
export const RUN_RECIPES: readonly { name: string; label: string; fields: Partial<RunConfig> }[] = [
  {
    name: 'recipe',
    label: 'project recipe (the defaults)',
    fields: Object.fromEntries(
      (
        [
          'group',
          'batch',
          'miniBatch',
          'lr',
          'beta',
          'clip',
          'dualClip',
          'gating',
          'gateMode',
          'gatedKl',
          'credit',
          'std',
          'dynamicSampling',
          'tokenRate',
          'tokenRateAfter',
          'restartOptimizer',
        ] as const
      ).map((k) => [k, PAGE_DEFAULTS[k]]),
    ) as Partial<RunConfig>,
  },
  {
    name: 'reference',
    label: 'paper reference (G 4, 32 prompts in mini-batches of 8, clip 0.1, no token cost; lr kept)',
    fields: {
      group: 4,
      batch: 32,
      miniBatch: 8,
      clip: 0.1,
      dualClip: 3,
      beta: 5e-4,
      gating: true,
      gateMode: 'reference',
      gatedKl: true,
      credit: 'ratio',
      std: true,
      dynamicSampling: false,
      tokenRate: 0,
      tokenRateAfter: 0,
      restartOptimizer: false,
    },
  },
  { name: 'no-gating', label: 'gating ablation arm (gating off)', fields: { gating: false } },
  { name: 'dr-grpo', label: 'Dr. GRPO (advantages without std normalisation)', fields: { std: false } },
];

/** The allowed range of a field, in words (for errors, help texts and tooltips). */
export function rangeOf(f: Field): string {
  switch (f.type) {
    case 'number':
      return `${f.int ? 'an integer' : 'a number'} in [${f.min}, ${f.max}]`;
    case 'optionalNumber':
      return `${f.int ? 'an integer' : 'a number'} in [${f.min}, ${f.max}], or unset`;
    case 'seed':
      return `an integer in [0, 2^53 − 1 = ${SEED_MAX}]`;
    case 'enum':
      return `one of ${f.values.join(', ')}`;
    case 'bool':
      return 'true or false';
    case 'budgets':
      return `a non-empty subset of ${BUDGET_BUCKETS.join(', ')}`;
    case 'task':
      return `a task (${TASK_NAMES.join(', ')}) or a mix name[:weight],…`;
    case 'json':
      return 'a JSON object';
    case 'names':
      return 'layer names, comma-separated (letters, digits, _ and .), or empty';
  }
}

/** The problem with a task mix text, or null. */
function taskMixError(text: string): string | null {
  const seen = new Set<string>();
  for (const part of text.split(',')) {
    const [name, w, ...rest] = part.trim().split(':');
    if (!isTaskName(name)) return `unknown task ${JSON.stringify(name)} (available: ${TASK_NAMES.join(', ')})`;
    if (seen.has(name)) return `task ${name} appears twice`;
    seen.add(name);
    if (rest.length > 0 || (w !== undefined && !(/^\d*\.?\d+$/.test(w) && Number(w) > 0)))
      return `the weight of ${name} must be a positive number (got ${JSON.stringify(part.trim())})`;
  }
  return null;
}

/** One task of a run's task text: its name, its weight in a mix, and the options given to it (not yet checked). */
export interface TaskPart {
  taskName: string;
  weight: number;
  given: unknown;
}

/**
 * The tasks of a task text with the options each is given: one task takes its own fields (or
 * them under its name), a mix takes them by task name. A key that is no task of the text is
 * named with `name` (the field or flag the options came in).
 */
export function taskPartsOf(task: string, options: Record<string, unknown>, name = 'taskOptions'): TaskPart[] {
  const entries = task.split(',').map((part) => {
    const [taskName, w] = part.trim().split(':');
    return { taskName, weight: w === undefined ? 1 : Number(w) };
  });
  const names = entries.map((e) => e.taskName);
  const byName: Record<string, unknown> = names.length === 1 && !Object.hasOwn(options, names[0]) ? { [names[0]]: options } : options;
  const unknown = Object.keys(byName).filter((k) => !names.includes(k));
  if (unknown.length > 0) throw new RunConfigError([`${name}: ${unknown.join(', ')} is not a task of ${task}`]);
  return entries.map(({ taskName, weight }) => ({ taskName, weight, given: Object.hasOwn(byName, taskName) ? byName[taskName] : {} }));
}

/**
 * One task with its options from outside (JSON): an unknown field is named with the fields the
 * task has, a bad value by the task's own check; `name` is the field or flag the options came in.
 */
export function taskEntryOf(taskName: string, given: unknown, name = 'taskOptions'): TaskEntry {
  if (typeof given !== 'object' || given === null || Array.isArray(given))
    throw new RunConfigError([`${name}: the options of ${taskName} must be a JSON object`]);
  const known = Object.keys(getTask(taskName).defaultOptions);
  const stray = Object.keys(given).filter((k) => !known.includes(k));
  if (stray.length > 0) throw new RunConfigError([`${name}: ${taskName} has no option ${stray.join(', ')} (it has ${known.join(', ')})`]);
  try {
    return withOptions(taskName, given);
  } catch (e) {
    throw new RunConfigError([`${name}: ${(e as Error).message}`]);
  }
}

/** What is wrong with the task options of a (valid) task text, named with `name`; null when each task accepts its options. */
export function taskOptionsError(task: string, options: Record<string, unknown>, name = 'taskOptions'): string | null {
  try {
    for (const p of taskPartsOf(task, options, name)) taskEntryOf(p.taskName, p.given, name);
    return null;
  } catch (e) {
    if (e instanceof RunConfigError) return e.errors.join('; ');
    throw e;
  }
}

/**
 * One value checked against its field; an error naming `name` (the flag, the hash key or the
 * field) and the allowed range, or null.
 */
export function checkField(f: Field, value: unknown, name: string = f.key): string | null {
  // NaN and ±Infinity written as themselves, also inside a list (JSON would write null).
  const shown = (v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v);
  const got = ` (got ${typeof value === 'number' && !Number.isFinite(value) ? String(value) : (JSON.stringify(value, (_k, v: unknown) => shown(v)) ?? String(value))})`;
  const bad = () => `${name} must be ${rangeOf(f)}${got}`;
  switch (f.type) {
    case 'number': {
      const ok = typeof value === 'number' && Number.isFinite(value) && value >= f.min && value <= f.max && (!f.int || Number.isInteger(value));
      return ok ? null : bad();
    }
    case 'optionalNumber':
      return value === null || (typeof value === 'number' && Number.isFinite(value) && value >= f.min && value <= f.max && (!f.int || Number.isInteger(value)))
        ? null
        : bad();
    case 'seed':
      return checkSeed(value, name);
    case 'enum':
      return typeof value === 'string' && f.values.includes(value) ? null : bad();
    case 'bool':
      return typeof value === 'boolean' ? null : bad();
    case 'budgets': {
      const ok =
        Array.isArray(value) &&
        value.length > 0 &&
        value.every((b) => (BUDGET_BUCKETS as readonly number[]).includes(b)) &&
        new Set(value).size === value.length;
      return ok ? null : bad();
    }
    case 'task': {
      if (typeof value !== 'string') return bad();
      const e = taskMixError(value);
      return e ? `${name}: ${e}` : null;
    }
    case 'json':
      return typeof value === 'object' && value !== null && !Array.isArray(value) ? null : bad();
    case 'names':
      return typeof value === 'string' && /^([A-Za-z0-9_.]+(,[A-Za-z0-9_.]+)*)?$/.test(value) ? null : bad();
  }
}

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** A number written in decimal ("12", "-0.5", "3e-4"); NaN for anything else (hex, "Infinity", blanks), which Number() would read. */
export function decimalNumber(text: string): number {
  const t = text.trim();
  return DECIMAL.test(t) ? Number(t) : NaN;
}

/** Text (a flag's value, a hash entry, a form field) → the field's value; NaN or the text when it does not parse. */
export function parseFieldText(f: Field, text: string): unknown {
  switch (f.type) {
    case 'number':
    case 'seed':
      return decimalNumber(text);
    case 'optionalNumber':
      return text.trim() === '' ? null : decimalNumber(text);
    case 'bool':
      return text === 'true' ? true : text === 'false' ? false : text;
    case 'budgets':
      return text.trim() === '' ? [] : text.split(',').map(decimalNumber);
    case 'json':
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return text;
      }
    default:
      return text;
  }
}

/** A field's value as text (the hash, the form). */
export function fieldText(f: Field, value: unknown): string {
  if (f.type === 'budgets') return (value as number[]).join(',');
  if (f.type === 'json') return JSON.stringify(value);
  if (value === null) return '';
  return String(value);
}

export class RunConfigError extends Error {
  constructor(readonly errors: string[]) {
    super(errors.join('; '));
  }
}

/**
 * A whole config for a surface: the surface's defaults (for the given task) under `partial`;
 * throws a RunConfigError listing every bad or unknown field. `names` maps a key to the name
 * the user wrote it under (e.g. `--lr`).
 */
export function validateRunConfig(partial: Partial<RunConfig>, surface: Surface, names: Partial<Record<RunConfigKey, string>> = {}): RunConfig {
  const base = runConfigDefaults(surface, typeof partial.task === 'string' ? partial.task : 'arithmetic');
  if ('checkpoint' in partial) partial = { ...partial, checkpoint: currentCheckpointName(partial.checkpoint) as ShippedCheckpoint };
  const c = { ...base, ...partial } as Record<RunConfigKey, unknown>;
  const errors: string[] = [];
  for (const k of Object.keys(partial)) {
    const f = RUN_CONFIG_FIELDS.find((x) => x.key === k);
    if (!f) errors.push(`unknown setting ${JSON.stringify(k)}`);
    // A whole config may carry every field; those of other surfaces must keep their defaults.
    else if (!f.surfaces.includes(surface) && JSON.stringify(partial[f.key]) !== JSON.stringify(base[f.key])) {
      errors.push(`${names[f.key] ?? k} cannot be set for ${surface} (only ${f.surfaces.join(', ')})`);
    }
  }
  for (const f of RUN_CONFIG_FIELDS) {
    const e = checkField(f, c[f.key], names[f.key] ?? f.key);
    if (e) errors.push(e);
  }
  if (errors.length === 0) errors.push(...crossFieldErrors(c as RunConfig, surface, names).map((e) => e.message));
  if (errors.length) throw new RunConfigError(errors);
  return c as RunConfig;
}

/**
 * Rules between fields (each field already in its range): the mini-batch splits the batch,
 * the optimizer restart has a switch step to restart at, the page runs one task, and (in the page) each task accepts its options. Each error
 * names the field to reset.
 */
export function crossFieldErrors(c: RunConfig, surface: Surface, names: Partial<Record<RunConfigKey, string>> = {}): { key: RunConfigKey; message: string }[] {
  const out: { key: RunConfigKey; message: string }[] = [];
  const mb = surface === 'sft' ? null : miniBatchError(c, names);
  if (mb) out.push({ key: 'miniBatch', message: mb });
  if (surface !== 'sft' && c.restartOptimizer && c.tokenRateAfter === 0) {
    out.push({
      key: 'restartOptimizer',
      message: `${names.restartOptimizer ?? 'restartOptimizer'} restarts Adam at the step the token cost starts, so it needs ${names.tokenRateAfter ?? 'tokenRateAfter'} > 0 (got 0)`,
    });
  }
  if (c.rootLimitStraddle > 0 && c.rootLimitMin === null) {
    out.push({
      key: 'rootLimitStraddle',
      message: `${names.rootLimitStraddle ?? 'rootLimitStraddle'} needs a root limit drawn per prompt (${names.rootLimitMin ?? 'rootLimitMin'})`,
    });
  }
  if (c.rootLimitMin !== null && c.rootLimitMin > c.rootMaxTokens) {
    out.push({
      key: 'rootLimitMin',
      message: `${names.rootLimitMin ?? 'rootLimitMin'} must be at most ${names.rootMaxTokens ?? 'rootMaxTokens'} = ${c.rootMaxTokens} (got ${c.rootLimitMin})`,
    });
  }
  const mixRefused = surface === 'page' && c.task.includes(',');
  if (mixRefused) out.push({ key: 'task', message: `${names.task ?? 'task'}: the page runs one task (got the mix ${JSON.stringify(c.task)})` });
  // The options are the task's to check (known fields, ranges), once the task itself is good. The
  // page checks them where they enter (form, hash, engine); train and sft where they build (taskMixOf).
  if (surface === 'page' && !mixRefused && checkField(fieldOf('task'), c.task) === null) {
    const opts = taskOptionsError(c.task, c.taskOptions, names.taskOptions ?? 'taskOptions');
    if (opts) out.push({ key: 'taskOptions', message: opts });
  }
  return out;
}

/**
 * The mini-batch must split the batch into equal whole-prompt parts; an error naming the
 * fields (as `names` spells them), or null. Checked where a config enters and by the builder.
 */
export function miniBatchError(c: Pick<RunConfig, 'miniBatch' | 'batch'>, names: Partial<Record<RunConfigKey, string>> = {}): string | null {
  const { miniBatch, batch } = c;
  // Values out of their own range are reported by checkField.
  if (miniBatch === null || !Number.isInteger(miniBatch) || miniBatch < 1 || !Number.isInteger(batch) || batch < 1) return null;
  const mb = names.miniBatch ?? 'miniBatch';
  const b = names.batch ?? 'batch';
  if (miniBatch > batch) return `${mb} must be at most ${b} = ${batch} (got ${miniBatch})`;
  if (batch % miniBatch !== 0) return `${mb} must divide ${b} = ${batch} (got ${miniBatch})`;
  return null;
}

/**
 * Config → URL hash: the page's fields that differ from the page's defaults for the task
 * (`defaults` overrides some, e.g. the rollout workers this machine starts with).
 */
export function configToHash(c: RunConfig, defaults: Partial<RunConfig> = {}): string {
  // Fields are compared with the defaults of the config's task; the task with the page's.
  const base: RunConfig = { ...runConfigDefaults('page', c.task), task: PAGE_DEFAULTS.task, ...defaults };
  const parts: string[] = [];
  for (const f of fieldsOf('page')) {
    const v = c[f.key];
    if (JSON.stringify(v) === JSON.stringify(base[f.key])) continue;
    parts.push(`${f.key}=${encodeURIComponent(fieldText(f, v))}`);
  }
  return parts.join('&');
}

function decoded(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/**
 * URL hash → config. Bad values are reported (field, range) and replaced by defaults, so a
 * mangled link still opens; the caller shows the errors. `defaults` as for configToHash.
 */
export function configFromHash(hash: string, defaults: Partial<RunConfig> = {}): { config: RunConfig; errors: string[]; notes: string[] } {
  const raw = hash.replace(/^#/, '');
  const entries = (raw ? raw.split('&') : []).map((part) => {
    const eq = part.indexOf('=');
    return eq < 0 ? [part, ''] : [part.slice(0, eq), part.slice(eq + 1)];
  });
  // The task first: the other fields' defaults depend on it. Only one known task counts.
  const taskText = decoded(entries.find(([k]) => k === 'task')?.[1] ?? '');
  const task = taskText !== null && isTaskName(taskText) ? taskText : PAGE_DEFAULTS.task;
  const start: RunConfig = { ...runConfigDefaults('page', task), ...defaults };
  const config: Record<RunConfigKey, unknown> = { ...start };
  const errors: string[] = [];
  for (const [k, v] of entries) {
    const f = fieldsOf('page').find((x) => x.key === k);
    if (!f) {
      errors.push(`unknown setting ${JSON.stringify(k)}`);
      continue;
    }
    const text = decoded(v);
    if (text === null) {
      errors.push(`${k}: not a valid URL encoding`);
      continue;
    }
    const value = f.key === 'checkpoint' ? currentCheckpointName(parseFieldText(f, text)) : parseFieldText(f, text);
    const err = checkField(f, value);
    if (err) errors.push(err);
    else config[f.key] = value;
  }
  const notes: string[] = [];
  const given = new Set(entries.map(([k]) => k));
  for (const e of crossFieldErrors(config as RunConfig, 'page')) {
    // A link that sets the batch but not the mini-batch: the mini-batch follows it, and the page says so.
    if (e.key === 'miniBatch' && !given.has('miniBatch')) {
      const batch = config.batch as number;
      const want = start.miniBatch ?? batch;
      const fit = Array.from({ length: Math.min(want, batch) }, (_, i) => Math.min(want, batch) - i).find((d) => batch % d === 0)!;
      config.miniBatch = fit;
      notes.push(`miniBatch set to ${fit}: the default ${want} does not divide batch = ${batch}`);
      continue;
    }
    // A drawn root limit must fit under the root limit: a link that asks for more gets the root limit, and the page says so.
    if (e.key === 'rootLimitMin') {
      const max = config.rootMaxTokens as number;
      notes.push(`rootLimitMin set to ${max}: ${config.rootLimitMin as number} does not fit under rootMaxTokens = ${max}`);
      config.rootLimitMin = max;
      continue;
    }
    errors.push(e.message);
    config[e.key] = start[e.key];
  }
  return { config: config as RunConfig, errors, notes };
}

/**
 * The flags that give a CLI command this config: every field the command takes whose value
 * is not the command's default (for the config's task); test/page-cli.test.ts runs the CLI with them.
 */
export function runConfigFlags(c: RunConfig, command: 'train' | 'sft'): string[] {
  const defaults = runConfigDefaults(command, c.task);
  const out: string[] = [];
  for (const f of fieldsOf(command)) {
    const v = c[f.key];
    if (JSON.stringify(v) === JSON.stringify(defaults[f.key])) continue;
    if (f.type === 'bool') out.push(v ? `--${flagName(f)}` : `--no-${flagName(f)}`);
    else out.push(`--${flagName(f)}`, fieldText(f, v));
  }
  return out;
}

/**
 * The page's rollout workers when the hash does not say: min(4, cores). While they roll out, the
 * trainer thread only schedules and samples, so a worker on every core pays (on 2 cores a step of
 * the first-visit demo takes 0.68× the time with 2 workers that it takes with 1).
 */
export function defaultWorkerCount(hardwareConcurrency: number): number {
  return Math.max(1, Math.min(4, coresOf(hardwareConcurrency)));
}

/**
 * The page's gradient workers when the hash does not say: min(4, cores − 1), 0 on one core.
 * Rollouts and updates take turns within a step, so both pools may use the spare cores.
 */
export function defaultGradWorkerCount(hardwareConcurrency: number): number {
  return Math.max(0, Math.min(4, coresOf(hardwareConcurrency) - 1));
}

const coresOf = (hardwareConcurrency: number): number =>
  Number.isFinite(hardwareConcurrency) && hardwareConcurrency > 0 ? Math.floor(hardwareConcurrency) : 2;
