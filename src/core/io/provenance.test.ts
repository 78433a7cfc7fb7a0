import { describe, expect, it } from 'vitest';
import { PAGE_DEFAULTS } from '../runConfig';
import {
  ProvenanceError,
  counterBreakdown,
  grpoHistory,
  decodeProvenance,
  encodeProvenance,
  loadEvent,
  makeProvenance,
  originCounters,
  originProvenance,
  provenanceVersion,
  recordSteps,
  trainingSettings,
  ZERO_COUNTERS,
} from './provenance';

const T0 = new Date('2026-01-01T00:00:00Z');
const T1 = new Date('2026-01-01T00:01:00Z');
const steps = (from: number, to: number, applied = true) => Array.from({ length: to - from + 1 }, (_, i) => ({ step: from + i, applied }));

describe('training settings', () => {
  it('a GRPO segment records the fields train takes, a warm start those sft takes; page-only fields never', () => {
    const g = trainingSettings('grpo', { ...PAGE_DEFAULTS, lr: 3e-5, gating: false, seed: 7 });
    expect(g).toMatchObject({
      lr: 3e-5,
      batch: PAGE_DEFAULTS.batch,
      group: PAGE_DEFAULTS.group,
      miniBatch: PAGE_DEFAULTS.miniBatch,
      gating: false,
      gateMode: 'reference',
      credit: 'ratio',
      seed: 7,
      rootMaxTokens: 48,
      budgetRate: 0,
    });
    expect(g).not.toHaveProperty('sftLr');
    const s = trainingSettings('sft', { ...PAGE_DEFAULTS, sftLr: 1e-3, sftTeacher: 'naive' });
    expect(s).toMatchObject({ sftLr: 1e-3, sftTeacher: 'naive', seed: 0, budgets: PAGE_DEFAULTS.budgets });
    expect(s).not.toHaveProperty('lr');
    for (const x of [g, s]) for (const k of ['workers', 'backend', 'checkpoint', 'evalEvery', 'preset']) expect(x).not.toHaveProperty(k);
  });
});

describe('recordSteps', () => {
  const start = [loadEvent('checkpoints/warmstart-naive/', 'small', { policyVersion: 0, grpoSteps: 0, sftSteps: 0 }, T0)];
  const grpo = trainingSettings('grpo', PAGE_DEFAULTS);
  const sft = { ...trainingSettings('sft', PAGE_DEFAULTS), scheduleSteps: 5, scheduleStart: 1 };

  it('accumulates a GRPO segment then an SFT segment, with step ranges and policy versions', () => {
    let ev = recordSteps(start, 'grpo', steps(1, 2), grpo, T0);
    ev = recordSteps(ev, 'grpo', steps(3, 3), grpo, T1); // a later metrics batch extends the segment
    // Five warm-start steps, the third skipped (non-finite): four policy versions.
    ev = recordSteps(ev, 'sft', [...steps(1, 2), { step: 3, applied: false }, ...steps(4, 5)], sft, T1);
    expect(ev).toHaveLength(3);
    expect(ev[1]).toEqual({
      kind: 'grpo',
      firstStep: 1,
      lastStep: 3,
      fromVersion: 0,
      toVersion: 3,
      settings: grpo,
      startedAt: T0.toISOString(),
      endedAt: T1.toISOString(),
    });
    expect(ev[2]).toMatchObject({ kind: 'sft', firstStep: 1, lastStep: 5, fromVersion: 3, toVersion: 7 });
    expect(provenanceVersion(ev)).toBe(7);
  });

  it('a changed setting or a gap in the steps opens a new segment', () => {
    let ev = recordSteps(start, 'grpo', steps(1, 2), grpo);
    ev = recordSteps(ev, 'grpo', steps(3, 4), { ...grpo, lr: 1e-5 });
    ev = recordSteps(ev, 'grpo', steps(7, 7), { ...grpo, lr: 1e-5 });
    expect(ev.slice(1).map((e) => e.kind !== 'load' && [e.firstStep, e.lastStep, e.fromVersion, e.toVersion])).toEqual([
      [1, 2, 0, 2],
      [3, 4, 2, 4],
      [7, 7, 4, 5],
    ]);
  });

  it('Reset goes back to the last load; its counters are the origin', () => {
    const imported = loadEvent('run.tar', 'small', { policyVersion: 12, grpoSteps: 10, sftSteps: 2 }, T1);
    const ev = recordSteps([...recordSteps(start, 'grpo', steps(1, 10), grpo), imported], 'grpo', steps(11, 12), grpo);
    expect(originProvenance(ev)).toEqual([...ev.slice(0, 3)]);
    expect(originCounters(ev)).toEqual({ policyVersion: 12, grpoSteps: 10, sftSteps: 2 });
    expect(originCounters([])).toEqual({ policyVersion: 0, grpoSteps: 0, sftSteps: 0 });
  });
});

describe('counterBreakdown', () => {
  const grpo = trainingSettings('grpo', PAGE_DEFAULTS);
  const sft = trainingSettings('sft', PAGE_DEFAULTS);

  it('says how the policy version came about: one per GRPO step, one per applied warm-start step, from the origin', () => {
    // Loaded at v200 after 200 GRPO steps; 11 warm-start steps, the 4th skipped; then 2 GRPO steps.
    const start = [loadEvent('run.tar', 'small', { policyVersion: 200, grpoSteps: 200, sftSteps: 0 }, T0)];
    let ev = recordSteps(start, 'sft', [...steps(1, 3), { step: 4, applied: false }, ...steps(5, 11)], sft, T1);
    ev = recordSteps(ev, 'grpo', steps(201, 202), grpo, T1);
    expect(counterBreakdown(ev)).toEqual({
      policyVersion: 212,
      grpoSteps: 202,
      sftSteps: 11,
      origin: { policyVersion: 200, grpoSteps: 200, sftSteps: 0 },
      grpoVersions: 2,
      sftVersions: 10,
      sftSkipped: 1,
    });
    const b = counterBreakdown(ev);
    expect(b.origin.policyVersion + b.grpoVersions + b.sftVersions).toBe(b.policyVersion);
  });

  it('counts only what followed the last load, and nothing for an empty list', () => {
    const ev = [
      ...recordSteps([loadEvent('a', 'tiny', undefined, T0)], 'grpo', steps(1, 5), grpo, T0),
      loadEvent('b', 'tiny', { policyVersion: 3, grpoSteps: 1, sftSteps: 2 }, T1),
    ];
    expect(counterBreakdown(ev)).toMatchObject({ policyVersion: 3, grpoSteps: 1, sftSteps: 2, grpoVersions: 0, sftVersions: 0, sftSkipped: 0 });
    expect(counterBreakdown([])).toMatchObject({ policyVersion: 0, grpoSteps: 0, sftSteps: 0 });
  });
});

describe('grpoHistory', () => {
  it('finds GRPO steps (taken here or imported with their counters) and GRPO-trained checkpoints, across Reset and imports', () => {
    const shipped = loadEvent('checkpoints/selfcest-arith/', 'small', undefined, T0, 'grpo');
    expect(shipped.trainedBy).toBe('grpo');
    expect(grpoHistory([shipped])).toEqual({ steps: 0, checkpoints: ['checkpoints/selfcest-arith/'] });
    const warm = loadEvent('checkpoints/warmstart-tiny/', 'tiny', undefined, T0, 'sft');
    expect(grpoHistory([warm])).toEqual({ steps: 0, checkpoints: [] });
    expect(grpoHistory(recordSteps([warm], 'grpo', steps(1, 3), trainingSettings('grpo', PAGE_DEFAULTS), T1)).steps).toBe(3);
    // An import of the page's export: its history first, then its load at the counters.
    const imported = [shipped, loadEvent('page.tar', 'small', { policyVersion: 4, grpoSteps: 0, sftSteps: 4 }, T1)];
    expect(grpoHistory(imported)).toEqual({ steps: 0, checkpoints: ['checkpoints/selfcest-arith/'] });
    expect(grpoHistory([loadEvent('run.tar', 'small', { policyVersion: 9, grpoSteps: 9, sftSteps: 0 }, T1)]).steps).toBe(9);
  });
});

describe('provenance.json', () => {
  it('round-trips and names the first bad field', () => {
    const ev = recordSteps([loadEvent('x', 'tiny', undefined, T0)], 'grpo', steps(1, 3), trainingSettings('grpo', PAGE_DEFAULTS), T1);
    const p = makeProvenance({ policyVersion: 3, grpoSteps: 3, sftSteps: 0 }, ev);
    expect(decodeProvenance(encodeProvenance(p))).toEqual(p);
    const bad = (o: object) => () => decodeProvenance(new TextEncoder().encode(JSON.stringify(o)));
    expect(bad({ ...p, format: 'x' })).toThrow(ProvenanceError);
    expect(bad({ ...p, grpoSteps: -1 })).toThrow('provenance.json: grpoSteps must be a non-negative integer (got -1)');
    expect(bad({ ...p, events: [ev[0], { ...ev[1], kind: 'ppo' }] })).toThrow('provenance.json: events[1].kind must be load, grpo or sft (got "ppo")');
    expect(bad({ ...p, events: [{ ...ev[1], toVersion: 0, fromVersion: 2 }] })).toThrow('toVersion 0 is before fromVersion 2');
    expect(() => decodeProvenance(new TextEncoder().encode('{'))).toThrow(/^provenance\.json: not valid JSON/);
    // A load's trainedBy survives the file; a wrong one is named.
    const g = makeProvenance(ZERO_COUNTERS, [loadEvent('checkpoints/selfcest-arith/', 'small', undefined, T0, 'grpo')]);
    expect(decodeProvenance(encodeProvenance(g)).events[0]).toMatchObject({ trainedBy: 'grpo' });
    expect(bad({ ...g, events: [{ ...g.events[0], trainedBy: 'ppo' }] })).toThrow(
      'provenance.json: events[0].trainedBy must be grpo or sft when given (got "ppo")',
    );
  });
});
