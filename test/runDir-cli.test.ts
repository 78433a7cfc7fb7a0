/**
 * A run directory as a hostile user leaves it, through the real `sft` command: LATEST removed
 * (and the row views), an optimizer state no run could write, row files emptied or cut off, and a
 * warm start extended to more steps. Nothing is ever deleted that was a save; what cannot resume
 * is refused by name; nothing is committed from a bad state.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from './cliProcess';
import { decodeSafetensors, encodeSafetensors } from '../src/core/io/safetensors';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'selfcest-rundir-cli-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

const SFT = ['sft', '--preset', 'tiny', '--batch-tokens', '256', '--micro-tokens', '256', '--save-every', '2', '--seed', '4'];
const latest = async (dir: string) => (await readFile(join(dir, 'LATEST'), 'utf8')).trim();

/** A fresh sft run of `steps` steps in its own folder. */
async function run(name: string, steps: number): Promise<string> {
  const dir = join(root, name);
  const r = await cli(...SFT, '--steps', String(steps), '--out', dir);
  expect(r.code, r.stderr).toBe(0);
  return dir;
}

describe('run directories through sft', () => {
  it('without LATEST (and without the row views) continues from the save, which is kept', async () => {
    const dir = await run('no-latest', 4);
    await rm(join(dir, 'LATEST'));
    await rm(join(dir, 'metrics.jsonl'));
    const r = await cli(...SFT, '--steps', '6', '--out', dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/had no LATEST \(the name of its committed save\): continuing from save-000004/);
    expect(r.stdout).toMatch(/resuming .* at step 4\/6/);
    expect(await latest(dir)).toBe('save-000006');
    expect(
      (await readFile(join(dir, 'metrics.jsonl'), 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).step),
    ).toEqual([1, 2, 3, 4, 5, 6]);
  }, 120_000);

  it('refuses a first moment of 3e38 by name with exit 2, and commits nothing', async () => {
    const dir = await run('absurd', 2);
    const file = join(dir, 'save-000002', 'optimizer.safetensors');
    const opt = decodeSafetensors(new Uint8Array(await readFile(file)));
    const tensors = [...opt.tensors].map(([name, t]) => ({
      name,
      shape: t.shape,
      data: name === 'm.transformer.h.0.mlp.c_fc.weight' ? t.data.map((x, i) => (i === 7 ? 3e38 : x)) : t.data,
    }));
    await writeFile(file, encodeSafetensors(tensors, opt.metadata));
    const before = (await readdir(dir)).sort();
    const r = await cli(...SFT, '--steps', '4', '--out', dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /save-000002\/optimizer\.safetensors: moment tensor m\.transformer\.h\.0\.mlp\.c_fc\.weight holds 3\.\d+e\+38 at index 7, past what \d+ optimizer steps can write/,
    );
    expect(await latest(dir)).toBe('save-000002');
    expect((await readdir(dir)).sort()).toEqual(before);
  }, 120_000);

  it('refuses row files that do not match the save, naming the file and line', async () => {
    const dir = await run('rows', 2);
    const metrics = join(dir, 'save-000002', 'metrics.jsonl');
    const good = await readFile(metrics, 'utf8');
    const cases: [string, RegExp][] = [
      ['', /metrics\.jsonl ends at step 0, the save is at step 2: rows are missing/],
      ['garbage\n', /metrics\.jsonl: line 1 is not JSON/],
      [good.slice(0, -5), /metrics\.jsonl: line 2 has no line end \(a cut-off write\)/],
      [good.split('\n')[0] + '\n', /metrics\.jsonl ends at step 1, the save is at step 2/],
      [good + good.split('\n')[0] + '\n', /metrics\.jsonl: line 3: step 1 where 3 comes next/],
    ];
    for (const [text, message] of cases) {
      await writeFile(metrics, text);
      const r = await cli(...SFT, '--steps', '4', '--out', dir);
      expect(r.code, JSON.stringify(text)).not.toBe(0);
      expect(r.stderr, JSON.stringify(text)).toMatch(message);
      expect(r.stderr).toMatch(/the committed save .*save-000002 is damaged/);
      expect(await latest(dir)).toBe('save-000002');
    }
    await writeFile(metrics, good);
    expect((await cli(...SFT, '--steps', '4', '--out', dir)).code).toBe(0);
  }, 180_000);

  it('extends a warm start to more steps (its warm-up is the stored one), and refuses a changed --warmup', async () => {
    const dir = await run('extend', 20);
    const r = await cli(...SFT, '--steps', '40', '--out', dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/resuming .* at step 20\/40 \(extended from 20 steps: the learning-rate schedule now ends at step 40\)/);
    expect(await latest(dir)).toBe('save-000040');
    const state = JSON.parse(await readFile(join(dir, 'save-000040', 'state.json'), 'utf8'));
    expect(state.config.warmup).toBe(2);
    const changed = await cli(...SFT, '--steps', '60', '--warmup', '5', '--out', dir);
    expect(changed.code).not.toBe(0);
    expect(changed.stderr).toMatch(/cannot resume: warmup was 2 in the saved run, now 5/);
    expect(existsSync(join(dir, 'save-000040'))).toBe(true);
  }, 180_000);
});
