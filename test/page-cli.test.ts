/**
 * One run configuration, two front ends: the page's engine (through its message protocol, with
 * real rollout worker threads) and the CLI (real processes), given the same config and seed,
 * write the same metrics rows for three GRPO steps and three warm-start steps. The GRPO steps
 * switch the token cost on before the third and restart Adam there; both sides do, and a CLI
 * run resumed from its save at the switch restarts it too.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAGE_DEFAULTS, type RunConfig, configToHash, runConfigFlags } from '../src/core/runConfig';
import { OPTIMIZER_FILES, decodeOptimizerFile } from '../src/core/io/optimizerFile';
import { EngineClient } from '../src/runtime/engine/engineClient';
import { nodeEndpoint } from '../src/runtime/node/nodeEndpoint';
import { nodeHost } from '../src/runtime/node/nodeHost';
import type { EngineEvent } from '../src/runtime/engine/messages';
import { serveEngine } from '../src/runtime/engine/serveEngine';
import type { Engine } from '../src/runtime/engine/engine';

function cli(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile('node', ['--import', 'tsx', 'src/cli/main.ts', ...args], { timeout: 180_000 }, (err, _stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
    );
  });
}

// Wall-clock fields differ between any two runs; everything else must be equal.
const TIMING = new Set(['wallSec', 'elapsedSec', 'rolloutTokensPerSec']);
const untimed = (rows: readonly object[]) =>
  rows.map((r) => JSON.parse(JSON.stringify(r, (k, v) => (TIMING.has(k) ? undefined : v))) as Record<string, unknown>);
const readRows = async (path: string) =>
  (await readFile(path, 'utf8'))
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as object);

/** A page config away from the defaults in most fields a run depends on. */
const config: RunConfig = {
  ...PAGE_DEFAULTS,
  preset: 'tiny',
  seed: 11,
  group: 2,
  batch: 3,
  lr: 3e-4,
  beta: 0.01,
  clip: 0.15,
  temperature: 0.9,
  credit: 'broadcast',
  rootTau: 40,
  callRate: 0.05,
  gateMode: 'protocol',
  budgetRate: 0.002,
  tokenRate: 0.002,
  tokenRateAfter: 2,
  restartOptimizer: true,
  budgets: [16, 32, 64],
  maxClones: 3,
  evalEvery: 0,
  workers: 1,
  // One gradient worker on both sides: the CLI's --grad-workers (train) and --workers (sft) share as the page does.
  gradWorkers: 1,
  backend: 'wasm',
  sftLr: 2e-3,
  sftBatchTokens: 512,
  sftMicroTokens: 256,
  sftDelegateFraction: 0.7,
  sftTeacher: 'naive',
  miniBatch: 1,
  dualClip: 3,
};

let client: EngineClient;
let engine: Engine;
const events: EngineEvent[] = [];
let dir: string;
beforeAll(async () => {
  const channel = new MessageChannel();
  ({ engine } = serveEngine(nodeEndpoint(channel.port2), nodeHost));
  client = new EngineClient({ endpoint: nodeEndpoint(channel.port1), onExit: () => () => {}, terminate: () => channel.port1.close() });
  client.on((e) => events.push(e));
  dir = await mkdtemp(join(tmpdir(), 'selfcest-page-cli-'));
});
afterAll(async () => {
  await engine?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('page engine and CLI', () => {
  it('the config differs from the defaults in the fields this test compares', () => {
    expect(configToHash(config).split('&').length).toBeGreaterThanOrEqual(15);
  });

  it('take the same three GRPO steps', async () => {
    // Both start from the shipped tiny warm start, where groups differ and the policy moves.
    await client.request({ kind: 'init', config });
    const init = 'public/checkpoints/warmstart-tiny';
    const files: Record<string, ArrayBuffer> = {};
    for (const f of await readdir(init)) files[f] = new Uint8Array(await readFile(join(init, f))).buffer;
    await client.request({ kind: 'loadFiles', files });
    const page: object[] = [];
    for (let i = 0; i < 3; i++) page.push((await client.request({ kind: 'step' })).metrics);

    const out = join(dir, 'train');
    const r = await cli([
      'train',
      '--init',
      init,
      '--steps',
      '3',
      '--save-every',
      '3',
      ...runConfigFlags(config, 'train'),
      '--grad-workers',
      '1',
      '--out',
      out,
    ]);
    expect(r.code, r.stderr).toBe(0);
    const rows = await readRows(join(out, 'metrics.jsonl'));
    expect(rows).toHaveLength(3);
    expect(untimed(page)).toEqual(untimed(rows));
    expect(untimed(page).some((m) => (m.kl as number) > 0 && (m.gradNorm as number) > 0)).toBe(true); // the policy moved

    // Adam restarted before the third step: its step count is that step's updates, on both sides.
    const updates = rows.map((m) => (m as { updates: number }).updates);
    expect(updates[0] + updates[1]).toBeGreaterThan(0);
    const exported = await client.request({ kind: 'exportWeights', optimizer: true });
    const pageOpt = decodeOptimizerFile(new Uint8Array(exported.files[OPTIMIZER_FILES.grpo]), OPTIMIZER_FILES.grpo);
    const cliOpt = decodeOptimizerFile(new Uint8Array(await readFile(join(out, 'save-000003', 'optimizer.safetensors'))), 'optimizer.safetensors');
    expect(pageOpt.step).toBe(updates[2]);
    expect(cliOpt.step).toBe(updates[2]);

    // Stopped at its save at the switch and resumed: the same rows, and Adam restarted there too.
    const split = join(dir, 'train-split');
    for (const steps of ['2', '3']) {
      const s = await cli([
        'train',
        '--init',
        init,
        '--steps',
        steps,
        '--save-every',
        '2',
        ...runConfigFlags(config, 'train'),
        '--grad-workers',
        '1',
        '--out',
        split,
      ]);
      expect(s.code, s.stderr).toBe(0);
    }
    expect(untimed(await readRows(join(split, 'metrics.jsonl')))).toEqual(untimed(rows));
    const splitOpt = decodeOptimizerFile(new Uint8Array(await readFile(join(split, 'save-000003', 'optimizer.safetensors'))), 'optimizer.safetensors');
    expect(splitOpt.step).toBe(updates[2]);
  }, 400_000);

  it('take the same three warm-start steps', async () => {
    await client.request({ kind: 'init', config });
    events.length = 0;
    await client.request({ kind: 'sft', steps: 3 });
    const page = events.flatMap((e) => (e.kind === 'sftMetrics' ? e.rows : []));

    const out = join(dir, 'sft');
    const r = await cli(['sft', '--steps', '3', '--save-every', '3', ...runConfigFlags(config, 'sft'), '--workers', '1', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    const rows = await readRows(join(out, 'metrics.jsonl'));
    expect(rows).toHaveLength(3);
    expect(untimed(page)).toEqual(untimed(rows));
  }, 300_000);
});
