/**
 * `train --model --lora-r 0 --grad-workers 1 [--workers 1]` as a user runs it: GRPO steps of a
 * Hugging Face folder made by `init --family qwen2`, its updates shared with a gradient worker
 * thread that rebuilds the model (and the KL reference) from their weights, and its rollouts in a
 * rollout worker thread that rebuilds it too, give the run of one thread: the same rollouts, the
 * same reward, the same loss and gradient norm within float summation order. With LoRA the flags
 * are refused by name.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from './cliProcess';

let dir = '';
let model = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'grad-workers-hf-'));
  model = join(dir, 'model');
  const r = await cli(
    'init',
    '--family',
    'qwen2',
    '--layers',
    '1',
    '--hidden',
    '32',
    '--heads',
    '2',
    '--kv-heads',
    '1',
    '--intermediate',
    '48',
    '--max-positions',
    '512',
    '--out',
    model,
  );
  expect(r.code, r.stderr).toBe(0);
}, 120_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const rows = async (out: string) =>
  (await readFile(join(out, 'metrics.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, number>);

describe('train --model with gradient workers', () => {
  it('gives the run of one thread (every weight trained, KL on), with the rollouts in a worker thread too', async () => {
    const args = [
      '--model',
      model,
      '--lora-r',
      '0',
      '--steps',
      '2',
      '--batch',
      '2',
      '--group',
      '2',
      '--mini-batch',
      '1',
      '--root-max-tokens',
      '12',
      '--budgets',
      '8',
    ];
    const more = ['--lr', '0.01', '--beta', '0.01'];
    const [one, two, three] = await Promise.all([
      cli('train', ...args, ...more, '--out', join(dir, 'one')),
      cli('train', ...args, ...more, '--grad-workers', '1', '--out', join(dir, 'two')),
      cli('train', ...args, ...more, '--workers', '1', '--grad-workers', '1', '--out', join(dir, 'three')),
    ]);
    for (const r of [one, two, three]) expect(r.code, r.stderr).toBe(0);
    // The workers took their shares: none stopped (a stopped one's share is computed in the main thread, with the same numbers).
    for (const r of [two, three]) expect(r.stderr).not.toContain('gradient worker');
    const a = await rows(join(dir, 'one'));
    for (const name of ['two', 'three']) {
      const b = await rows(join(dir, name));
      expect(b.length).toBe(2);
      a.forEach((r, i) => {
        for (const k of ['meanReward', 'meanTotalTokens', 'updates', 'trainedTokens']) expect(b[i][k], `${name} ${k}`).toBe(r[k]);
        for (const k of ['loss', 'gradNorm', 'approxKl', 'kl']) expect(b[i][k], `${name} ${k}`).toBeCloseTo(r[k], 5);
      });
    }
  }, 300_000);

  it('eval and frontier read the same episodes with the decoding in worker threads', async () => {
    const args = ['--model', model, '--n', '4', '--clone-budget', '8', '--json'];
    const [a, b, c, d] = await Promise.all([
      cli('eval', ...args, '--root-limit', '12'),
      cli('eval', ...args, '--root-limit', '12', '--workers', '2'),
      cli('frontier', ...args, '--limits', '8,12', '--methods', 'delegate,mono'),
      cli('frontier', ...args, '--limits', '8,12', '--methods', 'delegate,mono', '--workers', '2'),
    ]);
    for (const r of [a, b, c, d]) expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(b.stdout)).toEqual(JSON.parse(a.stdout));
    expect(JSON.parse(d.stdout)).toEqual(JSON.parse(c.stdout));
  }, 300_000);

  it('tells the root its limit where the run draws one: train, sft and eval with --model', async () => {
    const out = join(dir, 'told');
    const r = await cli(
      'train',
      '--model',
      model,
      '--lora-r',
      '0',
      '--steps',
      '1',
      '--batch',
      '2',
      '--mini-batch',
      '2',
      '--group',
      '2',
      '--root-limit-min',
      '8',
      '--root-max-tokens',
      '16',
      '--budgets',
      '8',
      '--out',
      out,
    );
    expect(r.code, r.stderr).toBe(0);
    const traces = (await readFile(join(out, 'traces.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { contexts: { pieces: string[]; generatedTokens: number }[] });
    expect(traces.length).toBe(4);
    for (const t of traces) {
      // The short prompt set: `#L ` before the problem.
      const m = /user\n#(\d+) /.exec(t.contexts[0].pieces.join(''));
      expect(m).not.toBeNull();
      const limit = Number(m![1]);
      expect(limit).toBeGreaterThanOrEqual(8);
      expect(limit).toBeLessThanOrEqual(16);
      expect(t.contexts[0].generatedTokens).toBeLessThanOrEqual(limit);
    }
    const sft = await cli(
      'sft',
      '--model',
      model,
      '--lora-r',
      '0',
      '--steps',
      '1',
      '--batch-tokens',
      '512',
      '--root-limit-min',
      '20',
      '--out',
      join(dir, 'told-sft'),
    );
    expect(sft.code, sft.stderr).toBe(0);
    expect(await readFile(join(dir, 'told-sft', 'run.json'), 'utf8')).toContain('"rootLimits": {\n   "min": 20,\n   "max": 256\n  }');
    expect(sft.stdout).not.toContain('warning');
    // A limit past the window is said before the run (textFit), not found out in it.
    const wide = await cli(
      'sft',
      '--model',
      model,
      '--lora-r',
      '0',
      '--steps',
      '1',
      '--batch-tokens',
      '256',
      '--root-max-tokens',
      '500',
      '--out',
      join(dir, 'wide'),
    );
    expect(wide.code, wide.stderr).toBe(0);
    expect(wide.stdout).toMatch(
      /warning \(arithmetic\): a root's prompt of up to \d+ tokens, its limit of 500 and up to \d+ tokens of tool responses make \d+: past the model's 512-token window/,
    );
    const ev = await cli('eval', '--model', model, '--n', '2', '--root-limit', '12', '--clone-budget', '8', '--limit-in-prompt', 'yes', '--json');
    expect(ev.code, ev.stderr).toBe(0);
    expect(JSON.parse(ev.stdout).limitInPrompt).toBe(true);
  }, 300_000);

  it('refuses worker threads with LoRA adapters, naming the flags', async () => {
    const r = await cli('train', '--model', model, '--steps', '1', '--workers', '1', '--grad-workers', '1', '--out', join(dir, 'lora'));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--workers, --grad-workers: worker threads rebuild the model from its trained weights');
  }, 120_000);
});
