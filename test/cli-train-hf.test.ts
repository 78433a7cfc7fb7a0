/**
 * `train --model`, `rollout --model`, `frontier --model`, `eval --model` and `merge-lora` as a user runs them, on a whole Hugging Face
 * folder (a tiny random Qwen2 with a BPE tokenizer and chat template,
 * test/python/hf_tokenizer_fixture.py): a LoRA run saves, resumes and refuses a changed config;
 * its adapter loads in PEFT and, merged here, in transformers to the same logits
 * (test/python/hf_lora_check.py); a full fine-tuning run's save loads in transformers; bad flags
 * exit 2 naming the flag; a Hub model id reads from $HF_ENDPOINT (a local mirror served here) into
 * its cache. Skipped, naming what is missing, without torch, tokenizers,
 * transformers and peft.
 */
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRACE_SCHEMA } from '../src/core/rollout/trace';
import { cli } from './cliProcess';
import { cliRunOf } from '../src/app/runs/cliRun';
import { parseTracesJsonl } from '../src/core/io/traces';
import type { EpisodeTrace } from '../src/core/rollout/trace';
import { pythonWith } from './python/python';
import { bfloat16Folder } from './halfDecoder';

const FIXTURE = fileURLToPath(new URL('./python/hf_tokenizer_fixture.py', import.meta.url));
const CHECK = fileURLToPath(new URL('./python/hf_lora_check.py', import.meta.url));
const py = pythonWith('torch', 'tokenizers', 'transformers', 'peft');
let dir = '';
let model = '';

beforeAll(async () => {
  if (py.python === null) return;
  dir = await mkdtemp(join(tmpdir(), 'train-lm-'));
  model = join(dir, 'model');
  const r = spawnSync(py.python, [FIXTURE, model, 'model'], { encoding: 'utf8', timeout: 240_000 });
  if (r.status !== 0) throw new Error(`hf_tokenizer_fixture.py failed: ${r.stderr || r.error?.message}`);
}, 300_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const small = ['--batch', '2', '--mini-batch', '1', '--group', '2', '--root-max-tokens', '24', '--budgets', '8', '--lr', '0.01'];
/** The CLI with extra environment variables (a Hub mirror, its cache). */
function cliWith(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile('npx', ['tsx', 'src/cli/main.ts', ...args], { env: { ...process.env, ...env }, timeout: 120_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

const lines = async (path: string) => (await readFile(path, 'utf8')).split('\n').filter((l) => l !== '');

describe.skipIf(py.python === null)(`train --model on a Hugging Face folder${py.python === null ? ` (skipped: ${py.why})` : ''}`, () => {
  it('trains LoRA adapters, saves and resumes; PEFT loads the adapter and transformers the merged folder, to the same logits', async () => {
    const out = join(dir, 'lora');
    const first = await cli('train', '--model', model, '--out', out, '--steps', '2', '--save-every', '1', ...small);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^qwen2: [\d,]+ parameters/);
    expect(first.stdout).toContain('step 2/2');
    const resumed = await cli('train', '--model', model, '--out', out, '--steps', '3', ...small);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain(`resuming ${out} at step 2/3`);
    const metrics = (await lines(join(out, 'metrics.jsonl'))).map((l) => JSON.parse(l) as { step: number; updates: number });
    expect(metrics.map((m) => m.step)).toEqual([1, 2, 3]);
    const traces = (await lines(join(out, 'traces.jsonl'))).map((l) => JSON.parse(l) as EpisodeTrace & { step: number });
    expect(traces).toHaveLength(3 * 2 * 2);
    for (const t of traces) {
      // The one trace schema, with each subword's own text.
      expect(t.schema).toBe(TRACE_SCHEMA);
      for (const c of t.contexts) expect(c.pieces).toHaveLength(c.tokens.length);
    }
    // The page's Runs panel opens the run as a CLI run: its metrics, its config and its text episodes as traces the views draw.
    const picked = await Promise.all(
      ['metrics.jsonl', 'run.json', 'traces.jsonl'].map(async (name) => ({ name, text: await readFile(join(out, name), 'utf8') })),
    );
    const { run } = cliRunOf(picked, { id: 'lm', keptAt: 'now' });
    expect(run.metrics.map((m) => m.metrics.step)).toEqual([1, 2, 3]);
    const episodes = parseTracesJsonl(picked[2].text) as (EpisodeTrace & { step: number })[];
    expect(episodes.map((e) => e.step)).toEqual(traces.map((t) => t.step));
    expect(episodes[0].contexts[0].pieces).toEqual(traces[0].contexts[0].pieces);
    expect(run.rollouts?.length).toBeGreaterThan(0);
    const changed = await cli('train', '--model', model, '--out', out, '--steps', '4', ...small, '--lora-r', '4');
    expect(changed.code).not.toBe(0);
    expect(changed.stderr).toMatch(/cannot resume/);
    // Other weights, or another command's run: refused as not this run's (exit 2), not as damaged.
    const full = await cli('train', '--model', model, '--out', out, '--steps', '4', ...small, '--lora-r', '0');
    expect(full.code).toBe(2);
    expect(full.stderr).toContain(`cannot resume ${out}: it trains LoRA adapters, not every weight (--lora-r 0); use a new --out`);
    expect(full.stderr).not.toContain('damaged');
    const toy = await cli('train', '--init', 'public/checkpoints/warmstart-tiny', '--out', out, '--steps', '4');
    expect(toy.code).toBe(2);
    expect(toy.stderr).toContain(`cannot resume ${out}: it trains the Hugging Face model ${model} (--model), not a toy checkpoint`);
    // The save's adapter, with PEFT; merged here, with transformers.
    const save = join(out, (await readFile(join(out, 'LATEST'), 'utf8')).trim());
    expect((await readdir(save)).sort()).toEqual([
      'adapter_config.json',
      'adapter_model.safetensors',
      'metrics.jsonl',
      'optimizer.safetensors',
      'state.json',
      'traces.jsonl',
    ]);
    const merged = join(dir, 'merged');
    const m = await cli('merge-lora', '--model', model, '--adapter', save, '--out', merged);
    expect(m.code, m.stderr).toBe(0);
    const tokens = [[5, 17, 42, 99, 3, 250]];
    const check = spawnSync(py.python as string, [CHECK, model, save, merged, JSON.stringify(tokens)], {
      encoding: 'utf8',
      timeout: 240_000,
      maxBuffer: 64 << 20,
    });
    expect(check.status, check.stderr).toBe(0);
    const { adapter, merged: fromMerged } = JSON.parse(check.stdout) as { adapter: number[][][]; merged: number[][][] };
    const worst = adapter.flat(2).reduce((w, x, i) => Math.max(w, Math.abs(x - fromMerged.flat(2)[i])), 0);
    expect(worst).toBeLessThan(1e-4);
    // The adapter decodes: a rollout with it prints the episode's tree.
    const r = await cli('rollout', '--model', model, '--adapter', save, '--root-tokens', '12', '--greedy');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`with the adapter ${save}`);
    expect(r.stdout).toMatch(/arithmetic seed0 \[delegate\]/);
    expect(r.stdout).toMatch(/truth -?\d+ {2}answer \S+ {2}(correct|wrong)/);
  }, 400_000);

  it('full fine-tuning (--lora-r 0) saves the weights in the model’s own format, which transformers loads', async () => {
    const out = join(dir, 'full');
    const r = await cli('train', '--model', model, '--out', out, '--steps', '1', '--lora-r', '0', ...small);
    expect(r.code, r.stderr).toBe(0);
    const save = join(out, (await readFile(join(out, 'LATEST'), 'utf8')).trim());
    const load = spawnSync(
      py.python as string,
      [
        '-c',
        'import sys, torch\nfrom transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained(sys.argv[1])\nprint(sum(p.numel() for p in m.parameters()))',
        save,
      ],
      { encoding: 'utf8', timeout: 240_000 },
    );
    expect(load.status, load.stderr).toBe(0);
    expect(Number(load.stdout.trim())).toBeGreaterThan(1000);
  }, 400_000);

  it('reads a Hub model id from $HF_ENDPOINT (a local mirror here) into its cache, and then from the cache alone', async () => {
    const requests: string[] = [];
    const server = createServer((req, res) => {
      requests.push(req.url ?? '');
      const m = /^\/tiny\/qwen2\/resolve\/main\/([\w.-]+)$/.exec(req.url ?? '');
      const file = m ? join(model, m[1]) : '';
      if (!m || !existsSync(file)) {
        res.writeHead(404).end('not found');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(file));
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    const { port } = server.address() as AddressInfo;
    const cache = join(dir, 'hub-cache');
    const env = { HF_ENDPOINT: `http://127.0.0.1:${port}`, SELFCEST_HUB_CACHE: cache };
    const args = ['generate', '--prompt', 'Calculate the value of 3*4+5.', '--max-tokens', '6', '--json'];
    try {
      const local = await cli(...args, '--model', model);
      const hub = await cliWith(env, ...args, '--model', 'tiny/qwen2');
      expect(hub.code, hub.stderr).toBe(0);
      expect((JSON.parse(hub.stdout) as { generatedIds: number[] }).generatedIds).toEqual(
        (JSON.parse(local.stdout) as { generatedIds: number[] }).generatedIds,
      );
      expect(requests).toContain('/tiny/qwen2/resolve/main/config.json');
      expect((await readdir(join(cache, 'tiny', 'qwen2'))).sort()).toEqual(
        expect.arrayContaining(['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']),
      );
      const missing = await cliWith(env, ...args, '--model', 'tiny/none');
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain('--model tiny/none: the folder has no config.json');
    } finally {
      await new Promise((ok) => server.close(ok));
    }
    // The mirror is gone: the cache serves the same model.
    const again = await cliWith(env, ...args, '--model', 'tiny/qwen2');
    expect(again.code, again.stderr).toBe(0);
    const notId = await cli(...args, '--model', 'no/such/folder');
    expect(notId.code).toBe(2);
    expect(notId.stderr).toContain('--model no/such/folder: no such folder, and not a Hub model id (owner/name)');
  }, 400_000);

  it('holds a bfloat16 folder 16-bit with --weights half, to the same episode as widened', async () => {
    const bf16 = join(dir, 'bf16');
    await bfloat16Folder(model, bf16);
    const run = (weights: string) => cli('rollout', '--model', bf16, '--weights', weights, '--root-tokens', '12', '--greedy');
    const [half, wide] = [await run('half'), await run('float32')];
    expect(half.code, half.stderr).toBe(0);
    expect(half.stdout).toMatch(/MB as held \(\d+ matrices 16-bit\)/);
    expect(wide.stdout).not.toContain('16-bit');
    const episode = (out: string) => out.split('\n').slice(1).join('\n');
    expect(episode(half.stdout)).toBe(episode(wide.stdout));
    const bad = await run('f16');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--weights');
  }, 400_000);

  it("draws a real model's accuracy–cost frontier, delegating and monolithic, with intervals", async () => {
    const r = await cli('frontier', '--model', model, '--n', '3', '--methods', 'delegate,mono', '--limits', '6,12', '--clone-budget', '8', '--json');
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { points: { method: string; limit: number; n: number; interval: number[]; meanTokens: number }[]; pareto: number[] };
    expect(out.points.map((p) => `${p.method}@${p.limit}`)).toEqual(['delegate@6', 'delegate@12', 'mono@6', 'mono@12']);
    for (const p of out.points) {
      expect(p.n).toBe(3);
      expect(p.interval[0]).toBeLessThanOrEqual(p.interval[1]);
      expect(p.meanTokens).toBeLessThanOrEqual(p.limit + 4 * 3 * 8);
    }
    expect(out.pareto.length).toBeGreaterThan(0);
    // eval reads the same greedy episodes as the frontier's point at that limit.
    const ev = await cli('eval', '--model', model, '--n', '3', '--root-limit', '12', '--clone-budget', '8', '--json');
    expect(ev.code, ev.stderr).toBe(0);
    const e = JSON.parse(ev.stdout) as { model: string; rootLimit: number; n: number; accuracy: number; meanTokens: number; delegationRate: number };
    const point = out.points[1] as unknown as typeof e;
    expect([e.model, e.rootLimit, e.n]).toEqual([model, 12, 3]);
    expect([e.accuracy, e.meanTokens, e.delegationRate]).toEqual([point.accuracy, point.meanTokens, point.delegationRate]);
    const toyOnly = await cli('eval', '--checkpoint', 'public/checkpoints/warmstart-tiny', '--n', '1', '--clone-budget', '8');
    expect(toyOnly.code).toBe(2);
    expect(toyOnly.stderr).toContain('--clone-budget applies to --model');
  }, 400_000);

  it("samples dynamically as the toy's step does: rounds of oversampled prompts, their groups counted", async () => {
    const out = join(dir, 'dynamic');
    const r = await cli('train', '--model', model, '--out', out, '--steps', '1', ...small, '--dynamic-sampling', '--oversample', '2', '--sample-rounds', '2');
    expect(r.code, r.stderr).toBe(0);
    const [row] = (await lines(join(out, 'metrics.jsonl'))).map((l) => JSON.parse(l) as { groupsSampled: number; groupsDropped: number });
    // Each round draws twice the prompts missing (2 a step), until the batch holds groups with a spread or the rounds run out.
    expect(row.groupsSampled).toBeGreaterThanOrEqual(4);
    expect(row.groupsSampled).toBeLessThanOrEqual(8);
    expect(row.groupsSampled - row.groupsDropped).toBeLessThanOrEqual(2);
  }, 400_000);

  it('refuses bad flags naming them, before any work', async () => {
    const targets = await cli('train', '--model', model, '--out', join(dir, 'bad'), '--steps', '1', '--lora-targets', 'q_proj,attn_c', ...small);
    expect(targets.code).toBe(2);
    expect(targets.stderr).toContain('--lora-targets: attn_c is not a linear layer of this model');
    const toyFlag = await cli(
      'train',
      '--model',
      model,
      '--out',
      join(dir, 'bad'),
      '--steps',
      '1',
      '--root-limit-min',
      '10',
      '--root-limit-straddle',
      '0.5',
      ...small,
    );
    expect(toyFlag.code).toBe(2);
    expect(toyFlag.stderr).toContain("--root-limit-straddle: a fresh toy preset, or a limit drawn below the problem's chain counted in the toy's tokens");
    const workers = await cli('train', '--model', model, '--out', join(dir, 'bad'), '--steps', '1', '--workers', '2', ...small);
    expect(workers.code).toBe(2);
    expect(workers.stderr).toContain('--workers: worker threads rebuild the model from its trained weights: with --lora-r 0');
    const lora = await cli('train', '--init', 'public/checkpoints/warmstart-tiny', '--out', join(dir, 'bad'), '--steps', '1', '--lora-r', '4');
    expect(lora.code).toBe(2);
    expect(lora.stderr).toContain('--lora-r: a toy checkpoint trains every weight');
    const neither = await cli('train', '--out', join(dir, 'bad'), '--steps', '1');
    expect(neither.code).toBe(2);
    expect(neither.stderr).toContain('--init (a toy checkpoint) or --model (a Hugging Face model), one of them');
    const both = await cli('rollout', '--model', model, '--checkpoint', model);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--checkpoint and --model: give one');
  }, 400_000);
});
