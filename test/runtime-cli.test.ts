/** `--workers N` in the CLI: the same numbers as decoding in the CLI's own thread. */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);

async function cli(...args: string[]): Promise<string> {
  const { stdout } = await run('npx', ['tsx', 'src/cli/main.ts', ...args], { cwd: process.cwd(), timeout: 120_000 });
  return stdout;
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'selfcest-runtime-cli-'));
  await cli('init', '--preset', 'tiny', '--seed', '5', '--out', join(dir, 'tiny'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('cli --workers', () => {
  it('eval with 2 rollout worker threads prints what in-process eval prints', async () => {
    const args = ['eval', '--checkpoint', join(dir, 'tiny'), '--n', '12', '--temperature', '1', '--json'];
    const [local, pooled] = await Promise.all([cli(...args, '--workers', '0'), cli(...args, '--workers', '2')]);
    const a = JSON.parse(local) as { n: number; meanTokens: number };
    expect(a.n).toBe(12);
    expect(a.meanTokens).toBeGreaterThan(1);
    expect(JSON.parse(pooled)).toEqual(a);
  });

  it('train with 2 rollout worker threads writes the same metrics as in-process training', async () => {
    const steps = async (workers: string) => {
      const out = join(dir, `run-${workers}`);
      await cli(
        'train',
        '--init',
        join(dir, 'tiny'),
        '--steps',
        '2',
        '--batch',
        '2',
        '--mini-batch',
        '2',
        '--group',
        '2',
        '--seed',
        '4',
        '--out',
        out,
        '--workers',
        workers,
      );
      const rows = (await readFile(join(out, 'metrics.jsonl'), 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      return rows.map(({ wallSec: _w, rolloutTokensPerSec: _r, ...rest }) => rest);
    };
    const [local, pooled] = await Promise.all([steps('0'), steps('2')]);
    expect(local).toHaveLength(2);
    expect(pooled).toEqual(local);
  });
});
