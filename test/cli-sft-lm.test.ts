/**
 * `sft --model DIR` as a user runs it, on a folder made by `init --family qwen2`: LoRA by default, a
 * few steps, a resume that goes on from the last save, a saved adapter that `rollout --adapter`
 * decodes with and PEFT loads (skipped without torch, transformers and peft), full fine-tuning
 * (`--lora-r 0`) saving the model's own weights; flags of the other path refused by name.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from './cliProcess';
import { pythonWith } from './python/python';

const py = pythonWith('torch', 'transformers', 'peft');
let dir = '';
let model = '';
const small = ['--batch-tokens', '400', '--teacher', 'naive', '--log-every', '1', '--save-every', '2', '--warmup', '0'];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cli-sft-lm-'));
  model = join(dir, 'model');
  const r = await cli(
    'init',
    '--family',
    'qwen2',
    '--layers',
    '2',
    '--hidden',
    '32',
    '--heads',
    '4',
    '--intermediate',
    '48',
    '--max-positions',
    '1024',
    '--out',
    model,
  );
  expect(r.code, r.stderr).toBe(0);
}, 120_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const latest = async (out: string) => join(out, (await readFile(join(out, 'LATEST'), 'utf8')).trim());

describe('sft --model', () => {
  it('trains LoRA adapters, resumes at its last save, and saves an adapter that rollout and PEFT load', async () => {
    const out = join(dir, 'lora');
    const a = await cli('sft', '--model', model, '--out', out, '--steps', '2', ...small);
    expect(a.code, a.stderr).toBe(0);
    expect(a.stdout).toMatch(/new run in .*"training":\{"lora":\{"r":8/);
    expect(a.stdout).toMatch(/step 1\/2 loss \d+\.\d{4} lr /);
    expect(a.stdout).toContain(`done: ${out} at step 2`);
    const b = await cli('sft', '--model', model, '--out', out, '--steps', '4', ...small);
    expect(b.code, b.stderr).toBe(0);
    expect(b.stdout).toContain(`resuming ${out} at step 2/4`);
    expect(b.stdout).toMatch(/step 3\/4 loss/);
    expect(b.stdout).not.toMatch(/step 1\/4/);
    const save = await latest(out);
    expect((await readdir(save)).sort()).toEqual(
      expect.arrayContaining(['adapter_config.json', 'adapter_model.safetensors', 'optimizer.safetensors', 'state.json']),
    );
    const rows = (await readFile(join(out, 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rows.map((r) => r.step)).toEqual([1, 2, 3, 4]);
    expect(rows.every((r) => r.trainedTokens > 0 && r.trainedTokens < r.tokens)).toBe(true);
    const r = await cli('rollout', '--model', model, '--adapter', save, '--root-tokens', '8', '--greedy');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`with the adapter ${save}`);
    if (py.python !== null) {
      const load = spawnSync(
        py.python,
        [
          '-c',
          'import sys\nfrom transformers import AutoModelForCausalLM\nfrom peft import PeftModel\nm = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(sys.argv[1]), sys.argv[2])\nprint(sum(p.numel() for n, p in m.named_parameters() if "lora_" in n))',
          model,
          save,
        ],
        { encoding: 'utf8', timeout: 240_000 },
      );
      expect(load.status, load.stderr).toBe(0);
      expect(Number(load.stdout.trim())).toBeGreaterThan(0);
    }
  }, 400_000);

  it('--lora-r 0 trains every weight and saves them as a model folder', async () => {
    const out = join(dir, 'full');
    const a = await cli('sft', '--model', model, '--out', out, '--steps', '2', '--lora-r', '0', ...small);
    expect(a.code, a.stderr).toBe(0);
    expect(a.stdout).toContain('"training":{"full":true}');
    const r = await cli('rollout', '--model', await latest(out), '--root-tokens', '8', '--greedy');
    expect(r.code, r.stderr).toBe(0);
  }, 400_000);

  it("reads every task of a mix held out (--eval-every) as the toy's warm start does: the first task's keys plain, the others under its name", async () => {
    const out = join(dir, 'mix');
    const args = ['--task', 'arithmetic,multihop', '--eval-every', '2', '--eval-n', '2', '--root-max-tokens', '16', '--budgets', '8'];
    const a = await cli('sft', '--model', model, '--out', out, '--steps', '2', ...small, ...args);
    expect(a.code, a.stderr).toBe(0);
    expect(a.stdout).toMatch(/step 2\/2 loss .* \| eval delegate \d\.\d{3} \(delegating \d\.\d{3}\) mono \d\.\d{3} \| multihop delegate/);
    const rows = (await readFile(join(out, 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>);
    const last = rows[rows.length - 1];
    for (const k of ['delegateAcc', 'monoAcc', 'delegateTokens', 'monoTokens', 'delegationRate']) {
      expect(last[k], k).toBeTypeOf('number');
      expect(last[`multihop.${k}`], k).toBeTypeOf('number');
    }
  }, 400_000);

  it('refuses by name the flags the other path cannot honour, writing nothing', async () => {
    const out = join(dir, 'refused');
    const toy = await cli('sft', '--model', model, '--out', out, '--steps', '1', '--label-smoothing', '0.1', '--preset', 'tiny');
    expect(toy.code).toBe(2);
    expect(toy.stderr).toMatch(/--preset, --label-smoothing: not for a Hugging Face model's warm start/);
    const lora = await cli('sft', '--model', model, '--out', out, '--steps', '1', '--workers', '1');
    expect(lora.code).toBe(2);
    expect(lora.stderr).toContain('--workers: gradient workers rebuild the model from its trained weights: with --lora-r 0');
    const text = await cli('sft', '--out', out, '--steps', '1', '--lora-r', '4', '--weights', 'half');
    expect(text.code).toBe(2);
    expect(text.stderr).toContain('--lora-r, --weights: only with --model');
    await expect(readdir(out)).rejects.toThrow();
  }, 120_000);
});
