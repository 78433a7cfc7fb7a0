/**
 * The page's session flows over an engine stand-in that holds a real TrainerModel (cpu backend)
 * and answers the requests these flows send: the question before discarding work, provenance
 * from steps to export to import, and a save in IndexedDB (fake-indexeddb) restored after a reload.
 */
import 'fake-indexeddb/auto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { decodeCheckpoint } from '../../core/io/checkpoint';
import { PROVENANCE_FILE, decodeProvenance, trainingSettings } from '../../core/io/provenance';
import type { SftMetricsRow } from '../../core/sft/sft';
import type { StepMetrics } from '../../core/rl/grpoStep';
import { sampleTrace } from '../../core/rollout/traceFixture';
import { PAGE_DEFAULTS } from '../../core/runConfig';
import { initBackend } from '../../runtime/backend';
import type { EngineRequest } from '../../runtime/engine/messages';
import type { TrainerModel } from '../../runtime/engine/trainerModel';
import { ModelEngine, WARM_START_DIR, WARM_START_SOURCE, warmStartFiles, warmStartModel } from '../engine/modelEngineFixture';
import { untar } from '../files/tar';
import { attachEngine, exportWeights, importFiles, reset, showModel, step, warmStart } from '../state/actions';
import { handleEvent } from '../state/events';
import { INITIAL_STATE, getState, setState } from '../state/store';
import { SessionArchive } from './archive';
import { type Autosave, startAutosave } from './autosave';
import { setConfirm } from './confirm';
import { idbStore } from './idbStore';
import { restoreSession } from './sessionActions';
import { pageRunOf } from '../runs/keptRun';

const downloads = vi.hoisted(() => [] as { name: string; data: unknown }[]);
vi.mock('../files/download', () => ({ download: (name: string, data: unknown) => downloads.push({ name, data }) }));

const config = { ...PAGE_DEFAULTS, preset: 'tiny' as const, lr: 3e-5, gating: false, seed: 4, sftLr: 1e-3, sftTeacher: 'naive' as const };

const trace = sampleTrace({ policyVersion: 0, problemId: 'train-0-0', method: 'mono' });
const metricsRow = (s: number) => ({ step: s, meanReward: 0.4 + s / 100 }) as StepMetrics;
const sftRow = (s: number, skipped = false): SftMetricsRow => ({
  step: s,
  loss: 1 / s,
  lr: 1e-3,
  gradNorm: 1,
  skipped,
  tokens: 100,
  trainedTokens: 80,
  elapsedSec: s,
});

/** The shared stand-in plus the requests these flows send: a Step or a warm start moves its counters and sends the events the real one sends; reset and pause. */
class FlowEngine extends ModelEngine {
  protected override async answer(r: EngineRequest, m: TrainerModel): Promise<unknown> {
    switch (r.kind) {
      case 'step': {
        m.grpoSteps++;
        m.version++;
        const metrics = metricsRow(m.grpoSteps);
        handleEvent({ kind: 'policyVersion', policyVersion: m.version });
        handleEvent({ kind: 'episodes', step: m.grpoSteps, traces: [{ ...trace, policyVersion: m.version - 1 }] });
        handleEvent({ kind: 'metrics', rows: [metrics] });
        return { metrics };
      }
      case 'sft': {
        for (let i = 0; i < r.steps; i++) {
          m.sftSteps++;
          const skipped = i === 1; // one non-finite step: no new policy version
          if (!skipped) m.version++;
          handleEvent({ kind: 'sftMetrics', rows: [sftRow(m.sftSteps, skipped)] });
        }
        handleEvent({ kind: 'status', state: 'paused', policyVersion: m.version });
        return { steps: r.steps, loss: 0.5 };
      }
      case 'reset':
        this.model = await m.fresh();
        m.dispose();
        return this.model.report();
      case 'pause':
        return { policyVersion: m.version };
      default:
        return super.answer(r, m);
    }
  }
}

let engine: FlowEngine;
const asked: string[] = [];
let answer = true;

beforeAll(async () => {
  await initBackend('cpu');
  setConfirm((message) => (asked.push(message), answer));
});

beforeEach(() => {
  engine?.terminate();
  engine = new FlowEngine(config);
  attachEngine(engine);
  setState({ ...INITIAL_STATE, config, engineState: 'idle' }, true);
  showModel(engine.model.report(), null);
  asked.length = 0;
  answer = true;
  downloads.length = 0;
});

afterAll(() => engine?.terminate());

const kinds = () => engine.requests.map((r) => r.kind);

describe('discarding work asks first', () => {
  it('Reset without history does not ask; with history it asks, naming what goes, and a No keeps everything', async () => {
    await reset();
    expect(asked).toEqual([]);
    expect(kinds()).toEqual(['reset']);

    await step();
    await step();
    answer = false;
    await reset();
    expect(asked).toEqual([expect.stringMatching(/^Reset discards the weights at policy v2 and 2 GRPO steps of curves, 2 rollouts\./)]);
    expect(kinds()).toEqual(['reset', 'step', 'step']);
    expect(getState()).toMatchObject({ policyVersion: 2, metrics: [{}, {}] });

    answer = true;
    await reset();
    expect(kinds().at(-1)).toBe('reset');
    expect(getState()).toMatchObject({ policyVersion: 0, metrics: [] });
  });

  it('with the curves kept in the Runs panel, it names only the weights and rollouts as lost; a step later, the curves again', async () => {
    await step();
    setState({ keptRuns: [pageRunOf(getState(), { id: 'k1', name: 'before reset', keptAt: new Date().toISOString(), hash: '' })] });
    answer = false;
    await reset();
    expect(asked.at(-1)).toMatch(
      /^Reset discards the weights at policy v1 and 1 rollout \(the curves and frontier points are kept as run "before reset" in the Runs panel\)\./,
    );
    await step();
    await reset();
    expect(asked.at(-1)).toMatch(/^Reset discards the weights at policy v2 and 2 GRPO steps of curves, 2 rollouts\./);
  });

  it('an import over history asks too', async () => {
    await step();
    answer = false;
    await importFiles([new File([readFileSync(join(WARM_START_DIR, 'model.safetensors'))], 'model.safetensors')]);
    expect(asked).toEqual([expect.stringMatching(/^Importing model\.safetensors discards the weights at policy v1/)]);
    expect(kinds()).toEqual(['step']);
  });
});

describe('provenance', () => {
  it('accumulates a GRPO and a warm-start segment, goes into the export and comes back with the import (policy version, not v0)', async () => {
    await step();
    await step();
    await warmStart(3);
    await step();
    const { provenance } = getState();
    expect(provenance.map((e) => e.kind)).toEqual(['load', 'grpo', 'sft', 'grpo']);
    expect(provenance[0]).toMatchObject({ kind: 'load', source: WARM_START_SOURCE, policyVersion: 0 });
    expect(provenance[1]).toMatchObject({ firstStep: 1, lastStep: 2, fromVersion: 0, toVersion: 2, settings: trainingSettings('grpo', config) });
    expect(provenance[1].kind === 'grpo' && provenance[1].settings).toMatchObject({
      lr: 3e-5,
      gating: false,
      seed: 4,
      batch: config.batch,
      group: config.group,
    });
    // Three warm-start steps, one skipped: two policy versions.
    expect(provenance[2]).toMatchObject({
      firstStep: 1,
      lastStep: 3,
      fromVersion: 2,
      toVersion: 4,
      settings: { sftLr: 1e-3, sftTeacher: 'naive', scheduleSteps: 3, scheduleStart: 1 },
    });
    expect(provenance[3]).toMatchObject({ firstStep: 3, lastStep: 3, fromVersion: 4, toVersion: 5 });
    expect(getState().policyVersion).toBe(5);

    await exportWeights();
    expect(downloads.map((d) => d.name)).toEqual(['selfcest-tiny-v5.tar']);
    const members = new Map(untar(downloads[0].data as Uint8Array<ArrayBuffer>).map((m) => [m.name.split('/').pop() as string, m.bytes]));
    const written = decodeProvenance(members.get(PROVENANCE_FILE) as Uint8Array);
    expect(written).toMatchObject({ policyVersion: 5, grpoSteps: 3, sftSteps: 3, events: provenance });
    // The checkpoint reader (the CLI's) still takes the files; selfcest.json carries the same history.
    const ckpt = decodeCheckpoint(members);
    expect(ckpt.selfcest.step).toBe(5);
    expect((ckpt.selfcest.training as { provenance: { events: unknown } }).provenance.events).toEqual(provenance);

    // A new page (fresh store, the shipped warm start) imports the export.
    setState({ ...INITIAL_STATE, config, engineState: 'idle' }, true);
    engine.model.dispose();
    engine.model = warmStartModel();
    showModel(engine.model.report(), null);
    await importFiles([new File([downloads[0].data as Uint8Array<ArrayBuffer>], 'selfcest-tiny-v5.tar')]);
    const s = getState();
    expect(s.importError).toBeNull();
    expect(s.importNote).toMatch(/selfcest-tiny-v5\/provenance\.json/);
    expect(s.importNote).not.toMatch(/ignored/);
    expect(engine.requests.at(-1)).toMatchObject({ kind: 'loadFiles', resume: { counters: { policyVersion: 5, grpoSteps: 3, sftSteps: 3 } } });
    expect(s.policyVersion).toBe(5);
    expect(s.provenance).toEqual([
      ...provenance,
      expect.objectContaining({ kind: 'load', source: 'selfcest-tiny-v5.tar', policyVersion: 5, grpoSteps: 3, sftSteps: 3 }),
    ]);

    // Training goes on from there: step 4, v6; Reset returns to the import, not to v0.
    await step();
    expect(getState().provenance.at(-1)).toMatchObject({ kind: 'grpo', firstStep: 4, lastStep: 4, fromVersion: 5, toVersion: 6 });
    await reset();
    expect(getState().policyVersion).toBe(5);
    expect(getState().provenance).toEqual(s.provenance);
  });

  it('provenance of other weights is not used, and the note says why', async () => {
    await step();
    await exportWeights();
    const members = untar(downloads[0].data as Uint8Array<ArrayBuffer>);
    const files = members.map((m) => {
      const name = m.name.split('/').pop() as string;
      if (name !== 'selfcest.json') return new File([m.bytes], name);
      const meta = JSON.parse(new TextDecoder().decode(m.bytes)) as Record<string, unknown>;
      return new File([JSON.stringify({ ...meta, step: 9 })], name);
    });
    setState({ metrics: [], episodes: [], frontier: [] });
    await importFiles(files);
    expect(getState().importNote).toMatch(/provenance not used: it is of policy v1 but selfcest\.json says step 9; the model starts at v0$/);
    expect(getState().policyVersion).toBe(0);
    expect(engine.requests.at(-1)).not.toHaveProperty('resume');
  });
});

describe('the saved session', () => {
  let db = 0;
  const archiveOf = (name: string) => new SessionArchive(idbStore(name, 'session'));
  let autosave: Autosave | null = null;
  beforeEach(() => {
    autosave?.stop();
    autosave = null;
  });

  it('is saved after steps and restored after a reload: weights at their version, curves, rollouts, provenance, the origin for Reset', async () => {
    const name = `flows-${db++}`;
    autosave = startAutosave(engine, archiveOf(name), 60_000);
    await step();
    await warmStart(2);
    await step();
    setState((s) => ({
      frontier: [...s.frontier, { method: 'delegate', limit: 48, n: 32, accuracy: 0.5, meanTokens: 30, meanCriticalPathTokens: 20, interval: [0.3, 0.7] }],
    }));
    expect(autosave.unsaved()).toBe(true);
    await autosave.flush();
    expect(autosave.unsaved()).toBe(false);
    expect(getState().saved).toMatchObject({ step: 2, policyVersion: 3 });
    const before = getState();
    const weights = await engine.model.weights();
    autosave.stop();

    // Reload: a fresh store and a fresh engine with the shipped warm start.
    setState({ ...INITIAL_STATE, config: PAGE_DEFAULTS, engineState: 'idle' }, true);
    engine.terminate();
    engine = new FlowEngine(config);
    attachEngine(engine);
    const loaded = await archiveOf(name).load();
    expect(loaded.kind).toBe('ok');
    if (loaded.kind !== 'ok') return;
    expect(loaded.session.config).toEqual(config);
    expect(await restoreSession(loaded.session)).toBeNull();
    const s = getState();
    expect(s.session).toEqual({ kind: 'restored', savedAt: loaded.session.savedAt, step: 2, policyVersion: 3 });
    expect(s.policyVersion).toBe(3);
    expect(s.metrics).toEqual(before.metrics);
    expect(s.sftMetrics).toEqual(before.sftMetrics);
    expect(s.frontier).toEqual(before.frontier);
    expect(s.provenance).toEqual(before.provenance);
    expect(s.episodes.map((e) => [e.step, e.trace])).toEqual(before.episodes.map((e) => [e.step, e.trace]));
    expect(s.model?.source).toBe(WARM_START_SOURCE);
    // The engine has the saved weights (not the warm start) at the saved counters.
    expect(engine.model.counters()).toEqual({ policyVersion: 3, grpoSteps: 2, sftSteps: 2 });
    const restored = await engine.model.weights();
    for (const [k, v] of weights) expect(restored.get(k), k).toEqual(v);

    // The next step continues the curve and the provenance; Reset goes back to the warm start.
    await step();
    expect(getState().metrics.map((m) => m.metrics.step)).toEqual([1, 2, 3]);
    expect(getState().provenance.at(-1)).toMatchObject({ kind: 'grpo', firstStep: 2, lastStep: 3, toVersion: 4 });
    await reset();
    expect(getState().policyVersion).toBe(0);
    expect(getState().provenance).toEqual([before.provenance[0]]);
    const warm = decodeCheckpoint(warmStartFiles()).tensors;
    const back = await engine.model.weights();
    for (const [k, v] of warm) expect(back.get(k), k).toEqual(v);
  });

  it('the untouched start checkpoint is not saved (a reload gives it anyway)', async () => {
    const name = `flows-${db++}`;
    const archive = archiveOf(name);
    autosave = startAutosave(engine, archive, 60_000);
    setState({ config: { ...config, lr: 1e-5 } });
    await autosave.flush();
    expect(await archive.load()).toEqual({ kind: 'none' });
    expect(kinds()).toEqual([]);
  });
});
