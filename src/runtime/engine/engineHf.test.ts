/**
 * A Hugging Face model in the engine, through its message protocol as the page uses it: a Qwen2
 * folder made by the project is loaded from its files (no selfcest.json), warm-started, trained by
 * GRPO and evaluated by the same requests as the toy, with real rollout and gradient worker
 * threads (every weight trained) or decoding in the engine (LoRA); its export is a folder that our
 * loader and transformers (test/python/hf_init_check.py, skipped without torch and transformers)
 * read with the engine's logits, and Reset returns to the folder's weights.
 */
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { MessageChannel } from 'node:worker_threads';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HF_TRAINING_FILE, filesFolderReader } from '../../core/io/hfFolder';
import { folderFiles } from '../../core/io/hfFolderParts';
import { loadHfTextModel } from '../../core/io/hfTextModel';
import { decodeSafetensors } from '../../core/io/safetensors';
import { decoderLogits } from '../../core/model/decoder';
import { INIT_DEFAULT_SIZES, initHfFolder } from '../../core/model/hfInit';
import { PAGE_DEFAULTS, type RunConfig } from '../../core/runConfig';
import { initBackend } from '../backend';
import { nodeEndpoint } from '../node/nodeEndpoint';
import { nodeHost } from '../node/nodeHost';
import { EngineClient } from './engineClient';
import type { Engine } from './engine';
import type { EngineEvent } from './messages';
import { serveEngine } from './serveEngine';
import { pythonWith } from '../../../test/python/python';

const CHECK = fileURLToPath(new URL('../../../test/python/hf_init_check.py', import.meta.url));
const py = pythonWith('torch', 'transformers');

const config: RunConfig = {
  ...PAGE_DEFAULTS,
  preset: 'tiny',
  loraR: 0,
  group: 2,
  batch: 2,
  miniBatch: 2,
  workers: 1,
  gradWorkers: 1,
  backend: 'wasm',
  seed: 5,
  evalEvery: 0,
  rootMaxTokens: 24,
  budgets: [8],
  maxClones: 2,
  maxRounds: 1,
  sftBatchTokens: 400,
  sftMicroTokens: 4096,
};
const TEXT = '3*4+5';
const SIZES = { ...INIT_DEFAULT_SIZES, layers: 1, hiddenSize: 32, heads: 2, kvHeads: 1, intermediateSize: 48, maxPositions: 1024 };

let client: EngineClient;
let engine: Engine;
let close: () => void;
let dir: string;
const events: EngineEvent[] = [];
/** The folder's files as the page sends them (name → ArrayBuffer; a send may transfer them, so a new copy each time). */
const folder = (): Record<string, ArrayBuffer> => Object.fromEntries([...folderBytes].map(([k, v]) => [k, v.slice().buffer as ArrayBuffer]));
let folderBytes: Map<string, Uint8Array>;

beforeAll(async () => {
  await initBackend('wasm');
  dir = await mkdtemp(join(tmpdir(), 'selfcest-engine-hf-'));
  folderBytes = new Map(folderFiles(initHfFolder('qwen2', SIZES, 11)).map((f) => [f.name, f.bytes]));
  const channel = new MessageChannel();
  ({ engine } = serveEngine(nodeEndpoint(channel.port2), nodeHost));
  client = new EngineClient({ endpoint: nodeEndpoint(channel.port1), onExit: () => () => {}, terminate: () => channel.port1.close() });
  client.on((e) => events.push(e));
  close = () => {
    channel.port1.close();
    channel.port2.close();
  };
  await client.request({ kind: 'init', config });
});

afterAll(async () => {
  await engine?.dispose();
  close?.();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Logits of TEXT by our loader from a folder's files. */
async function loaderLogits(files: ReadonlyMap<string, Uint8Array>): Promise<number[][]> {
  const { model } = await loadHfTextModel(filesFolderReader(files), 'float32');
  const ids = model.tokenizer.encode(TEXT);
  const out = tf.tidy(() => decoderLogits(model.params, model.config, tf.tensor2d([ids], [1, ids.length], 'int32')).arraySync()[0]);
  model.params.forEach((t) => t.dispose());
  return out;
}

const maxDiff = (a: number[][], b: number[][]) => Math.max(...a.flatMap((row, i) => row.map((v, j) => Math.abs(v - b[i][j]))));
const ofKind = <K extends EngineEvent['kind']>(kind: K) => events.filter((e): e is Extract<EngineEvent, { kind: K }> => e.kind === kind);

describe('a Hugging Face folder in the engine (every weight trained)', () => {
  it('loads from its files: the report names the family, and the logits are the folder’s', async () => {
    const report = await client.request({ kind: 'loadFiles', files: folder() });
    expect(report).toMatchObject({ kind: 'hf', preset: 'qwen2', policyVersion: 0 });
    expect(report.parameters).toBeGreaterThan(0);
    const { logits } = await client.request({ kind: 'logits', text: TEXT });
    expect(maxDiff(logits, await loaderLogits(folderBytes))).toBe(0);
  });

  it('loads a served folder by its URL, and names what a folder lacks', async () => {
    const served = join(dir, 'served');
    await mkdir(served, { recursive: true });
    for (const [name, bytes] of folderBytes) await writeFile(join(served, name), bytes);
    const url = pathToFileURL(`${served}/`).href;
    expect(await client.request({ kind: 'loadUrl', baseUrl: url })).toMatchObject({ kind: 'hf', preset: 'qwen2', source: url });
    expect(maxDiff((await client.request({ kind: 'logits', text: TEXT })).logits, await loaderLogits(folderBytes))).toBe(0);
    const noTokenizer = folder();
    delete noTokenizer['tokenizer.json'];
    await expect(client.request({ kind: 'loadFiles', files: noTokenizer })).rejects.toThrow(
      /^loadFiles: no selfcest\.json in the files, so not a checkpoint of this project, and not a Hugging Face model folder either: .*tokenizer\.json/,
    );
  });

  it('fetches a model by its Hub id from a mirror of the Hub, and names a refused id or a missing model', async () => {
    const server = createServer((req, res) => {
      const m = /^\/tiny\/qwen2\/resolve\/main\/([\w.-]+)$/.exec(req.url ?? '');
      const bytes = m ? folderBytes.get(m[1]) : undefined;
      res.writeHead(bytes === undefined ? 404 : 200);
      res.end(bytes === undefined ? 'not found' : Buffer.from(bytes));
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      expect(await client.request({ kind: 'loadHub', id: 'tiny/qwen2', endpoint })).toMatchObject({ kind: 'hf', preset: 'qwen2', source: 'tiny/qwen2' });
      expect(maxDiff((await client.request({ kind: 'logits', text: TEXT })).logits, await loaderLogits(folderBytes))).toBe(0);
      await expect(client.request({ kind: 'loadHub', id: 'not an id', endpoint })).rejects.toThrow('"not an id" is not a Hub model id (owner/name)');
      await expect(client.request({ kind: 'loadHub', id: 'tiny/none', endpoint })).rejects.toThrow(/config\.json/);
      expect((await client.request({ kind: 'exportWeights' })).counters.policyVersion).toBe(0);
    } finally {
      server.close();
    }
  });

  it('warm-starts, takes a GRPO step and evaluates with the toy’s requests, in the text protocol', async () => {
    const before = (await client.request({ kind: 'logits', text: TEXT })).logits;
    const sft = await client.request({ kind: 'sft', steps: 2 });
    expect(sft.steps).toBe(2);
    expect(Number.isFinite(sft.loss)).toBe(true);
    const rows = ofKind('sftMetrics').flatMap((e) => e.rows);
    expect(rows.map((r) => r.step)).toEqual([1, 2]);
    expect(maxDiff((await client.request({ kind: 'logits', text: TEXT })).logits, before)).toBeGreaterThan(0);
    const { metrics } = await client.request({ kind: 'step' });
    expect(metrics.step).toBe(1);
    // The gradient worker took its shares (of the KL reference's too): none was restarted.
    expect(ofKind('backend').flatMap((e) => e.report.notes)).toEqual([]);
    const episodes = ofKind('episodes').at(-1);
    expect(episodes?.traces).toHaveLength(config.group * config.batch);
    // Text episodes: the root's context holds the chat template's text.
    expect(JSON.stringify(episodes?.traces[0])).toContain('im_start');
    const { points } = await client.request({ kind: 'frontier', methods: ['delegate', 'mono'], limits: [24], n: 3 });
    expect(points.map((p) => [p.method, p.limit, p.n])).toEqual([
      ['delegate', 24, 3],
      ['mono', 24, 3],
    ]);
  });

  it('exports a folder our loader and transformers read with the engine’s logits; Reset returns to the loaded weights', async () => {
    const { logits } = await client.request({ kind: 'logits', text: TEXT });
    const { files, counters } = await client.request({ kind: 'exportWeights' });
    expect(counters).toMatchObject({ sftSteps: 2, grpoSteps: 1 });
    const exported = new Map(Object.entries(files));
    expect([...exported.keys()].sort()).toEqual([...folderBytes.keys(), HF_TRAINING_FILE].sort());
    expect(JSON.parse(new TextDecoder().decode(exported.get(HF_TRAINING_FILE)))).toMatchObject({ counters });
    expect(maxDiff(await loaderLogits(exported), logits)).toBe(0);
    // The origin's export is the folder's weights.
    const origin = new Map(Object.entries((await client.request({ kind: 'exportWeights', origin: true })).files));
    const tensors = (m: Map<string, Uint8Array>) => decodeSafetensors(m.get('model.safetensors') as Uint8Array).tensors;
    for (const [name, t] of tensors(folderBytes)) expect(Array.from(tensors(origin).get(name)?.data ?? []), name).toEqual(Array.from(t.data));
    if (py.python !== null) {
      const out = join(dir, 'exported');
      await mkdir(out, { recursive: true });
      for (const [name, bytes] of exported) await writeFile(join(out, name), bytes);
      const { model } = await loadHfTextModel(filesFolderReader(exported), 'float32');
      const messages = [
        { role: 'system', content: 'Solve.' },
        { role: 'user', content: TEXT },
      ];
      const ids = model.tokenizer.chatIds(messages, false);
      const ours = tf.tidy(() => decoderLogits(model.params, model.config, tf.tensor2d([ids], [1, ids.length], 'int32')).arraySync()[0]);
      model.params.forEach((t) => t.dispose());
      await writeFile(join(dir, 'cases.json'), JSON.stringify({ texts: [], chats: [{ messages, tools: null, add_generation_prompt: false }] }));
      const run = spawnSync(py.python, [CHECK, out, join(dir, 'cases.json'), join(dir, 'out.json')], { encoding: 'utf8', timeout: 120_000 });
      expect(run.status, run.stderr).toBe(0);
      const ref = JSON.parse(await readFile(join(dir, 'out.json'), 'utf8')) as { chats: { ids: number[]; logits: number[][] }[] };
      expect(ref.chats[0].ids).toEqual(ids);
      expect(maxDiff(ref.chats[0].logits, ours)).toBeLessThan(1e-4);
    } else {
      console.log(`transformers check skipped: ${py.why}`);
    }
    const reset = await client.request({ kind: 'reset' });
    expect(reset).toMatchObject({ kind: 'hf', policyVersion: 0 });
    expect(maxDiff((await client.request({ kind: 'logits', text: TEXT })).logits, await loaderLogits(folderBytes))).toBe(0);
  });

  it('resumes from its export as the page’s saved session does: weights, counters, optimizer moments, and its origin for Reset', async () => {
    await client.request({ kind: 'sft', steps: 1 });
    await client.request({ kind: 'step' });
    const { logits } = await client.request({ kind: 'logits', text: TEXT });
    const current = await client.request({ kind: 'exportWeights', optimizer: true });
    const origin = await client.request({ kind: 'exportWeights', origin: true });
    expect(Object.keys(current.files)).toEqual(expect.arrayContaining(['optimizer-grpo.safetensors', 'optimizer-sft.safetensors']));
    await client.request({ kind: 'reset' });
    const report = await client.request({
      kind: 'loadFiles',
      files: current.files as unknown as Record<string, ArrayBuffer>,
      resume: {
        counters: current.counters,
        origin: { files: origin.files as unknown as Record<string, ArrayBuffer>, counters: origin.counters },
        source: 'session',
      },
    });
    expect(report).toMatchObject({ kind: 'hf', policyVersion: current.counters.policyVersion, source: 'session' });
    expect(maxDiff((await client.request({ kind: 'logits', text: TEXT })).logits, logits)).toBe(0);
    await client.request({ kind: 'reset' });
    expect(maxDiff((await client.request({ kind: 'logits', text: TEXT })).logits, await loaderLogits(folderBytes))).toBe(0);
  });

  it('steps an episode token by token: the top-k of each live context in the model’s own pieces, to its end', async () => {
    const start = await client.request({ kind: 'stepperStart', seed: 1, allowSpawn: true });
    expect(start.done).toBe(false);
    const one = await client.request({ kind: 'stepperAdvance', until: 'token' });
    expect(one.live[0].topK).toHaveLength(5);
    // Pieces are the tokenizer's own strings, never ids.
    expect(one.live[0].topK.every((t) => !t.token.startsWith('#'))).toBe(true);
    const end = await client.request({ kind: 'stepperAdvance', until: 'end' });
    expect(end.done).toBe(true);
    expect(end.trace.contexts[0].pieces?.length).toBeGreaterThan(0);
    // The root's context is the chat template's text.
    expect(end.trace.contexts[0].text).toContain('<|im_start|>user');
  });

  it('refuses a setting the model cannot honour by name, and a preset change brings back the toy', async () => {
    await expect(client.request({ kind: 'setConfig', config: { ...config, loraR: 4, loraTargets: 'c_attn' } })).rejects.toThrow(
      /loraTargets: c_attn is not a linear layer of this model/,
    );
    // Limits past the window are said with the report, before a run.
    expect((await client.request({ kind: 'setConfig', config })).warnings).toBeUndefined();
    const long = await client.request({ kind: 'setConfig', config: { ...config, rootMaxTokens: 2000 } });
    expect(long.warnings).toEqual([expect.stringMatching(/^a root's prompt of up to \d+ tokens, its limit of 2000 .* past the model's 1024-token window/)]);
    // Settings only the toy honours are refused by name when the model would train with them.
    await client.request({ kind: 'setConfig', config: { ...config, sftLabelSmoothing: 0.1 } });
    await expect(client.request({ kind: 'sft', steps: 1 })).rejects.toThrow(/^sftLabelSmoothing: only the toy model honours it/);
    await expect(client.request({ kind: 'step' })).rejects.toThrow(/^sftLabelSmoothing: only the toy model honours it/);
    await client.request({ kind: 'setConfig', config });
    // The refused setting left the model as it was.
    expect(maxDiff((await client.request({ kind: 'logits', text: TEXT })).logits, await loaderLogits(folderBytes))).toBe(0);
    const toy = await client.request({ kind: 'setConfig', config: { ...config, preset: 'small' } });
    expect(toy).toMatchObject({ kind: 'toy', preset: 'small' });
  });
});

describe('a Hugging Face folder in the engine (LoRA adapters)', () => {
  it('trains its adapters, decoding in the engine, and exports them in PEFT’s format', async () => {
    const lora = { ...config, loraR: 4, workers: 1 };
    await client.request({ kind: 'setConfig', config: lora });
    const report = await client.request({ kind: 'loadFiles', files: folder() });
    expect(report).toMatchObject({ kind: 'hf', preset: 'qwen2' });
    await client.request({ kind: 'sft', steps: 1 });
    const { metrics } = await client.request({ kind: 'step' });
    expect(metrics.step).toBe(1);
    const { files } = await client.request({ kind: 'exportWeights' });
    expect(Object.keys(files).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors', HF_TRAINING_FILE]);
    const adapterConfig = JSON.parse(new TextDecoder().decode(files['adapter_config.json']));
    expect(adapterConfig).toMatchObject({ peft_type: 'LORA', r: 4 });
    const names = [...decodeSafetensors(files['adapter_model.safetensors']).tensors.keys()];
    expect(names.length).toBeGreaterThan(0);
    expect(names.every((n) => n.includes('lora_A') || n.includes('lora_B'))).toBe(true);
  });
});
