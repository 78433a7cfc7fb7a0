import { describe, expect, it } from 'vitest';
import { PAGE_DEFAULTS, RUN_RECIPES, TASK_NAMES } from '../../core/runConfig';
import { TASKS } from '../../core/tasks';
import {
  PAGE_FIELDS,
  changedKeys,
  configOfDraft,
  draftErrors,
  draftOf,
  optionPresetsOf,
  presetOfDraft,
  recipesOfDraft,
  retaskDraft,
  withPreset,
  withRecipe,
} from './configForm';
import { configFromHash, configToHash } from '../../core/runConfig';

describe('config form', () => {
  it('offers every task of the registry in the task list', () => {
    // The panel draws a 'task' field as a select over TASK_NAMES.
    expect(PAGE_FIELDS.find((f) => f.key === 'task')?.type).toBe('task');
    expect([...TASK_NAMES].sort()).toEqual(Object.keys(TASKS).sort());
    expect(TASK_NAMES).toEqual(expect.arrayContaining(['arithmetic', 'multihop']));
  });

  it('holds numbers as text and gives back the same config', () => {
    const draft = draftOf(PAGE_DEFAULTS);
    expect(draft.lr).toBe('0.00002');
    expect(draftErrors(draft)).toEqual({});
    expect(configOfDraft(draft, PAGE_DEFAULTS)).toEqual(PAGE_DEFAULTS);
    expect(changedKeys(draft, PAGE_DEFAULTS)).toEqual([]);
  });

  it('reports each bad field with its range and yields no config', () => {
    const draft = { ...draftOf(PAGE_DEFAULTS), group: '1', lr: '', budgets: [] as number[], credit: 'sum' };
    const errors = draftErrors(draft);
    expect(errors.group).toBe('group must be an integer in [2, 64] (got 1)');
    expect(errors.lr).toMatch(/^lr must be a number in \[1e-7, 0.1\]/);
    expect(errors.budgets).toMatch(/^budgets must be a non-empty subset of 8, 16, 32, 64, 128/);
    expect(errors.credit).toBe('credit must be one of ratio, broadcast (got "sum")');
    expect(Object.keys(errors).sort()).toEqual(['budgets', 'credit', 'group', 'lr']);
    expect(configOfDraft(draft, PAGE_DEFAULTS)).toBeNull();
  });

  it('compares values, not spellings', () => {
    const draft = { ...draftOf(PAGE_DEFAULTS), lr: '2e-5', batch: '32', gating: false };
    expect(changedKeys(draft, PAGE_DEFAULTS)).toEqual(['batch', 'gating']);
    expect(configOfDraft(draft, PAGE_DEFAULTS)).toEqual({ ...PAGE_DEFAULTS, batch: 32, gating: false });
  });

  it('moves fields still at the old task default to the new task, keeping typed values', () => {
    const draft = retaskDraft(draftOf(PAGE_DEFAULTS), 'multihop');
    expect(draft).toMatchObject({ task: 'multihop', maxClones: '16', maxRounds: '4' });
    const typed = retaskDraft({ ...draftOf(PAGE_DEFAULTS), maxClones: '6' }, 'multihop');
    expect(typed).toMatchObject({ maxClones: '6', maxRounds: '4' });
    expect(retaskDraft(draft, 'arithmetic')).toMatchObject({ maxClones: '4', maxRounds: '3' });
  });

  it('holds the task options as JSON text, checked by the task, inline like any field', () => {
    expect(PAGE_FIELDS.find((f) => f.key === 'taskOptions')?.type).toBe('json');
    const mh = retaskDraft(draftOf(PAGE_DEFAULTS), 'multihop');
    expect(mh.taskOptions).toBe('{}');
    expect(draftErrors({ ...mh, taskOptions: '{"perChunk":9}' })).toEqual({
      taskOptions: 'taskOptions: multihop: perChunk must be an integer in [1, 6] (got 9)',
    });
    expect(draftErrors({ ...mh, taskOptions: '{"perchunk":6}' }).taskOptions).toBe(
      'taskOptions: multihop has no option perchunk (it has chunks, perChunk, hops, names, filler)',
    );
    expect(draftErrors({ ...mh, taskOptions: '{"chunks":' }).taskOptions).toBe('taskOptions must be a JSON object (got "{\\"chunks\\":")');
    expect(configOfDraft({ ...mh, taskOptions: '{"perChunk":9}' }, PAGE_DEFAULTS)).toBeNull();
  });

  it('offers the task’s named settings; the long context of multihop picked, applied and linked', () => {
    expect(optionPresetsOf('multihop').map((p) => [p.name, p.label])).toEqual([
      ['default', 'default (6 chunks × 3)'],
      ['long-context', 'long context (6 × 4 among filler, does not fit one window)'],
      ['filler', '6 × 3 among filler (fits one window)'],
      ['demo', '4 × 5 among filler (the first-visit demo)'],
      ['ood', 'out of distribution (8 chunks, 3 hops)'],
    ]);
    expect(optionPresetsOf('arithmetic').map((p) => p.name)).toEqual(['default']);
    const mh = retaskDraft(draftOf(PAGE_DEFAULTS), 'multihop');
    expect(presetOfDraft(mh)).toBe('default');
    // The defaults written out are the default setting too; other values are none of them.
    expect(presetOfDraft({ ...mh, taskOptions: '{"chunks":6,"perChunk":3,"hops":2}' })).toBe('default');
    expect(presetOfDraft({ ...mh, taskOptions: '{"hops":3}' })).toBeNull();
    expect(presetOfDraft({ ...mh, taskOptions: 'nope' })).toBeNull();
    const long = withPreset(mh, 'long-context');
    expect(long.taskOptions).toBe('{"chunks":6,"perChunk":4,"filler":24}');
    expect(presetOfDraft(long)).toBe('long-context');
    expect(changedKeys(long, PAGE_DEFAULTS)).toEqual(['task', 'taskOptions', 'maxClones', 'maxRounds', 'rootMaxTokens']);
    const applied = configOfDraft(long, PAGE_DEFAULTS)!;
    expect(applied).toMatchObject({ task: 'multihop', taskOptions: { chunks: 6, perChunk: 4, filler: 24 }, maxClones: 16, maxRounds: 4 });
    // The link gives back the same config, and the form the same setting.
    const hash = configToHash(applied);
    expect(hash).toBe('task=multihop&taskOptions=%7B%22chunks%22%3A6%2C%22perChunk%22%3A4%2C%22filler%22%3A24%7D');
    const back = configFromHash(`#${hash}`);
    expect(back).toEqual({ config: applied, errors: [], notes: [] });
    expect(presetOfDraft(draftOf(back.config))).toBe('long-context');
  });

  it('switching the task back drops a named setting of the old task, keeps options typed by hand', () => {
    const long = withPreset(retaskDraft(draftOf(PAGE_DEFAULTS), 'multihop'), 'long-context');
    expect(retaskDraft(long, 'arithmetic')).toMatchObject({ task: 'arithmetic', taskOptions: '{}', maxClones: '4' });
    const typed = { ...retaskDraft(draftOf(PAGE_DEFAULTS), 'multihop'), taskOptions: '{"hops":3}' };
    const back = retaskDraft(typed, 'arithmetic');
    expect(back.taskOptions).toBe('{"hops":3}');
    expect(draftErrors(back).taskOptions).toMatch(/^taskOptions: arithmetic has no option hops/);
  });
});

describe('recipes', () => {
  it('set only page fields, validate, and are recognised in the draft they make', () => {
    const pageKeys = new Set(PAGE_FIELDS.map((p) => p.key));
    for (const r of RUN_RECIPES) {
      for (const k of Object.keys(r.fields)) expect(pageKeys.has(k as never), `${r.name}.${k}`).toBe(true);
      const draft = withRecipe(draftOf(PAGE_DEFAULTS), r.name);
      expect(draftErrors(draft)).toEqual({});
      expect(recipesOfDraft(draft)).toContain(r.name);
    }
    expect(recipesOfDraft(draftOf(PAGE_DEFAULTS))).toEqual(['recipe']);
  });

  it('the reference recipe is the paper’s settings, on a page whose fixed values already are', () => {
    const config = configOfDraft(withRecipe(draftOf(PAGE_DEFAULTS), 'reference'), PAGE_DEFAULTS)!;
    expect(config).toMatchObject({
      group: 4,
      batch: 32,
      miniBatch: 8,
      clip: 0.1,
      dualClip: 3,
      beta: 5e-4,
      gating: true,
      gateMode: 'reference',
      credit: 'ratio',
      std: true,
    });
    // Not page fields: the page runs them at the reference's values.
    expect(config).toMatchObject({ epochs: 1, aggregation: 'token-mean', gradClip: 1, clipHigh: null });
    // Its lr is the page's (6e-7 is the 4B model's).
    expect(config.lr).toBe(PAGE_DEFAULTS.lr);
  });

  it('the ablation arm and Dr. GRPO change one field each; an unknown name is refused', () => {
    const base = draftOf(PAGE_DEFAULTS);
    expect(changedKeys(withRecipe(base, 'no-gating'), PAGE_DEFAULTS)).toEqual(['gating']);
    expect(changedKeys(withRecipe(base, 'dr-grpo'), PAGE_DEFAULTS)).toEqual(['std']);
    expect(() => withRecipe(base, 'best')).toThrow(/unknown recipe "best" \(known: recipe, reference, no-gating, dr-grpo\)/);
  });
});
