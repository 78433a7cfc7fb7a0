/**
 * Run directories survive SIGKILL at every point of a save: real `sft` and `train` processes
 * are killed before, between and after each file operation of their first and second saves
 * (src/cli/runDir.ts's test hook), resumed by the same command, and must end with the same
 * weights, optimizer state, metrics and traces as an uninterrupted run.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { build } from 'esbuild';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Result {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/**
 * The CLI as one bundled module (its packages left to node_modules), built once here: each of
 * the ~160 processes then starts in about half the time of transpiling the sources through tsx
 * again. The code run is the CLI's own; only the loading differs (these commands start no workers).
 */
let bundle = '';

function cli(args: string[], env: Record<string, string> = {}): Promise<Result> {
  return new Promise((resolve) => {
    execFile('node', [bundle, ...args], { env: { ...process.env, ...env }, timeout: 120_000 }, (err, stdout, stderr) => {
      const e = err as (Error & { code?: number; signal?: string }) | null;
      resolve({ code: e ? (typeof e.code === 'number' ? e.code : null) : 0, signal: e?.signal ?? null, stdout, stderr });
    });
  });
}

/** Runs `jobs` at most `limit` at a time. */
async function pool<T>(jobs: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]();
      }
    }),
  );
  return out;
}

// Timing fields differ between processes; everything else must be equal.
const TIMING = new Set(['wallSec', 'elapsedSec', 'rolloutTokensPerSec', 'savedAt']);
const rows = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.stringify(JSON.parse(l), (k, v) => (TIMING.has(k) ? undefined : v)));

async function finalState(dir: string, traces: boolean) {
  const save = (await readFile(join(dir, 'LATEST'), 'utf8')).trim();
  return {
    entries: (await readdir(dir)).sort(),
    save,
    saveEntries: (await readdir(join(dir, save))).sort(),
    weights: Buffer.from(await readFile(join(dir, save, 'model.safetensors'))).toString('base64'),
    optimizer: Buffer.from(await readFile(join(dir, save, 'optimizer.safetensors'))).toString('base64'),
    metrics: rows(await readFile(join(dir, 'metrics.jsonl'), 'utf8')),
    traces: traces ? rows(await readFile(join(dir, 'traces.jsonl'), 'utf8')) : [],
  };
}

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'selfcest-crash-'));
  // Under node_modules so that the bundle's package imports resolve as the sources' do.
  const dir = join('node_modules', '.cache', 'selfcest-crash');
  await mkdir(dir, { recursive: true });
  bundle = join(dir, `cli-${process.pid}.mjs`);
  await build({ entryPoints: ['src/cli/main.ts'], bundle: true, platform: 'node', format: 'esm', packages: 'external', outfile: bundle, logLevel: 'warning' });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
  if (bundle) await rm(bundle, { force: true });
});

const COMMANDS = {
  sft: ['sft', '--preset', 'tiny', '--steps', '3', '--batch-tokens', '256', '--micro-tokens', '256', '--save-every', '1', '--seed', '4'],
  train: [
    'train',
    '--init',
    'public/checkpoints/warmstart-tiny',
    '--steps',
    '3',
    '--group',
    '2',
    '--batch',
    '2',
    '--mini-batch',
    '2',
    '--save-every',
    '1',
    '--seed',
    '4',
  ],
};

describe.each(Object.keys(COMMANDS) as (keyof typeof COMMANDS)[])('%s killed during a save', (kind) => {
  it('resumes to the bytes of an uninterrupted run from every kill point of the first and second save', async () => {
    const args = COMMANDS[kind];
    const refDir = join(root, `${kind}-ref`);
    const ref = await cli([...args, '--out', refDir], { SELFCEST_TEST_SAVE_POINTS: '1' });
    expect(ref.code, ref.stderr).toBe(0);
    const points = [...ref.stderr.matchAll(/^save-point ([12]:\d+) (.*)$/gm)].map((m) => ({ at: m[1], label: m[2] }));
    // mkdir, each file written, the rename, the commit, the views, the removal, done
    expect(points.filter((p) => p.at.startsWith('2:')).length).toBeGreaterThanOrEqual(kind === 'train' ? 18 : 15);
    const expected = await finalState(refDir, kind === 'train');
    expect(expected.entries).toEqual(
      kind === 'train'
        ? ['LATEST', 'LOCK', 'metrics.jsonl', 'run.json', 'save-000003', 'traces.jsonl']
        : ['LATEST', 'LOCK', 'metrics.jsonl', 'run.json', 'save-000003'],
    );
    expect(expected.metrics.length).toBe(3);

    const outcomes = await pool(
      points.map(({ at, label }) => async () => {
        const dir = join(root, `${kind}-${at.replace(':', '-')}`);
        const killed = await cli([...args, '--out', dir], { SELFCEST_TEST_KILL_AT: at });
        const resumed = await cli([...args, '--out', dir]);
        return { at, label, killed, resumed, final: resumed.code === 0 ? await finalState(dir, kind === 'train') : null };
      }),
      2,
    );
    for (const o of outcomes) {
      const where = `killed at ${o.at} (${o.label})`;
      expect(o.killed.signal, `${where}: ${o.killed.stderr}`).toBe('SIGKILL');
      expect(o.resumed.code, `${where}, resume: ${o.resumed.stderr}`).toBe(0);
      expect(o.final, where).toEqual(expected);
    }
  }, 900_000);
});
