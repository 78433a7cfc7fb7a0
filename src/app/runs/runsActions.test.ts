/**
 * The Runs panel's flows over a real store (fake-indexeddb) and the page's state table: keep,
 * reload, import a CLI run, a refused import that changes nothing, rename, delete after a question.
 */
import 'fake-indexeddb/auto';
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadEvent } from '../../core/io/provenance';
import type { StepMetrics } from '../../core/rl/grpoStep';
import { PAGE_DEFAULTS } from '../../core/runConfig';
import { setConfirm } from '../session/confirm';
import { idbStore } from '../session/idbStore';
import { INITIAL_STATE, getState, setState } from '../state/store';
import { KeptRunStore } from './keptRunStore';
import { deleteKeptRun, importCliRun, keepCurrentRun, keptRunExport, keptRunFileName, renameKeptRun, startKeptRuns } from './runsActions';

const GATING = 'runs/ablation-naive/gating-s1';
const file = (path: string, name = path.split('/').pop() as string) => new File([readFileSync(path)], name);
const config = { ...PAGE_DEFAULTS, preset: 'tiny' as const, group: 2, batch: 2, miniBatch: 2, evalEvery: 0 };

let dbCount = 0;
let dbName = '';
let ids = 0;
const asked: string[] = [];
let answer = true;
/** A page load: a fresh state table and the store opened again, as after a reload. */
async function load(): Promise<void> {
  setState({ ...INITIAL_STATE, config, model: { preset: 'tiny', parameters: 1, policyVersion: 2, source: '/checkpoints/warmstart-tiny/' }, policyVersion: 2, provenance: [loadEvent('/checkpoints/warmstart-tiny/', 'tiny')], engineState: 'idle' }, true);
  await startKeptRuns(new KeptRunStore(idbStore(dbName, 'runs')), () => `id${ids++}`);
}
const names = () => getState().keptRuns.map((r) => r.name);

beforeEach(async () => {
  vi.stubGlobal('navigator', { hardwareConcurrency: 2 });
  dbName = `selfcest-runs-actions-${dbCount++}`;
  asked.length = 0;
  answer = true;
  setConfirm((message) => (asked.push(message), answer));
  await load();
});
afterEach(() => vi.unstubAllGlobals());

describe('keeping and comparing runs', () => {
  it('keeps the current run under a name; it is listed after a reload, with its config hash and curves', async () => {
    setState({ metrics: [1, 2].map((step) => ({ metrics: { step, meanReward: step / 4 } as StepMetrics, episodes: 4 })) });
    const run = await keepCurrentRun('tiny baseline');
    expect(run?.name).toBe('tiny baseline');
    expect(getState().runsNote).toEqual({ kind: 'info', message: 'kept "tiny baseline" (2 GRPO steps). Reset or Start fresh begins a new run; kept runs stay.' });
    // The same name again is refused; an empty one takes the suggestion.
    expect(await keepCurrentRun('tiny baseline')).toBeNull();
    expect(getState().runsNote).toEqual({ kind: 'error', message: 'run not kept: another kept run is named "tiny baseline"; choose another name' });
    await keepCurrentRun('');
    expect(names()).toEqual(['tiny baseline', 'tiny arithmetic, lr 0.00002, step 2']);
    await load();
    expect(names()).toEqual(['tiny baseline', 'tiny arithmetic, lr 0.00002, step 2']);
    const back = getState().keptRuns[0];
    expect(back.metrics.map((p) => p.metrics.meanReward)).toEqual([0.25, 0.5]);
    expect(back.origin.kind === 'page' && back.origin.hash).toBe('preset=tiny&group=2&batch=2&miniBatch=2&evalEvery=0');
    expect(back.counters).toEqual({ policyVersion: 2, grpoSteps: 2, sftSteps: 0 });
  });

  it('imports a CLI run; a malformed file is refused naming file and line, and nothing kept is lost', async () => {
    const imported = await importCliRun([file(`${GATING}/metrics.jsonl`), file(`${GATING}/run.json`)]);
    expect(imported?.name).toBe('ablation-naive/gating-s1');
    expect(getState().runsNote?.message).toBe('imported "ablation-naive/gating-s1" (150 GRPO steps, 6 held-out readings)');
    const good = readFileSync(`${GATING}/metrics.jsonl`, 'utf8').split('\n');
    const broken = new File([[good[0], good[1], good[2].slice(0, 40)].join('\n')], 'metrics.jsonl');
    expect(await importCliRun([broken, file(`${GATING}/run.json`)])).toBeNull();
    expect(getState().runsNote).toEqual({ kind: 'error', message: expect.stringMatching(/^import failed, kept runs unchanged: metrics\.jsonl: line 3: not JSON \(/) });
    expect(await importCliRun([file(`${GATING}/metrics.jsonl`), new File(['{"config": 3}'], 'run.json')])).toBeNull();
    expect(getState().runsNote?.message).toBe("import failed, kept runs unchanged: run.json: config must be an object (the run's trainer config; got 3)");
    expect(await importCliRun([file('runs/warmstart-tiny/metrics.jsonl')])).toBeNull();
    expect(getState().runsNote?.message).toMatch(/metrics\.jsonl: line 1: this is a warm-start \(sft\) row/);
    expect(names()).toEqual(['ablation-naive/gating-s1']);
    await load();
    expect(names()).toEqual(['ablation-naive/gating-s1']);
    // The same run again gets a number; without run.json the note says its config is unknown.
    await importCliRun([file(`${GATING}/metrics.jsonl`)]);
    expect(names()).toEqual(['ablation-naive/gating-s1', 'metrics (CLI run)']);
    expect(getState().runsNote?.message).toBe('imported "metrics (CLI run)" (150 GRPO steps, 6 held-out readings; no run.json, so its config is not known)');
    await importCliRun([file(`${GATING}/metrics.jsonl`), file(`${GATING}/run.json`), file(`${GATING}/train.log`)]);
    expect(names().at(-1)).toBe('ablation-naive/gating-s1 (2)');
    expect(getState().runsNote?.message).toMatch(/; ignored train\.log$/);
  });

  it('renames (not to a taken or empty name) and deletes only after the question says yes', async () => {
    const a = await importCliRun([file(`${GATING}/metrics.jsonl`), file(`${GATING}/run.json`)]);
    const b = await importCliRun([file(`runs/ablation-naive/no-gating-s1/metrics.jsonl`), file(`runs/ablation-naive/no-gating-s1/run.json`)]);
    if (!a || !b) throw new Error('imports failed');
    expect(await renameKeptRun(a.id, '  gating, seed 1 ')).toBe(true);
    expect(await renameKeptRun(b.id, 'gating, seed 1')).toBe(false);
    expect(getState().runsNote?.message).toBe('not renamed: another kept run is named "gating, seed 1"');
    expect(await renameKeptRun(b.id, ' ')).toBe(false);
    expect(getState().runsNote?.message).toBe('not renamed: a run needs a name (got an empty one)');
    answer = false;
    expect(await deleteKeptRun(a.id)).toBe(false);
    expect(asked).toEqual([expect.stringMatching(/^Delete the kept run "gating, seed 1" \(150 GRPO steps, imported from metrics\.jsonl \+ run\.json\)\?/)]);
    await load();
    expect(names()).toEqual(['gating, seed 1', 'ablation-naive/no-gating-s1']);
    answer = true;
    expect(await deleteKeptRun(a.id)).toBe(true);
    await load();
    expect(names()).toEqual(['ablation-naive/no-gating-s1']);
  });

  it('exports a kept run as its record, which the import reads back as the same run under a free name', async () => {
    setState({ metrics: [1, 2, 3].map((step) => ({ metrics: { step, meanReward: step / 8 } as StepMetrics, episodes: 4 })) });
    const run = await keepCurrentRun('lr 2e-5 / seed 1');
    const out = keptRunExport(run!.id)!;
    expect(out.name).toBe('lr_2e-5_seed_1.run.json');
    expect(keptRunFileName({ name: '///' })).toBe('run.run.json');
    const back = await importCliRun([new File([out.text], out.name)]);
    expect(back?.name).toBe('lr 2e-5 / seed 1 (2)');
    // The same run (the reader fills the rows' fields a test row leaves out with NaN).
    expect(back!.metrics.map((p) => [p.metrics.step, p.metrics.meanReward, p.episodes])).toEqual(run!.metrics.map((p) => [p.metrics.step, p.metrics.meanReward, p.episodes]));
    expect([back!.task, back!.counters, back!.origin, back!.heldOut, back!.frontier]).toEqual([run!.task, run!.counters, run!.origin, run!.heldOut, run!.frontier]);
    // A damaged record is refused by field, and nothing kept changes.
    const damaged = JSON.stringify({ ...JSON.parse(out.text), counters: { grpoSteps: -1 } });
    expect(await importCliRun([new File([damaged], out.name)])).toBeNull();
    expect(getState().runsNote?.message).toMatch(/^import failed, kept runs unchanged: kept run lr_2e-5_seed_1\.run\.json: counters/);
    expect(names()).toEqual(['lr 2e-5 / seed 1', 'lr 2e-5 / seed 1 (2)']);
    expect(keptRunExport('nope')).toBeNull();
  });

  it('says so when the browser keeps nothing', async () => {
    await startKeptRuns(null);
    expect(await keepCurrentRun('x')).toBeNull();
    expect(getState().runsNote).toEqual({ kind: 'error', message: 'run not kept: this browser offers no IndexedDB, so runs cannot be kept' });
  });
});
