/**
 * The engine through its message protocol, as the page uses it: an EngineClient on one end of
 * a MessageChannel, the engine (and real rollout and gradient worker threads) on the other.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MessageChannel } from 'node:worker_threads';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parameterCount, presetConfig } from '../../core/model/config';
import { PAGE_DEFAULTS, type RunConfig } from '../../core/runConfig';
import type { Endpoint } from '../transport/endpoint';
import type { Engine } from './engine';
import type { EngineHost } from './engineHost';
import { EngineClient } from './engineClient';
import { GRAD_WORKER_ENTRY } from '../node/gradWorkers';
import { nodeEndpoint } from '../node/nodeEndpoint';
import { startNodeWorker } from '../node/startWorker';
import { nodeHost } from '../node/nodeHost';
import type { EngineEvent } from './messages';
import type { StepMetrics } from '../../core/rl/grpoStep';
import type { EpisodeTrace } from '../../core/rollout/trace';
import { serveEngine } from './serveEngine';

const config: RunConfig = {
  ...PAGE_DEFAULTS,
  preset: 'tiny',
  group: 2,
  batch: 2,
  miniBatch: 2,
  workers: 2,
  gradWorkers: 1,
  backend: 'wasm',
  seed: 3,
  evalEvery: 0,
};
const TEXT = '<root>12+3*4<sep>=12+12';

let client: EngineClient;
let engine: Engine;
let events: EngineEvent[] = [];
let dir: string;
let close: () => void;

/** When set: the worker loses its device just before its n-th next feed (mid-rollout). */
let loseBeforeFeed: { worker: number; feeds: number } | null = null;

/** When set: the next gradient worker asked for a gradient (SFT or GRPO) ends instead, as a crash would (mid-update). */
let crashOnGrads = false;

/** The Node host, with a hand on rollout worker messages to stage a device loss mid-step. */
const host: EngineHost = {
  ...nodeHost,
  startGradWorker(index) {
    const handle = startNodeWorker(GRAD_WORKER_ENTRY, `grad-${index}`);
    const post = handle.endpoint.postMessage.bind(handle.endpoint);
    const endpoint: Endpoint = {
      onMessage: (l) => handle.endpoint.onMessage(l),
      postMessage(message, transfer) {
        const kind = (message as { request?: { kind?: string } }).request?.kind;
        if (crashOnGrads && (kind === 'grads' || kind === 'policyGrads')) {
          crashOnGrads = false;
          void handle.thread.terminate(); // not handle.terminate(): the pool sees an exit it did not ask for
          return;
        }
        post(message, transfer);
      },
    };
    return { ...handle, endpoint };
  },
  startRolloutWorker(index) {
    const handle = nodeHost.startRolloutWorker(index);
    const post = handle.endpoint.postMessage.bind(handle.endpoint);
    const endpoint: Endpoint = {
      onMessage: (l) => handle.endpoint.onMessage(l),
      postMessage(message, transfer) {
        const kind = (message as { request?: { kind?: string } }).request?.kind;
        if (kind === 'feed' && loseBeforeFeed?.worker === index && --loseBeforeFeed.feeds === 0) {
          loseBeforeFeed = null;
          post({ type: 'request', id: -1, request: { kind: 'loseDevice' } }); // its reply matches no request
        }
        post(message, transfer);
      },
    };
    return { ...handle, endpoint };
  },
};

beforeAll(async () => {
  const channel = new MessageChannel();
  ({ engine } = serveEngine(nodeEndpoint(channel.port2), host));
  client = new EngineClient({ endpoint: nodeEndpoint(channel.port1), onExit: () => () => {}, terminate: () => channel.port1.close() });
  client.on((e) => events.push(e));
  close = () => {
    channel.port1.close();
    channel.port2.close();
  };
  dir = await mkdtemp(join(tmpdir(), 'selfcest-engine-'));
});

afterAll(async () => {
  await engine?.dispose();
  close?.();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const logitsOf = async () => (await client.request({ kind: 'logits', text: TEXT })).logits;
const ofKind = <K extends EngineEvent['kind']>(kind: K) => events.filter((e): e is Extract<EngineEvent, { kind: K }> => e.kind === kind);

describe('engine', () => {
  it('refuses work before init, then starts the backend and the pool', async () => {
    await expect(client.request({ kind: 'step' })).rejects.toThrow(/not initialised/);
    await expect(client.request({ kind: 'init', config: { ...config, batch: 0 } })).rejects.toThrow(/batch must be an integer in \[1, 1024\] \(got 0\)/);
    const init = await client.request({ kind: 'init', config });
    expect(init.workers).toBe(2);
    expect(init.gradWorkers).toBe(1);
    expect(ofKind('backend').at(-1)).toMatchObject({ workers: 2, gradWorkers: 1 });
    expect(init.backend.backend).toBe('wasm');
    expect(ofKind('backend')).toHaveLength(1);
    expect(ofKind('status').at(-1)).toMatchObject({ state: 'idle', policyVersion: 0 });
  });

  it('answers a bad config with an error naming the field and keeps the model', async () => {
    const before = await logitsOf();
    await expect(client.request({ kind: 'setConfig', config: { ...config, lr: 5 } })).rejects.toThrow(/lr must be a number in \[1e-7, 0\.1\] \(got 5\)/);
    await expect(client.request({ kind: 'setConfig', config: { ...config, credit: 'both' as 'ratio' } })).rejects.toThrow(
      /credit must be one of ratio, broadcast/,
    );
    await expect(client.request({ kind: 'setConfig', config: { ...config, task: 'multihop', taskOptions: { perChunk: 9 } } })).rejects.toThrow(
      'taskOptions: multihop: perChunk must be an integer in [1, 6] (got 9)',
    );
    expect(await logitsOf()).toEqual(before);
    await expect(client.request({ kind: 'frobnicate' } as never)).rejects.toThrow(/unknown request kind "frobnicate"/);
    await expect(client.request({ kind: 'constructor' } as never)).rejects.toThrow(/unknown request kind "constructor"/);
  });

  it('rejects corrupt checkpoint files with the validator message; the previous model still answers identically', async () => {
    const before = await logitsOf();
    const { files } = await client.request({ kind: 'exportWeights' });
    expect(Object.keys(files).sort()).toEqual(['config.json', 'model.safetensors', 'selfcest.json', 'tokenizer.json', 'tokenizer_config.json']);
    const copy = () => Object.fromEntries(Object.entries(files).map(([k, v]) => [k, v.slice().buffer]));
    const truncated = copy();
    truncated['model.safetensors'] = truncated['model.safetensors'].slice(0, 1000);
    await expect(client.request({ kind: 'loadFiles', files: truncated })).rejects.toThrow(/^checkpoint: model\.safetensors is invalid/);
    const wrongLayers = copy();
    const cfg = JSON.parse(new TextDecoder().decode(files['config.json'])) as Record<string, unknown>;
    wrongLayers['config.json'] = new TextEncoder().encode(JSON.stringify({ ...cfg, n_layer: 3 })).buffer;
    await expect(client.request({ kind: 'loadFiles', files: wrongLayers })).rejects.toThrow(/n_layer = 3 but the tensors have 2 layers/);
    const noSelfcest = copy();
    delete noSelfcest['selfcest.json'];
    // Without selfcest.json the files are read as a Hugging Face folder, which the toy's is not (no chat template).
    await expect(client.request({ kind: 'loadFiles', files: noSelfcest })).rejects.toThrow(
      /^loadFiles: no selfcest\.json in the files, so not a checkpoint of this project, and not a Hugging Face model folder either: .*chat template/,
    );
    expect(await logitsOf()).toEqual(before);
    // The same files, intact, load and give the same logits.
    const report = await client.request({ kind: 'loadFiles', files: copy() });
    expect(report).toMatchObject({ preset: 'tiny', policyVersion: 0, parameters: parameterCount(presetConfig('tiny')) });
    expect(await logitsOf()).toEqual(before);
  });

  it('loads a served checkpoint folder (4 files + tokenizer_config.json) and names a missing one', async () => {
    const { files } = await client.request({ kind: 'exportWeights' });
    for (const [name, bytes] of Object.entries(files)) await writeFile(join(dir, name), bytes);
    const report = await client.request({ kind: 'loadUrl', baseUrl: pathToFileURL(`${dir}/`).href });
    expect(report.source).toBe(pathToFileURL(`${dir}/`).href);
    await expect(client.request({ kind: 'loadUrl', baseUrl: pathToFileURL(join(dir, 'nope')).href })).rejects.toThrow(
      /^loadUrl: no selfcest\.json in .*nope, so not a checkpoint of this project, and not a Hugging Face model folder either: .*config\.json/,
    );
  });

  it('takes one GRPO step: metrics, episodes, a new policy version and exports', async () => {
    events = [];
    const { metrics } = await client.request({ kind: 'step' });
    expect(metrics.step).toBe(1);
    expect(Number.isFinite(metrics.meanReward)).toBe(true);
    expect(ofKind('metrics').flatMap((e) => e.rows)).toEqual([metrics]);
    const episodes = ofKind('episodes');
    expect(episodes).toHaveLength(1);
    expect(episodes[0].traces).toHaveLength(4);
    expect(episodes[0].traces.every((t) => t.policyVersion === 0 && t.reward !== undefined)).toBe(true);
    expect(ofKind('status').map((e) => e.state)).toEqual(['training', 'paused']);
    expect(ofKind('policyVersion').map((e) => e.policyVersion)).toEqual([1]);
    expect((await client.request({ kind: 'pause' })).policyVersion).toBe(1);
    // With nothing running, a pause still reports the state, so a page showing "pausing…" settles.
    expect(ofKind('status').map((e) => e.state)).toEqual(['training', 'paused', 'paused']);
    const csv = (await client.request({ kind: 'exportMetrics', format: 'csv' })).text.trim().split('\n');
    expect(csv).toHaveLength(2);
    expect(csv[0]).toMatch(/^step,meanReward,.*violations\.clone_over_budget/);
    // As JSON writes it: a NaN (no gated clone: gatedCloneAdvantage) is null, which the readers take as NaN.
    expect(JSON.parse((await client.request({ kind: 'exportMetrics', format: 'jsonl' })).text)).toEqual(JSON.parse(JSON.stringify(metrics)));
    const traces = (await client.request({ kind: 'exportTraces' })).jsonl.trim().split('\n');
    expect(traces).toHaveLength(4);
    expect(JSON.parse(traces[0])).toMatchObject({ step: 1, schema: 'selfcest-episode/1' });
  });

  it('trains until paused; the next rollouts use the broadcast weights', async () => {
    events = [];
    const training = client.request({ kind: 'train' });
    await expect(client.request({ kind: 'step' })).rejects.toThrow(/busy with train/);
    while (ofKind('episodes').length < 2) await new Promise((r) => setTimeout(r, 20));
    // The page's status bar follows every step while the run goes on, not only on pause.
    expect(
      ofKind('policyVersion')
        .map((e) => e.policyVersion)
        .slice(0, 2),
    ).toEqual([2, 3]);
    const { policyVersion } = await client.request({ kind: 'pause' });
    const { steps } = await training;
    expect(ofKind('policyVersion').map((e) => e.policyVersion)).toEqual(Array.from({ length: steps }, (_, i) => 2 + i));
    expect(steps).toBeGreaterThanOrEqual(2);
    expect(policyVersion).toBe(1 + steps);
    // Each step's episodes were sampled by the version its predecessor's update produced.
    expect(ofKind('episodes').map((e) => e.traces[0].policyVersion)).toEqual(Array.from({ length: steps }, (_, i) => 1 + i));
    expect(ofKind('metrics').flatMap((e) => e.rows.map((r) => r.step))).toEqual(Array.from({ length: steps }, (_, i) => 2 + i));
    // The pause is reported at once, naming the step the loop still finishes: its last one.
    expect(ofKind('status')).toEqual([
      { kind: 'status', state: 'training', policyVersion: 1 },
      { kind: 'status', state: 'pausing', finishing: `step ${1 + steps}`, policyVersion: expect.any(Number) },
      { kind: 'status', state: 'paused', policyVersion: 1 + steps },
    ]);
  });

  it('sends the rows of every step the exported weights took before the weights, while a run goes on', async () => {
    events = [];
    const training = client.request({ kind: 'train' });
    for (let i = 0; i < 3; i++) {
      while (ofKind('episodes').length < 2 * (i + 1)) await new Promise((r) => setTimeout(r, 5));
      // What the page has seen when the reply arrives: the rows come first on the same port.
      const { counters } = await client.request({ kind: 'exportWeights' });
      const rows = ofKind('metrics').flatMap((e) => e.rows.map((r) => r.step));
      expect(rows.at(-1), `export ${i}`).toBeGreaterThanOrEqual(counters.grpoSteps);
    }
    await client.request({ kind: 'pause' });
    await training;
  });

  it('evaluates the frontier in the rollout workers, and every evalEvery steps of a run', async () => {
    await expect(client.request({ kind: 'frontier', methods: ['delegate', 'sc0' as never], limits: [32] })).rejects.toThrow(/sc1 … sc64/);
    await expect(client.request({ kind: 'frontier', methods: ['mono'], limits: [0] })).rejects.toThrow(
      /limits: each must be an integer in \[1, 8192\] \(got 0\)/,
    );
    await expect(client.request({ kind: 'frontier', methods: ['mono'], limits: [8], n: 0 })).rejects.toThrow(/n must be an integer in \[1, 2000\] \(got 0\)/);
    const { policyVersion } = await client.request({ kind: 'pause' });
    events = [];
    const { points } = await client.request({ kind: 'frontier', methods: ['delegate', 'mono', 'sc2'], limits: [12, 40], n: 3 });
    expect(points.map((p) => `${p.method}@${p.limit}`)).toEqual(['delegate@12', 'delegate@40', 'mono@12', 'mono@40', 'sc2@12', 'sc2@40']);
    for (const p of points) {
      expect(p).toMatchObject({ n: 3, checkpoint: `v${policyVersion}` });
      expect(p.interval[0]).toBeLessThanOrEqual(p.accuracy);
      expect(p.interval[1]).toBeGreaterThanOrEqual(p.accuracy);
      expect(p.meanCriticalPathTokens).toBeLessThanOrEqual(p.meanTokens);
    }
    // Monolithic: the root is all there is, bounded by its limit; two samples cost up to twice that.
    for (const p of points.filter((q) => q.method === 'mono')) expect(p.meanTokens).toBeLessThanOrEqual(p.limit);
    for (const p of points.filter((q) => q.method === 'sc2')) expect(p.meanTokens).toBeLessThanOrEqual(2 * p.limit);
    expect(ofKind('frontier').flatMap((e) => e.points)).toEqual(points);
    // An evaluation leaves the run's state alone, and greedy points repeat exactly.
    expect(ofKind('status').map((e) => e.state)).toEqual(['paused']);
    const again = await client.request({ kind: 'frontier', methods: ['delegate'], limits: [40], n: 3 });
    expect(again.points[0]).toEqual(points[1]);

    await client.request({ kind: 'setConfig', config: { ...config, evalEvery: 1, evalN: 2 } });
    events = [];
    const { metrics } = await client.request({ kind: 'step' });
    const live = ofKind('frontier').flatMap((e) => e.points);
    expect(live.map((p) => [p.method, p.limit, p.n, p.step, p.checkpoint])).toEqual([
      ['delegate', 48, 2, metrics.step, `step ${metrics.step}`],
      ['mono', 48, 2, metrics.step, `step ${metrics.step}`],
    ]);
    // The held-out problems are drawn with the run's task options: two chunks of one make a far shorter monolithic prompt than the default 6 × 3.
    const rootContext = async (taskOptions: Record<string, unknown>) => {
      await client.request({ kind: 'setConfig', config: { ...config, task: 'multihop', taskOptions } });
      const [p] = (await client.request({ kind: 'frontier', methods: ['mono'], limits: [4], n: 2 })).points;
      return p.meanRootContextTokens ?? NaN;
    };
    const small = await rootContext({ chunks: 2, perChunk: 1, hops: 1 });
    const full = await rootContext({});
    expect(small + 40).toBeLessThan(full);
    await client.request({ kind: 'setConfig', config });
  });

  it('redoes a step after a lost device in a rollout worker or in the trainer', async () => {
    events = [];
    await engine.simulateDeviceLoss(1);
    const a = await client.request({ kind: 'step' });
    expect(Number.isFinite(a.metrics.loss)).toBe(true);
    const notes = ofKind('backend').at(-1)?.report.notes ?? [];
    expect(notes.some((n) => /rollout worker 1: wasm: device lost \(simulated device loss\), fell back to wasm/.test(n))).toBe(true);
    expect(notes.some((n) => /rollout worker 1: weights re-uploaded/.test(n))).toBe(true);
    const version = (await client.request({ kind: 'pause' })).policyVersion;
    await engine.simulateDeviceLoss('trainer');
    await client.request({ kind: 'step' });
    const last = ofKind('backend').at(-1)?.report;
    expect(last?.backend).toBe('wasm');
    expect(last?.notes.some((n) => n.includes(`weights restored from version ${version}, optimizer state reset`))).toBe(true);
    expect((await client.request({ kind: 'pause' })).policyVersion).toBe(version + 1);
    // Lost while its rollouts are in flight: the failed rollouts are dropped and the step redone.
    events = [];
    loseBeforeFeed = { worker: 0, feeds: 2 };
    const c = await client.request({ kind: 'step' });
    expect(loseBeforeFeed).toBeNull();
    expect(c.metrics.step).toBe(a.metrics.step + 2);
    const logs = ofKind('log');
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatchObject({ level: 'warn', message: expect.stringMatching(/^step redone after: rollout worker: device lost/) });
    expect(ofKind('backend').at(-1)?.report.notes.at(-1)).toMatch(/rollout worker 0: weights re-uploaded/);
  });

  it('steps one rollout token by token to the end, as the whole-episode advance does', async () => {
    const start = await client.request({ kind: 'stepperStart', seed: 2, allowSpawn: true });
    expect(start.done).toBe(false);
    expect(start.live).toEqual([{ context: 0, role: 'root', waiting: false, topK: [] }]);
    let state = start;
    let advances = 0;
    while (!state.done) {
      const before = state.trace.contexts[0].generatedTokens;
      state = await client.request({ kind: 'stepperAdvance', until: 'token' });
      advances++;
      expect(state.trace.contexts[0].generatedTokens).toBe(before + 1); // a random model never spawns
      if (!state.done) {
        const top = state.live[0].topK;
        expect(top).toHaveLength(5);
        expect(top[0].prob).toBeGreaterThanOrEqual(top[4].prob);
      }
    }
    expect(advances).toBe(state.trace.tokens.total);
    await expect(client.request({ kind: 'stepperAdvance', until: 'token' })).rejects.toThrow(/no episode in progress/);
    await client.request({ kind: 'stepperStart', seed: 2, allowSpawn: true });
    const whole = await client.request({ kind: 'stepperAdvance', until: 'end' });
    expect(whole.trace.contexts).toEqual(state.trace.contexts);
    const own = await client.request({ kind: 'stepperStart', seed: 1, prompt: '12+3*4', allowSpawn: false });
    expect(own.trace).toMatchObject({ prompt: '12+3*4', truth: '24', method: 'mono' });
    const mono = await client.request({ kind: 'stepperAdvance', until: 'token' });
    expect(mono.done).toBe(false);
    const shown = mono.live[0].topK;
    expect(shown).toHaveLength(5);
    // Without spawning the spawn tokens were banned: they are not in the distribution shown.
    expect(shown.filter((t) => ['<spawn>', '<join>', '<ctx>', '<b8>', '<b16>', '<b32>', '<b64>', '<b128>'].includes(t.token))).toEqual([]);
    expect(shown.reduce((a, t) => a + t.prob, 0)).toBeLessThanOrEqual(1 + 1e-6);
    await expect(client.request({ kind: 'stepperStart', seed: 1, prompt: '12+', allowSpawn: false })).rejects.toThrow(/not an arithmetic expression/);
    // A generated problem is drawn with the run's task options, not the task's defaults.
    await client.request({ kind: 'setConfig', config: { ...config, task: 'multihop', taskOptions: { chunks: 3, perChunk: 2 } } });
    const mh = await client.request({ kind: 'stepperStart', seed: 2, allowSpawn: true });
    expect(mh.trace.prompt).toMatch(/^keys k1 k2 k3\. [a-z]\?$/);
    await client.request({ kind: 'stepperAdvance', until: 'end' });
    await client.request({ kind: 'setConfig', config });
  });

  it('reset returns to the loaded checkpoint and clears the run', async () => {
    const report = await client.request({ kind: 'reset' });
    expect(report.policyVersion).toBe(0);
    expect((await client.request({ kind: 'exportMetrics', format: 'jsonl' })).text).toBe('');
    const loaded = await client.request({ kind: 'loadUrl', baseUrl: pathToFileURL(`${dir}/`).href });
    expect(loaded.policyVersion).toBe(0);
    const a = await logitsOf();
    events = [];
    const sft = await client.request({ kind: 'sft', steps: 2 });
    expect(sft.steps).toBe(2);
    expect(ofKind('sftProgress').at(-1)).toMatchObject({ step: 2, steps: 2, etaSec: 0 });
    expect(ofKind('sftProgress').at(-1)?.loss).toBe(sft.loss);
    expect(ofKind('status').map((e) => e.state)).toEqual(['sft', 'paused']);
    // The policy version moves with each applied warm-start step (the status bar follows it), as the rows say.
    const rows = ofKind('sftMetrics').flatMap((e) => e.rows);
    expect(rows.map((r) => r.step)).toEqual([1, 2]);
    const applied = rows.filter((r) => !r.skipped).length;
    expect(ofKind('policyVersion').map((e) => e.policyVersion)).toEqual(Array.from({ length: applied }, (_, i) => i + 1));
    expect(ofKind('status').at(-1)?.policyVersion).toBe(applied);
    expect(await logitsOf()).not.toEqual(a);
    await client.request({ kind: 'reset' });
    expect(await logitsOf()).toEqual(a);
  });

  it('a new pool size restarts the workers and keeps the model; a step leaves no tensor behind', async () => {
    const before = await logitsOf();
    const { source } = await client.request({ kind: 'reset' });
    const report = await client.request({ kind: 'setConfig', config: { ...config, workers: 1, lr: 2e-4 } });
    expect(report.source).toBe(source);
    expect(await logitsOf()).toEqual(before);
    await client.request({ kind: 'step' });
    const tensors = tf.memory().numTensors;
    await client.request({ kind: 'step' });
    expect(tf.memory().numTensors).toBe(tensors);
    expect(ofKind('backend').at(-1)?.report.backend).toBe('wasm');
  });

  it('a gradient worker that dies mid-update: the step completes without it, the worker is restarted; a new count restarts the gradient workers', async () => {
    events = [];
    const before = (await client.request({ kind: 'pause' })).policyVersion;
    crashOnGrads = true;
    const sft = await client.request({ kind: 'sft', steps: 1 });
    expect(sft.steps).toBe(1);
    expect(Number.isFinite(sft.loss)).toBe(true);
    expect((await client.request({ kind: 'pause' })).policyVersion).toBe(before + 1);
    expect(crashOnGrads).toBe(false);
    expect(ofKind('log').filter((e) => /^step redone/.test(e.message))).toEqual([]); // its share was computed in the trainer
    expect(
      ofKind('backend')
        .at(-1)
        ?.report.notes.some((n) => /gradient worker 0 restarted/.test(n)),
    ).toBe(true);
    await client.request({ kind: 'setConfig', config: { ...config, workers: 1, gradWorkers: 0 } });
    expect(ofKind('backend').at(-1)).toMatchObject({ workers: 1, gradWorkers: 0 });
    expect(Number.isFinite((await client.request({ kind: 'step' })).metrics.loss)).toBe(true);
    await client.request({ kind: 'setConfig', config });
    expect(ofKind('backend').at(-1)).toMatchObject({ workers: 2, gradWorkers: 1 });
  });

  it('a slow-motion step is a real step of the run, returned stage by stage', async () => {
    const version = (await client.request({ kind: 'pause' })).policyVersion;
    const rows = (await client.request({ kind: 'exportMetrics', format: 'csv' })).text.trim().split('\n').length;
    events = [];
    const a = await client.request({ kind: 'slowStep' });
    expect(a).toMatchObject({ step: rows, policyVersionBefore: version, policyVersionAfter: version + 1 });
    expect(a.metrics.step).toBe(rows);
    expect(ofKind('metrics').flatMap((e) => e.rows)).toEqual([a.metrics]);
    expect(ofKind('policyVersion').map((e) => e.policyVersion)).toEqual([version + 1]);
    // The episodes the page's table gets are the anatomy's traces.
    expect(ofKind('episodes')[0].traces).toEqual(a.traces);
    expect(a.groups).toHaveLength(2);
    expect(a.groups.flatMap((g) => g.episodes).sort()).toEqual([0, 1, 2, 3]);
    a.traces.forEach((t, i) => t.contexts.forEach((c, j) => expect(a.after[i][j]).toHaveLength(c.logprobs.length)));
    expect(a.settings).toMatchObject({ group: 2, batch: 2 });
    expect((await client.request({ kind: 'exportMetrics', format: 'csv' })).text.trim().split('\n')).toHaveLength(rows + 1);
  });
  it('a resumed session keeps its optimizer moments and its history: exports after the reload hold the earlier steps', async () => {
    await client.request({ kind: 'step' });
    const metrics = (await client.request({ kind: 'exportMetrics', format: 'jsonl' })).text;
    const traces = (await client.request({ kind: 'exportTraces' })).jsonl
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { step: number });
    const current = await client.request({ kind: 'exportWeights', optimizer: true });
    expect(Object.keys(current.files)).toContain('optimizer-grpo.safetensors');
    const origin = await client.request({ kind: 'exportWeights', origin: true });
    const buffers = (files: Record<string, Uint8Array>) => Object.fromEntries(Object.entries(files).map(([k, b]) => [k, b.slice().buffer]));
    const rows = metrics
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as StepMetrics);
    const log = { metrics: rows, traces: traces.map(({ step, ...trace }) => ({ step, trace: trace as unknown as EpisodeTrace })) };
    const resume = { counters: current.counters, origin: { files: buffers(origin.files), counters: origin.counters }, source: 'session', log };
    // A malformed history is refused before anything changes.
    await expect(
      client.request({ kind: 'loadFiles', files: buffers(current.files), resume: { ...resume, log: { metrics: [{}], traces: [] } as never } }),
    ).rejects.toThrow(/resume\.log\.metrics must be an array of metrics rows/);
    // A damaged optimizer file too, naming it.
    const damaged = { ...buffers(current.files), 'optimizer-grpo.safetensors': new Uint8Array(12).buffer };
    await expect(client.request({ kind: 'loadFiles', files: damaged, resume })).rejects.toThrow(/^loadFiles: optimizer-grpo\.safetensors: /);
    expect((await client.request({ kind: 'exportMetrics', format: 'jsonl' })).text).toBe(metrics);
    const model = await client.request({ kind: 'loadFiles', files: buffers(current.files), resume });
    expect(model.policyVersion).toBe(current.counters.policyVersion);
    expect((await client.request({ kind: 'exportMetrics', format: 'jsonl' })).text).toBe(metrics);
    const { metrics: next } = await client.request({ kind: 'step' });
    expect(next.step).toBe(rows.length + 1);
    const after = (await client.request({ kind: 'exportMetrics', format: 'jsonl' })).text.trim().split('\n');
    expect(after).toHaveLength(rows.length + 1);
    const exported = (await client.request({ kind: 'exportTraces' })).jsonl.trim().split('\n');
    expect(exported.length).toBe(traces.length + 4);
  });
  it('tells where a step is: its rollouts, then its updates, each ending at its total', async () => {
    events = [];
    const { metrics } = await client.request({ kind: 'step' });
    const progress = ofKind('progress');
    const rollouts = progress.filter((p) => p.what === `step ${metrics.step}: rollouts`);
    const updates = progress.filter((p) => p.what === `step ${metrics.step}: updates`);
    expect(rollouts.at(-1)).toMatchObject({ done: 4, total: 4 });
    expect(updates.at(-1)).toMatchObject({ done: 1, total: 1 });
    expect(progress.indexOf(updates[0])).toBeGreaterThan(progress.indexOf(rollouts.at(-1)!));
  });
});
