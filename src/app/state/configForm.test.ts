import { describe, expect, it } from 'vitest';
import { PAGE_DEFAULTS, TASK_NAMES } from '../../core/runConfig';
import { TASKS } from '../../core/tasks';
import { PAGE_FIELDS, changedKeys, configOfDraft, draftErrors, draftOf, retaskDraft } from './configForm';

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
});
