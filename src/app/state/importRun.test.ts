/**
 * Importing a run whole (checkpoint + metrics.jsonl + traces.jsonl) over an engine stand-in that
 * holds a real TrainerModel (cpu backend) and the engine's RunLog: the curves, the rollout table,
 * the engine's exports and the counters the next step goes on from; a bad line refuses it all.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { StepMetrics } from '../../core/rl/grpoStep';
import { sampleTrace } from '../../core/rollout/traceFixture';
import { PAGE_DEFAULTS } from '../../core/runConfig';
import { initBackend } from '../../runtime/backend';
import type { EngineRequest, ModelReport } from '../../runtime/engine/messages';
import { RunLog } from '../../runtime/engine/runLog';
import type { TrainerModel } from '../../runtime/engine/trainerModel';
import type { RequestOf } from '../engine/engine';
import { ModelEngine, warmStartFiles } from '../engine/modelEngineFixture';
import { tarArchive } from '../files/tar';
import { setConfirm } from '../session/confirm';
import { RUN_FILES_ALONE, attachEngine, exportMetrics, exportTraces, exportWeights, importFiles, showModel, step } from './actions';
import { handleEvent } from './events';
import { INITIAL_STATE, MAX_EPISODES, getState, setState } from './store';

const downloads = vi.hoisted(() => [] as { name: string; data: unknown }[]);
vi.mock('../files/download', () => ({ download: (name: string, data: unknown) => downloads.push({ name, data }) }));

const RUN = 'runs/ablation/gating-s1';
const shipped = [...warmStartFiles()].map(([name, bytes]) => ({ name, bytes }));
const runFiles = [
  { name: 'metrics.jsonl', bytes: new Uint8Array(readFileSync(join(RUN, 'metrics.jsonl'))) },
  { name: 'state.json', bytes: new Uint8Array(readFileSync(join(RUN, 'state.json'))) },
  { name: 'traces.jsonl', bytes: new Uint8Array(readFileSync(join(RUN, 'traces.sample.jsonl'))) },
];
const config = { ...PAGE_DEFAULTS, preset: 'tiny' as const };
const trace = sampleTrace({ method: 'mono' });
const asFile = (f: { name: string; bytes: Uint8Array }) => new File([f.bytes as Uint8Array<ArrayBuffer>], f.name);
const lines = (text: string) => text.split('\n').filter((l) => l !== '');

/** With the engine's RunLog: loadFiles restores it, a step adds to it, the exports read it (what engine.ts does with them). */
class RunEngine extends ModelEngine {
  log = new RunLog();

  protected override load(r: RequestOf<'loadFiles'>): ModelReport {
    const report = super.load(r);
    this.log.clear();
    if (r.resume?.log) this.log.restore(r.resume.log.metrics, r.resume.log.traces);
    return report;
  }

  protected override async answer(r: EngineRequest, m: TrainerModel): Promise<unknown> {
    switch (r.kind) {
      case 'step': {
        m.grpoSteps++;
        m.version++;
        const metrics = { ...JSON.parse(lines(new TextDecoder().decode(runFiles[0].bytes))[0]), step: m.grpoSteps } as StepMetrics;
        const traces = [{ ...trace, policyVersion: m.version - 1 }];
        this.log.add(metrics, traces);
        handleEvent({ kind: 'episodes', step: m.grpoSteps, traces });
        handleEvent({ kind: 'metrics', rows: [metrics] });
        return { metrics };
      }
      case 'exportMetrics':
        return { text: this.log.metricsText(r.format) };
      case 'exportTraces':
        return { jsonl: this.log.tracesJsonl() };
      default:
        return super.answer(r, m);
    }
  }
}

let engine: RunEngine;

beforeAll(async () => {
  await initBackend('cpu');
  setConfirm(() => true);
});

beforeEach(() => {
  engine?.terminate();
  engine = new RunEngine(config);
  attachEngine(engine);
  setState({ ...INITIAL_STATE, config, engineState: 'idle' }, true);
  showModel(engine.model.report(), null);
  downloads.length = 0;
});

afterAll(() => engine?.terminate());

const downloaded = (name: string) => downloads.find((d) => d.name === name)?.data as string;

describe('a CLI run folder imports whole', () => {
  it('as a .tar: curves, rollouts and the note; the engine log (so the exports) holds them; the next step is step 26', async () => {
    const tar = tarArchive('gating-s1', [...shipped, ...runFiles, { name: 'optimizer.safetensors', bytes: Uint8Array.of(1) }], 0);
    await importFiles([new File([tar], 'gating-s1.tar')]);
    const s = getState();
    expect(s.importError).toBeNull();
    expect(s.metrics.map((p) => p.metrics.step)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    expect(s.metrics.every((p) => p.episodes === 32)).toBe(true);
    expect(s.episodes).toHaveLength(32);
    expect(s.episodes.map((e) => e.step).slice(0, 9)).toEqual([25, 25, 25, 25, 25, 25, 25, 25, 20]);
    expect(s.episodes.at(-1)?.step).toBe(5);
    expect(new Set(s.episodes.map((e) => e.key)).size).toBe(32);
    expect(s.importNote).toMatch(/^loaded gating-s1\.tar: gating-s1\/\S+/);
    expect(s.importNote).toContain(
      '; curves of 25 GRPO steps (steps 1–25) from gating-s1.tar: gating-s1/metrics.jsonl, episodes per step from gating-s1.tar: gating-s1/state.json',
    );
    expect(s.importNote).toContain('; 32 rollouts (steps 5–25) from gating-s1.tar: gating-s1/traces.jsonl');
    expect(s.importNote).toContain('; resumes at step 25, policy v25 (its last logged step: the weights carry no usable provenance)');
    expect(s.importNote).toMatch(/; ignored \(not part of a checkpoint\): gating-s1\.tar: gating-s1\/optimizer\.safetensors$/);
    expect(s.policyVersion).toBe(25);
    expect(s.provenance).toEqual([
      expect.objectContaining({ kind: 'load', source: 'gating-s1.tar', policyVersion: 25, grpoSteps: 25, sftSteps: 0, trainedBy: 'sft' }),
    ]);
    const load = engine.requests.at(-1);
    expect(load).toMatchObject({ kind: 'loadFiles', resume: { counters: { policyVersion: 25, grpoSteps: 25, sftSteps: 0 } } });
    expect(load?.kind === 'loadFiles' && load.resume?.log?.traces.map((t) => t.step)).toEqual(s.episodes.map((e) => e.step).reverse());

    await exportMetrics('jsonl');
    await exportTraces();
    expect(lines(downloaded('metrics.jsonl')).map((l) => (JSON.parse(l) as StepMetrics).step)).toEqual(s.metrics.map((p) => p.metrics.step));
    const exported = lines(downloaded('traces.jsonl')).map((l) => JSON.parse(l) as { step: number; problemId: string });
    expect(exported.map((t) => [t.step, t.problemId])).toEqual(
      lines(new TextDecoder().decode(runFiles[2].bytes)).map((l) => [JSON.parse(l).step, JSON.parse(l).problemId]),
    );

    await step();
    expect(
      getState()
        .metrics.map((p) => p.metrics.step)
        .slice(-2),
    ).toEqual([25, 26]);
    expect(getState().episodes[0].step).toBe(26);
    expect(engine.model.counters()).toEqual({ policyVersion: 26, grpoSteps: 26, sftSteps: 0 });
    expect(engine.log.metrics.map((m) => m.step).slice(-2)).toEqual([25, 26]);
  });

  it("the page's own exports picked together (weights .tar, Metrics and Traces JSONL) come back as they were, at the provenance's counters", async () => {
    await step();
    await step();
    await exportWeights();
    await exportMetrics('jsonl');
    await exportTraces();
    const before = getState();
    const weights = downloads.find((d) => d.name.endsWith('.tar'));
    setState({ ...INITIAL_STATE, config, engineState: 'idle' }, true);
    await importFiles([
      new File([weights?.data as Uint8Array<ArrayBuffer>], weights?.name ?? ''),
      new File([downloaded('metrics.jsonl')], 'metrics.jsonl'),
      new File([downloaded('traces.jsonl')], 'traces.jsonl'),
    ]);
    const s = getState();
    expect(s.importError).toBeNull();
    expect(engine.requests.at(-1)).toMatchObject({ kind: 'loadFiles', resume: { counters: { policyVersion: 2, grpoSteps: 2, sftSteps: 0 } } });
    expect(s.metrics.map((p) => p.metrics.step)).toEqual([1, 2]);
    expect(s.metrics.map((p) => p.metrics.meanReward)).toEqual(before.metrics.map((p) => p.metrics.meanReward));
    // Episodes per step from the export's selfcest.json (its playground config).
    expect(s.metrics.map((p) => p.episodes)).toEqual(before.metrics.map((p) => p.episodes));
    expect(s.episodes.map((e) => [e.step, e.trace])).toEqual(before.episodes.map((e) => [e.step, e.trace]));
    expect(s.importNote).not.toContain('resumes at');
  });

  it('keeps the newest rollouts in the table and gives the engine all of them', async () => {
    const many = Array.from({ length: MAX_EPISODES + 10 }, (_, i) => JSON.stringify({ step: i + 1, ...trace, problemId: `p${i + 1}` })).join('\n');
    await importFiles([...shipped.map(asFile), new File([many], 'traces.jsonl')]);
    const s = getState();
    expect(s.importError).toBeNull();
    expect(s.episodes).toHaveLength(MAX_EPISODES);
    expect([s.episodes[0].step, s.episodes.at(-1)?.step]).toEqual([MAX_EPISODES + 10, 11]);
    expect(s.metrics).toEqual([]);
    expect(s.importNote).toContain(`${MAX_EPISODES + 10} rollouts (steps 1–${MAX_EPISODES + 10}) from traces.jsonl, the newest ${MAX_EPISODES} in the table`);
    expect(engine.log.traceCount).toBe(MAX_EPISODES + 10);
    expect(engine.model.counters()).toEqual({ policyVersion: MAX_EPISODES + 10, grpoSteps: MAX_EPISODES + 10, sftSteps: 0 });
  });
});

describe('what is refused, and leaves everything as it was', () => {
  it('a malformed metrics.jsonl or traces.jsonl, naming the file and the line; nothing reaches the engine', async () => {
    await step();
    const before = getState();
    const bad = [
      runFiles[0],
      runFiles[1],
      {
        name: 'traces.jsonl',
        bytes: new TextEncoder().encode(`${lines(new TextDecoder().decode(runFiles[2].bytes))[0]}\n{"step":5,"schema":"selfcest-episode/0"}\n`),
      },
    ];
    await importFiles([new File([tarArchive('run', [...shipped, ...bad], 0)], 'run.tar')]);
    expect(getState().importError).toBe('run.tar: run/traces.jsonl: line 2: schema is "selfcest-episode/0", expected "selfcest-episode/1"');
    const metrics = { name: 'metrics.jsonl', bytes: new TextEncoder().encode('{"step":1,"meanReward":0.5}\n{"step":2,"meanReward":"high"}\n') };
    await importFiles([...shipped, metrics].map(asFile));
    expect(getState().importError).toBe('metrics.jsonl: line 2: meanReward must be a finite number (got "high")');
    const s = getState();
    expect([s.model, s.metrics, s.episodes, s.provenance, s.policyVersion]).toEqual([
      before.model,
      before.metrics,
      before.episodes,
      before.provenance,
      before.policyVersion,
    ]);
    expect(engine.requests.map((r) => r.kind)).toEqual(['step']);
  });

  it('metrics.jsonl or traces.jsonl without a checkpoint: the message says to pick it with one, or use the Runs panel', async () => {
    await importFiles([asFile(runFiles[0])]);
    expect(getState().importError).toBe(RUN_FILES_ALONE);
    expect(RUN_FILES_ALONE).toContain('Runs panel');
    await importFiles([asFile(runFiles[2]), asFile(runFiles[1])]);
    expect(getState().importError).toBe(RUN_FILES_ALONE);
    expect(engine.requests).toEqual([]);
  });
});
