import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sampleTrace } from '../../core/rollout/traceFixture';
import { checkpointFilesOf, type PickedFile } from './checkpointTar';
import { resumeCounters, runHistoryOf, stepBatches } from './runFolder';
import { tarArchive } from './tar';

const SHIPPED = 'public/checkpoints/warmstart-tiny';
/** A committed CLI run folder (the old layout): its rows, its config and a sample of its traces. */
const RUN = 'runs/ablation/gating-s1';
const file = (name: string, path: string): PickedFile => ({ name, bytes: new Uint8Array(readFileSync(path)) });
const text = (name: string, s: string): PickedFile => ({ name, bytes: new TextEncoder().encode(s) });
const shipped = readdirSync(SHIPPED).map((name) => file(name, join(SHIPPED, name)));
const runFiles = [
  file('metrics.jsonl', join(RUN, 'metrics.jsonl')),
  file('state.json', join(RUN, 'state.json')),
  file('traces.jsonl', join(RUN, 'traces.sample.jsonl')),
];
const historyOf = (picked: PickedFile[]) => runHistoryOf(checkpointFilesOf(picked));
const row = (step: number) => JSON.stringify({ step, meanReward: 0.5, violations: { clone_over_budget: 2 } });

describe('a run folder beside its checkpoint', () => {
  it('reads the curves with episodes per step from state.json, and the rollouts with their steps, from a tar of the folder', () => {
    const tar = tarArchive('gating-s1', [...shipped, ...runFiles], 0);
    const h = historyOf([{ name: 'gating-s1.tar', bytes: tar }]);
    expect(h.metrics.map((p) => p.metrics.step)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    // state.json: batch 8 × group 4 (the rows predate groupsSampled).
    expect(h.metrics.every((p) => p.episodes === 32)).toBe(true);
    expect(h.metrics[0].metrics.violations.clone_over_budget).toBe(1);
    expect(h.traces).toHaveLength(32);
    expect([...new Set(h.traces.map((t) => t.step))]).toEqual([5, 10, 20, 25]);
    expect(h.traces[0].trace).not.toHaveProperty('step');
    expect(h.traces[0].trace.policyVersion).toBe(4);
    expect([h.lastStep, h.lastStepFrom]).toEqual([25, 'gating-s1.tar: gating-s1/metrics.jsonl']);
    expect(h.loaded).toEqual([
      'curves of 25 GRPO steps (steps 1–25) from gating-s1.tar: gating-s1/metrics.jsonl, episodes per step from gating-s1.tar: gating-s1/state.json',
      '32 rollouts (steps 5–25) from gating-s1.tar: gating-s1/traces.jsonl',
    ]);
    expect(h.ignored).toEqual([]);
  });

  it('without run.json or state.json, the group size comes from selfcest.json training (CLI train or page export), else rates are unknown', () => {
    const h = historyOf([...shipped, text('metrics.jsonl', `${row(1)}\n\n${row(2)}\n`)]);
    // The tiny warm start's selfcest.json records an sft run: no group size.
    expect(h.metrics.map((p) => [p.metrics.step, p.episodes])).toEqual([
      [1, NaN],
      [2, NaN],
    ]);
    expect(h.loaded[0]).toBe('curves of 2 GRPO steps (steps 1–2) from metrics.jsonl; no run.json or state.json says its group size, so no violation rates');
    const meta = JSON.parse(new TextDecoder().decode(shipped.find((f) => f.name === 'selfcest.json')?.bytes)) as Record<string, unknown>;
    const exported = shipped.map((f) =>
      f.name === 'selfcest.json' ? text(f.name, JSON.stringify({ ...meta, training: { playground: { batch: 3, group: 5 } } })) : f,
    );
    expect(historyOf([...exported, text('metrics.jsonl', row(1))]).metrics[0].episodes).toBe(15);
  });

  it('refuses a malformed metrics.jsonl or traces.jsonl, naming the file and the line', () => {
    expect(() => historyOf([...shipped, text('metrics.jsonl', `${row(1)}\n{"step":2,"meanRew`)])).toThrow(/^metrics\.jsonl: line 2: not JSON/);
    expect(() => historyOf([...shipped, text('metrics.jsonl', `${row(1)}\n${row(1)}`)])).toThrow(
      'metrics.jsonl: line 2: step 1 does not follow step 1 (steps must increase)',
    );
    const tar = tarArchive('r', [...shipped, text('metrics.jsonl', `${row(1)}\n{"step":2,"meanReward":0.5,"accuracy":3}\n`)], 0);
    expect(() => historyOf([{ name: 'r.tar', bytes: tar }])).toThrow('r.tar: r/metrics.jsonl: line 2: accuracy must be a share in [0, 1] (got 3)');
    const line = (t: object) => JSON.stringify(t);
    const good = line({ step: 3, ...sampleTrace() });
    expect(() => historyOf([...shipped, text('traces.jsonl', `${good}\n\n${line({ step: 3, ...sampleTrace({ correct: 'yes' as never }) })}\n`)])).toThrow(
      'traces.jsonl: line 3: correct must be a boolean',
    );
    expect(() => historyOf([...shipped, text('traces.jsonl', `${good}\n${line(sampleTrace())}\n`)])).toThrow(
      'traces.jsonl: line 2: step must be a non-negative integer (got undefined)',
    );
    expect(() => historyOf([...shipped, text('traces.jsonl', 'nope')])).toThrow(/^traces\.jsonl: line 1: not valid JSON/);
    expect(() => historyOf([...shipped, text('metrics.jsonl', row(1)), text('state.json', '{"kind":"train"}')])).toThrow(
      'state.json: config must be an object',
    );
  });

  it("sets aside a warm-start run's rows, empty files and unneeded config files instead of refusing the checkpoint", () => {
    const sft = text('metrics.jsonl', '{"step":1,"loss":2.5,"lr":0.001,"gradNorm":1}\n');
    const h = historyOf([...shipped, sft, text('state.json', '{"kind":"sft","step":1,"config":{}}'), text('traces.jsonl', '\n')]);
    expect(h.metrics).toEqual([]);
    expect(h.traces).toEqual([]);
    expect(h.lastStep).toBe(0);
    expect(h.ignored).toEqual(["metrics.jsonl (warm-start rows: the page loads a GRPO run's)", 'state.json', 'traces.jsonl (no rollouts)']);
    expect(historyOf([...shipped, text('metrics.jsonl', ' \n')]).ignored).toEqual(['metrics.jsonl (no rows)']);
  });
});

describe('resume counters', () => {
  const history = (lastStep: number) => ({ metrics: [], traces: [], lastStep, lastStepFrom: 'metrics.jsonl', loaded: [], ignored: [] });
  it("a plain checkpoint loads at v0; a run without provenance resumes at its last step; provenance's counters win", () => {
    expect(resumeCounters(null, history(0))).toEqual({ counters: null, fromRun: false });
    expect(resumeCounters(null, history(25))).toEqual({ counters: { policyVersion: 25, grpoSteps: 25, sftSteps: 0 }, fromRun: true });
    const provenance = { policyVersion: 9, grpoSteps: 6, sftSteps: 3 };
    expect(resumeCounters(provenance, history(6))).toEqual({ counters: provenance, fromRun: false });
    expect(() => resumeCounters(provenance, history(7))).toThrow(
      "metrics.jsonl: reaches step 7, but the weights' provenance.json counts 6 GRPO steps; pick the files of one run",
    );
  });

  it('batches rollouts by runs of equal steps, in order', () => {
    const t = sampleTrace();
    const u = sampleTrace({ problemId: 'q' });
    expect(
      stepBatches([
        { step: 5, trace: t },
        { step: 5, trace: u },
        { step: 10, trace: t },
      ]),
    ).toEqual([
      { step: 5, traces: [t, u] },
      { step: 10, traces: [t] },
    ]);
  });
});
