/**
 * The config panel's form: each page field of the run-config table (src/core/runConfig.ts) as
 * an editable draft value, checked with the same checkField the URL hash, the CLI and the
 * engine use. Pure; the panel renders it.
 */
import {
  type Field,
  PAGE_DEFAULTS,
  RUN_RECIPES,
  type RunConfig,
  type RunConfigKey,
  checkField,
  crossFieldErrors,
  fieldOf,
  fieldsOf,
  fieldText,
  parseFieldText,
  runConfigDefaults,
  taskEntryOf,
} from '../../core/runConfig';
import { type OptionPreset, getTask, isTaskName } from '../../core/tasks';

export type ConfigProp = Field;
export type ConfigKey = RunConfigKey;

/** The page's fields, in display order. */
export const PAGE_FIELDS: readonly Field[] = fieldsOf('page');

/** The fields always in view: what a newcomer sets first (task, start, learning rate, sizes, gating). */
export const ESSENTIAL_KEYS: readonly ConfigKey[] = ['task', 'taskOptions', 'checkpoint', 'lr', 'group', 'batch', 'gating'];

/** The other page fields, folded by what they set; each page field is in the essentials or in one fold. */
export const CONFIG_FOLDS: readonly { id: string; title: string; keys: readonly ConfigKey[] }[] = [
  { id: 'model', title: 'Model and data', keys: ['preset', 'seed', 'loraR', 'loraAlpha', 'loraTargets', 'weights'] },
  {
    id: 'ppo',
    title: 'GRPO and PPO',
    keys: ['miniBatch', 'lrWarmup', 'beta', 'clip', 'dualClip', 'temperature', 'dynamicSampling', 'oversample', 'sampleRounds', 'restartOptimizer'],
  },
  { id: 'advantage', title: 'Advantage, credit and gating', keys: ['gateMode', 'gatedKl', 'credit', 'std'] },
  {
    id: 'reward',
    title: 'Reward',
    keys: ['partialCredit', 'rootTau', 'rootPmax', 'cloneTau', 'clonePmax', 'callRate', 'budgetRate', 'tokenRate', 'tokenRateAfter'],
  },
  { id: 'rollout', title: 'Rollout limits', keys: ['budgets', 'maxClones', 'maxRounds', 'rootMaxTokens', 'rootLimitMin', 'rootLimitStraddle'] },
  { id: 'eval', title: 'Held-out evaluation', keys: ['evalEvery', 'evalN'] },
  {
    id: 'sft',
    title: 'Warm start',
    keys: ['sftLr', 'sftBatchTokens', 'sftMicroTokens', 'sftWarmup', 'sftDelegateFraction', 'sftTeacher', 'sftSloppyClones', 'sftLabelSmoothing'],
  },
  { id: 'workers', title: 'Workers and backend', keys: ['workers', 'gradWorkers', 'backend'] },
];

const pageField = (k: ConfigKey): Field => {
  const f = PAGE_FIELDS.find((p) => p.key === k);
  if (!f) throw new Error(`config form: ${k} is not a page field`);
  return f;
};

/** The essentials and each fold, as fields in the order above. */
export const ESSENTIAL_FIELDS: readonly Field[] = ESSENTIAL_KEYS.map(pageField);
export const FOLD_FIELDS: readonly { id: string; title: string; fields: readonly Field[] }[] = CONFIG_FOLDS.map((f) => ({
  id: f.id,
  title: f.title,
  fields: f.keys.map(pageField),
}));

/** What the form holds per field: text for numbers (so "1e-4" can be typed), else the value. */
export type Draft = Partial<Record<ConfigKey, string | boolean | number[]>>;

const isText = (f: Field) => f.type === 'number' || f.type === 'seed' || f.type === 'optionalNumber' || f.type === 'json';

export function draftOf(config: RunConfig): Draft {
  const draft: Draft = {};
  for (const p of PAGE_FIELDS) {
    const v = config[p.key];
    draft[p.key] = isText(p) ? fieldText(p, v) : (v as string | boolean | number[]);
  }
  return draft;
}

export function parseDraftValue(prop: ConfigProp, value: string | boolean | number[] | undefined): unknown {
  if (isText(prop)) return typeof value === 'string' ? parseFieldText(prop, value) : NaN;
  return value;
}

/** Field → error message (field name and allowed range) for every invalid field. */
export function draftErrors(draft: Draft): Partial<Record<ConfigKey, string>> {
  const errors: Partial<Record<ConfigKey, string>> = {};
  const values: Record<string, unknown> = {};
  for (const p of PAGE_FIELDS) {
    values[p.key] = parseDraftValue(p, draft[p.key]);
    const err = checkField(p, values[p.key]);
    if (err) errors[p.key] = err;
  }
  if (Object.keys(errors).length === 0) {
    for (const e of crossFieldErrors({ ...PAGE_DEFAULTS, ...values } as RunConfig, 'page')) errors[e.key] = e.message;
  }
  return errors;
}

/** The config a valid draft stands for, or null while any field is invalid. */
export function configOfDraft(draft: Draft, base: RunConfig): RunConfig | null {
  if (Object.keys(draftErrors(draft)).length > 0) return null;
  const config: Record<ConfigKey, unknown> = { ...base };
  for (const p of PAGE_FIELDS) config[p.key] = parseDraftValue(p, draft[p.key]);
  return config as RunConfig;
}

/** Keys whose draft differs from the applied config. */
export function changedKeys(draft: Draft, config: RunConfig): ConfigKey[] {
  return PAGE_FIELDS.filter((p) => JSON.stringify(parseDraftValue(p, draft[p.key])) !== JSON.stringify(config[p.key])).map((p) => p.key);
}

const taskOf = (draft: Draft): string => (typeof draft.task === 'string' ? draft.task : PAGE_DEFAULTS.task);

/** The named settings of a task's options (the form's menu beside the JSON); none for a text that is no task. */
export function optionPresetsOf(task: string): readonly OptionPreset<unknown>[] {
  return isTaskName(task) ? getTask(task).presets : [];
}

/**
 * Which named setting the draft's task options are, compared by the options they resolve to (so
 * `{}` and the defaults written out are both "default"); null for other or invalid options.
 */
export function presetOfDraft(draft: Draft): string | null {
  const task = taskOf(draft);
  const given = parseDraftValue(fieldOf('taskOptions'), draft.taskOptions);
  let opts: unknown;
  try {
    opts = taskEntryOf(task, given).opts;
  } catch {
    return null;
  }
  const same = optionPresetsOf(task).find((p) => JSON.stringify(taskEntryOf(task, p.options).opts) === JSON.stringify(opts));
  return same?.name ?? null;
}

/** The draft with the task options of the named setting of its task (unchanged for an unknown name). */
export function withPreset(draft: Draft, name: string): Draft {
  const preset = optionPresetsOf(taskOf(draft)).find((p) => p.name === name);
  return preset ? { ...draft, taskOptions: fieldText(fieldOf('taskOptions'), preset.options) } : draft;
}

/**
 * The draft after the task field changed to `task`: fields still at the old task's default
 * (multihop's clone limits) take the new task's, task options that were a named setting of the
 * old task take the new task's defaults; what the user typed stays (and is checked against the new task).
 */
export function retaskDraft(draft: Draft, task: string): Draft {
  const oldTask = taskOf(draft);
  const before = runConfigDefaults('page', oldTask);
  const after = runConfigDefaults('page', task);
  const next: Draft = { ...draft, task };
  if (presetOfDraft(draft) !== null) next.taskOptions = fieldText(fieldOf('taskOptions'), after.taskOptions);
  for (const p of PAGE_FIELDS) {
    if (!p.taskDefault) continue;
    if (JSON.stringify(parseDraftValue(p, draft[p.key])) === JSON.stringify(before[p.key]))
      next[p.key] = isText(p) ? fieldText(p, after[p.key]) : (after[p.key] as string | boolean | number[]);
  }
  return next;
}

/** The draft with a recipe's fields (RUN_RECIPES) filled in; the others as they were. Throws for an unknown name. */
export function withRecipe(draft: Draft, name: string): Draft {
  const recipe = RUN_RECIPES.find((r) => r.name === name);
  if (recipe === undefined) throw new Error(`unknown recipe ${JSON.stringify(name)} (known: ${RUN_RECIPES.map((r) => r.name).join(', ')})`);
  const next: Draft = { ...draft };
  for (const [key, value] of Object.entries(recipe.fields) as [ConfigKey, unknown][]) {
    const p = fieldOf(key);
    next[key] = isText(p) ? fieldText(p, value) : (value as string | boolean | number[]);
  }
  return next;
}

/** The recipes whose every field the draft already has (what the recipe menu shows as chosen). */
export function recipesOfDraft(draft: Draft): string[] {
  return RUN_RECIPES.filter((r) =>
    (Object.entries(r.fields) as [ConfigKey, unknown][]).every(([k, v]) => JSON.stringify(parseDraftValue(fieldOf(k), draft[k])) === JSON.stringify(v)),
  ).map((r) => r.name);
}
