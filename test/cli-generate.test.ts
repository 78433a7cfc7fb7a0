/**
 * `generate` on a whole Hugging Face folder (a tiny random Qwen2 with a BPE tokenizer and chat
 * template, test/python/hf_tokenizer_fixture.py): the prompt ids equal transformers'
 * apply_chat_template and the greedy continuation equals transformers' generate
 * (test/python/hf_generate_check.py); a folder that is not a model is refused naming what it lacks.
 * Skipped, naming what is missing, without torch, tokenizers and transformers.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pythonWith } from './python/python';

const FIXTURE = fileURLToPath(new URL('./python/hf_tokenizer_fixture.py', import.meta.url));
const CHECK = fileURLToPath(new URL('./python/hf_generate_check.py', import.meta.url));
const py = pythonWith('torch', 'tokenizers', 'transformers');
let dir = '';

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('node', ['--import', 'tsx', 'src/cli/main.ts', ...args], { timeout: 180_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  if (py.python === null) return;
  dir = await mkdtemp(join(tmpdir(), 'hf-generate-'));
  const r = spawnSync(py.python, [FIXTURE, dir, 'model'], { encoding: 'utf8', timeout: 240_000 });
  if (r.status !== 0) throw new Error(`hf_tokenizer_fixture.py failed: ${r.stderr || r.error?.message}`);
}, 300_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(py.python === null)(`generate on a Hugging Face folder${py.python === null ? ` (skipped: ${py.why})` : ''}`, () => {
  it('prompts with the chat template and decodes greedily as transformers does', async () => {
    const r = await cli(['generate', '--model', dir, '--prompt', 'Calculate the value of 3*4+5.', '--max-tokens', '12', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const ours = JSON.parse(r.stdout) as {
      messages: object[];
      promptIds: number[];
      generatedIds: number[];
      model: { family: string; parameters: number };
      toolCalls: unknown[];
    };
    expect(ours.model.family).toBe('qwen2');
    expect(ours.generatedIds).toHaveLength(12);
    const check = spawnSync(py.python as string, [CHECK, dir, JSON.stringify(ours.messages), '12'], { encoding: 'utf8', timeout: 240_000 });
    expect(check.status, check.stderr).toBe(0);
    const theirs = JSON.parse(check.stdout) as { promptIds: number[]; generatedIds: number[] };
    expect(ours.promptIds).toEqual(theirs.promptIds);
    expect(ours.generatedIds).toEqual(theirs.generatedIds);
    // Not one token repeated: the comparison has something to compare.
    expect(new Set(ours.generatedIds).size).toBeGreaterThan(3);
    const text = await cli(['generate', '--model', dir, '--prompt', 'Calculate the value of 3*4+5.', '--max-tokens', '4']);
    expect(text.stdout).toMatch(/^qwen2: [\d,]+ parameters, [\d.]+ MB as float32, loaded in \d+ ms/);
    expect(text.stdout).toContain('tool calls: 0 (0 repaired, 0 dropped)');
  });
});

describe('generate refuses what is not a model', () => {
  it('names the folder and what it lacks, and an empty prompt', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'hf-empty-'));
    try {
      const r = await cli(['generate', '--model', empty, '--prompt', 'hi']);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`--model ${empty}: the folder has no config.json`);
      const p = await cli(['generate', '--model', empty, '--prompt', '  ']);
      expect(p.code).toBe(2);
      expect(p.stderr).toContain('--prompt is empty');
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});
