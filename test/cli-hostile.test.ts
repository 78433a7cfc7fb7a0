/**
 * The CLI on a hostile or broken model folder (issue 49, test/tinyHfFolder.ts): every variant exits
 * 2 within 5 s with a message naming the flag, the folder, the file and the field; a NaN adapter or
 * NaN weights leave no merged folder behind; a template that breaks only on a later chat also
 * exits 2, naming its file. Real processes, as a user runs them.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOSTILE_FOLDERS, TINY_TEMPLATE, writeTinyAdapter, writeTinyHfFolder } from './tinyHfFolder';

let root = '';
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'cli-hostile-'));
  await writeTinyHfFolder(join(root, 'good'));
  await writeTinyAdapter(join(root, 'nan-adapter'), true);
  await mkdir(join(root, 'empty'));
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

/** The CLI as a process: exit code, stderr and wall time. */
function cli(...args: string[]): Promise<{ code: number; stderr: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    execFile('node', ['--import', 'tsx', 'src/cli/main.ts', ...args], { timeout: 60_000 }, (err, _stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr, ms: performance.now() - t0 }),
    );
  });
}

/**
 * A refusal's own time: its process's wall time less that of a process refused at once (a folder
 * without config.json) started right before it, so that the start-up of Node and tsx, which a
 * loaded test machine stretches, is not counted against the 5 s.
 */
async function refusal(...args: string[]): Promise<{ code: number; stderr: string; ms: number }> {
  const control = await cli('generate', '--model', join(root, 'empty'), '--prompt', 'hi');
  expect(control.stderr).toContain('config.json');
  const r = await cli(...args);
  return { ...r, ms: r.ms - control.ms };
}

describe('generate on a hostile or broken folder', () => {
  for (const [i, folder] of HOSTILE_FOLDERS.entries()) {
    it(`exits 2 within 5 s naming the file: ${folder.name} (case ${folder.issueCase})`, async () => {
      const dir = join(root, `hostile-${i}`);
      await writeTinyHfFolder(dir, folder.change);
      const r = await refusal('generate', '--model', dir, '--prompt', 'hi', '--max-tokens', '2');
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(`error: --model ${dir}: `);
      expect(r.stderr).toMatch(folder.refusal);
      expect(r.ms).toBeLessThan(5000);
    }, 30_000);
  }

  it('exits 2 naming what is missing when the folder has no chat template', async () => {
    const dir = join(root, 'no-template');
    await writeTinyHfFolder(dir, (p) => void delete p.tokenizerConfig.chat_template);
    const r = await cli('generate', '--model', dir, '--prompt', 'hi');
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(`--model ${dir}: the tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja)`);
  }, 30_000);

  it('exits 2 naming the file when the template breaks only on a longer chat than the load tried', async () => {
    const dir = join(root, 'late-raise');
    await writeTinyHfFolder(dir, (p) => void (p.jinja = `{% if messages|length > 1 %}{{ raise_exception('one message only') }}{% endif %}${TINY_TEMPLATE}`));
    const r = await cli('generate', '--model', dir, '--prompt', 'hi', '--max-tokens', '2');
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain('error: chat_template.jinja: cannot be rendered (the template raised an exception: one message only)');
  }, 30_000);
});

describe('adapters and merges of non-finite weights', () => {
  it('merge-lora refuses a NaN adapter and NaN weights, writing no folder', async () => {
    const out = join(root, 'merged');
    const r = await refusal('merge-lora', '--model', join(root, 'good'), '--adapter', join(root, 'nan-adapter'), '--out', out);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(
      /--adapter .*nan-adapter: adapter_model\.safetensors: base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_B\.weight holds 32 values that are not finite/,
    );
    expect(r.ms).toBeLessThan(5000);
    expect(existsSync(out)).toBe(false);
    const nanModel = join(root, 'nan-model');
    await writeTinyHfFolder(nanModel, HOSTILE_FOLDERS.find((f) => f.issueCase === 5)?.change);
    await writeTinyAdapter(join(root, 'adapter'));
    const m = await cli('merge-lora', '--model', nanModel, '--adapter', join(root, 'adapter'), '--out', out);
    expect(m.code, m.stderr).toBe(2);
    expect(m.stderr).toContain(`--model ${nanModel}: model.safetensors: model.layers.0.self_attn.q_proj.weight holds 64 values that are not finite`);
    expect(existsSync(out)).toBe(false);
    // The finite adapter merges.
    const ok = await cli('merge-lora', '--model', join(root, 'good'), '--adapter', join(root, 'adapter'), '--out', out);
    expect(ok.code, ok.stderr).toBe(0);
    expect(existsSync(join(out, 'model.safetensors'))).toBe(true);
  }, 60_000);

  it('rollout --adapter refuses a NaN adapter', async () => {
    const r = await refusal('rollout', '--model', join(root, 'good'), '--adapter', join(root, 'nan-adapter'), '--greedy', '--root-tokens', '4');
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/--adapter .*nan-adapter: adapter_model\.safetensors: .*q_proj\.lora_B\.weight holds 32 values that are not finite/);
    expect(r.ms).toBeLessThan(5000);
  }, 30_000);
});
