import { beforeEach, describe, expect, it } from 'vitest';
import { PAGE_DEFAULTS } from '../../core/runConfig';
import type { StepMetrics } from '../../core/rl/grpoStep';
import { addMetrics } from './events';
import { clearedHistory, getState, setState } from './store';

const row = (step: number, groupsSampled: number) => ({ step, groupsSampled, groupsDropped: 0 }) as unknown as StepMetrics;

describe('metrics rows on the page', () => {
  beforeEach(() => setState({ ...clearedHistory(), provenance: [], config: { ...PAGE_DEFAULTS, batch: 16, group: 4 } }));

  it("count a step's episodes as it sampled them: more than batch × group under dynamic sampling", () => {
    addMetrics([row(1, 16), row(2, 24)]);
    expect(getState().metrics.map((p) => p.episodes)).toEqual([64, 96]);
    // A row already shown (the step's reply and its event both carry it) is not added twice.
    addMetrics([row(2, 24), row(3, 16)]);
    expect(getState().metrics.map((p) => p.metrics.step)).toEqual([1, 2, 3]);
  });
});
