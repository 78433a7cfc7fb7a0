import { describe, expect, it } from 'vitest';
import { counterBreakdown, loadEvent, recordSteps, trainingSettings } from '../../core/io/provenance';
import { PAGE_DEFAULTS } from '../../core/runConfig';
import { policyVersionTitle, stepsTitle } from './counters';

const T0 = new Date('2026-01-01T00:00:00Z');

describe('the counters the status bar names', () => {
  it('add up: v211 after 200 GRPO steps and 11 warm-start steps is said as such, skipped steps apart', () => {
    let ev = recordSteps(
      [loadEvent('x', 'small', undefined, T0)],
      'grpo',
      Array.from({ length: 200 }, (_, i) => ({ step: i + 1, applied: true })),
      trainingSettings('grpo', PAGE_DEFAULTS),
      T0,
    );
    ev = recordSteps(
      ev,
      'sft',
      Array.from({ length: 12 }, (_, i) => ({ step: i + 1, applied: i !== 5 })),
      trainingSettings('sft', PAGE_DEFAULTS),
      T0,
    );
    const b = counterBreakdown(ev);
    expect([b.policyVersion, b.grpoSteps, b.sftSteps]).toEqual([211, 200, 12]);
    expect(policyVersionTitle(b)).toContain('v211 = v0 at load + 200 GRPO steps + 11 applied warm-start steps (1 warm-start step skipped: no update)');
    expect(stepsTitle('sft', b)).toBe('warm-start steps (the x axis of the warm-start curve) of these weights, counted from their origin');
  });

  it('say what was counted before the load', () => {
    const b = counterBreakdown([loadEvent('run.tar', 'small', { policyVersion: 7, grpoSteps: 5, sftSteps: 2 }, T0)]);
    expect(policyVersionTitle(b)).toContain('v7 = v7 at load + 0 GRPO steps + 0 applied warm-start steps');
    expect(policyVersionTitle(b, 8)).toMatch(/\nthe engine is at v8; the rows of its latest steps are on their way$/);
    expect(policyVersionTitle(b, 7)).not.toContain('engine');
    expect(stepsTitle('grpo', b)).toBe('GRPO steps (the x axis of the GRPO curves) of these weights, counted from their origin (5 already at load)');
  });
});
