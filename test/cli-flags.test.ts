/** Flags of the run commands as a user writes them: real processes, what they record, exit codes. */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

function cli(args: string[], cwd = process.cwd()): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('node', ['--import', TSX, join(process.cwd(), 'src/cli/main.ts'), ...args], { cwd, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

// The loader by path, so that a process started in another folder finds it.
const TSX = pathToFileURL(join(process.cwd(), 'node_modules/tsx/dist/loader.mjs')).href;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'selfcest-flags-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const TRAIN = ['train', '--init', 'public/checkpoints/warmstart-tiny', '--steps', '1'];
const SMALL = ['--group', '2', '--batch', '2', '--mini-batch', '2'];
const stateOf = async (out: string) =>
  JSON.parse(await readFile(join(out, 'save-000001', 'state.json'), 'utf8')) as { config: { advantage: { gating: boolean; gateRoots: boolean } } };

describe('run command flags', () => {
  it('--flag=false, --no-flag and --flag all mean what they say, in the saved run', async () => {
    const cases = [
      { args: ['--gating=false'], gating: false },
      { args: ['--no-gating', '--gate-roots=true'], gating: false, gateRoots: true },
      { args: ['--gating'], gating: true },
    ];
    for (const [i, c] of cases.entries()) {
      const out = join(dir, `g${i}`);
      const r = await cli([...TRAIN, ...SMALL, ...c.args, '--out', out]);
      expect(r.code, r.stderr).toBe(0);
      const { advantage } = (await stateOf(out)).config;
      expect(advantage.gating, c.args.join(' ')).toBe(c.gating);
      expect(advantage.gateRoots).toBe(c.gateRoots ?? false);
    }
  });

  it('every bad value exits 2 naming the flag and its range, before any work', async () => {
    const cases: [string[], RegExp][] = [
      [['--lr', '0'], /--lr must be a number in \[1e-7, 0\.1\] \(got 0\)/],
      [['--clip', '5'], /--clip must be a number in \[0\.01, 0\.99\] \(got 5\)/],
      [['--group', '65'], /--group must be an integer in \[2, 64\] \(got 65\)/],
      [['--temperature', '0'], /--temperature must be a number in \[0\.05, 5\] \(got 0\)/],
      [['--gating=maybe'], /--gating is a switch/],
      [['--seed', '-3'], /--seed must be an integer in \[0, 2\^53 − 1/],
      [['--budgets', '16,48'], /--budgets must be a non-empty subset of 8, 16, 32, 64, 128/],
      [['--options', '{"maxValue":0}'], /--options: .*maxValue/],
      [['--options', '{"bogus":1}'], /--options: arithmetic has no option bogus/],
      [['--task', 'arithmetic:0,multihop'], /--task: the weight of arithmetic must be a positive number/],
      [['--lr', 'abc'], /--lr must be a number in \[1e-7, 0\.1\] \(got "abc"\)/],
      [['--mini-batch', '3'], /--mini-batch must divide --batch = 16 \(got 3\)/],
      [
        ['--restart-optimizer', '--token-rate-after', '0'],
        /--restart-optimizer restarts Adam at the step the token cost starts, so it needs --token-rate-after > 0 \(got 0\)/,
      ],
      [['--constructor', '5'], /unknown flag --constructor/],
    ];
    for (const [args, message] of cases) {
      const out = join(dir, 'never');
      const r = await cli([...TRAIN, ...args, '--out', out]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
      expect(existsSync(join(out, 'metrics.jsonl')), args.join(' ')).toBe(false);
    }
    const noInit = await cli(['train', '--init', join(dir, 'nope'), '--steps', '1', '--out', join(dir, 'never')]);
    expect(noInit.code).toBe(2);
    expect(noInit.stderr).toMatch(/--init ".*nope" does not exist/);
    const sft = await cli(['sft', '--steps', '1', '--lr', '2', '--out', join(dir, 'never')]);
    expect(sft.code).toBe(2);
    expect(sft.stderr).toMatch(/--lr must be a number in \[1e-7, 0\.1\] \(got 2\)/);
  });

  it('refuses bad counts, texts and checkpoints with exit 2, naming the flag', async () => {
    const ckpt = 'public/checkpoints/warmstart-tiny';
    const notCkpt = join(dir, 'not-a-checkpoint');
    await import('node:fs/promises').then((fs) => fs.mkdir(notCkpt, { recursive: true }));
    await writeFile(join(notCkpt, 'config.json'), '{}');
    const cases: [string[], RegExp][] = [
      [['eval', '--checkpoint', ckpt, '--n', '1e12'], /--n must be in \[1, 100000\] \(got 1000000000000\)/],
      [['eval', '--checkpoint', ckpt, '--n', '0x10'], /--n must be an integer \(got "0x10"\)/],
      [['logits', '--checkpoint', ckpt, '--text', ''], /--text is empty/],
      [['logits', '--checkpoint', ckpt, '--text', 'HELLO'], /--text "HELLO": text contains "H", which is not in the vocabulary/],
      [['logits', '--checkpoint', ckpt, '--text', '<bogus>1'], /--text "<bogus>1": text contains "<"/],
      [['logits', '--checkpoint', ckpt, '--text', '1+'.repeat(150)], /--text has 300 tokens; the model holds at most \d+/],
      [['train', '--init', notCkpt, '--steps', '1', '--out', join(dir, 'never')], /--init .*not-a-checkpoint is not a checkpoint this model can load: /],
      [['sft', '--init', notCkpt, '--steps', '1', '--out', join(dir, 'never')], /--init .*not-a-checkpoint is not a checkpoint this model can load: /],
      [[...TRAIN, '--budgets', '', '--out', join(dir, 'never')], /--budgets must be a non-empty subset of [\d, ]+ \(got \[\]\)/],
      [[...TRAIN, '--budgets', '8,x', '--out', join(dir, 'never')], /--budgets must be a non-empty subset of [\d, ]+ \(got \[8,"NaN"\]\)/],
      [[...TRAIN, '--seed', '0x10', '--out', join(dir, 'never')], /--seed must be an integer in \[0, 2\^53/],
    ];
    for (const [args, message] of cases) {
      const r = await cli(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
    expect(existsSync(join(dir, 'never', 'LATEST'))).toBe(false);
  }, 180_000);

  it("a warm start told its limit (--root-limit-min) records it, and eval tells its root the limit (auto), not an older checkpoint's", async () => {
    const out = join(dir, 'limit-sft');
    const r = await cli([
      'sft',
      '--preset',
      'tiny',
      '--steps',
      '2',
      '--batch-tokens',
      '256',
      '--micro-tokens',
      '256',
      '--teacher',
      'naive',
      '--root-limit-min',
      '32',
      '--root-max-tokens',
      '96',
      '--out',
      out,
    ]);
    expect(r.code, r.stderr).toBe(0);
    const state = JSON.parse(await readFile(join(out, 'save-000002', 'state.json'), 'utf8'));
    expect(state.config.rootLimits).toEqual({ min: 32, max: 96 });
    const evalOf = async (ckpt: string, ...more: string[]) => {
      const e = await cli(['eval', '--checkpoint', ckpt, '--n', '2', '--root-limit', '48', '--json', ...more]);
      expect(e.code, e.stderr).toBe(0);
      return JSON.parse(e.stdout.trim().split('\n').at(-1)!) as { limitInPrompt: boolean };
    };
    expect((await evalOf(out)).limitInPrompt).toBe(true);
    expect((await evalOf(out, '--limit-in-prompt', 'no')).limitInPrompt).toBe(false);
    expect((await evalOf('public/checkpoints/warmstart-tiny')).limitInPrompt).toBe(false);
    const bad = await cli(['sft', '--steps', '1', '--root-limit-min', '100', '--root-max-tokens', '96', '--out', join(dir, 'never')]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--root-limit-min must be at most --root-max-tokens = 96 \(got 100\)/);
    const straddle = await cli([
      'train',
      '--init',
      'public/checkpoints/warmstart-tiny',
      '--steps',
      '1',
      '--root-limit-straddle',
      '0.5',
      '--out',
      join(dir, 'never'),
    ]);
    expect(straddle.code).toBe(2);
    expect(straddle.stderr).toMatch(/--root-limit-straddle needs a root limit drawn per prompt \(--root-limit-min\)/);
  }, 180_000);

  it('checks output directories before any work', async () => {
    const cwd = await mkdtemp(join(dir, 'cwd-'));
    const empty = await cli([...TRAIN.map((a) => (a.startsWith('public/') ? join(process.cwd(), a) : a)), '--out', ''], cwd);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/--out must name a directory/);
    expect(existsSync(join(cwd, 'metrics.jsonl'))).toBe(false);
    const file = join(dir, 'a-file');
    await writeFile(file, 'x');
    const t0 = Date.now();
    const report = await cli(['report', '--out', file, '--n', '500']);
    expect(report.code).toBe(2);
    expect(report.stderr).toMatch(/--out .*a-file exists and is not a directory/);
    expect(Date.now() - t0).toBeLessThan(30_000); // refused before evaluating anything
  });

  it('eval and frontier take task options as JSON, the long-context multihop setting among them', async () => {
    const ckpt = 'public/checkpoints/warmstart-tiny';
    const options = '{"chunks":6,"perChunk":4,"filler":24}';
    const ev = await cli(['eval', '--checkpoint', ckpt, '--task', 'multihop', '--options', options, '--n', '2', '--json']);
    expect(ev.code, ev.stderr).toBe(0);
    const r = JSON.parse(ev.stdout) as { n: number; episodes?: unknown };
    expect(r.n).toBe(2);
    // The monolithic prompt of 6 × 6 assignments does not fit the model's 256 positions.
    const mono = await cli(['eval', '--checkpoint', ckpt, '--task', 'multihop', '--options', options, '--n', '2', '--method', 'mono', '--json']);
    expect(mono.code, mono.stderr).toBe(0);
    expect(mono.stdout).toMatch(/root_over_max/);
    const fr = await cli([
      'frontier',
      '--checkpoint',
      ckpt,
      '--task',
      'multihop',
      '--options',
      '{"chunks":2,"perChunk":1,"hops":1}',
      '--n',
      '2',
      '--methods',
      'delegate',
      '--limits',
      '16',
      '--json',
    ]);
    expect(fr.code, fr.stderr).toBe(0);
    expect((JSON.parse(fr.stdout) as { points: unknown[] }).points).toHaveLength(1);
    const cases: [string[], RegExp][] = [
      [['eval', '--options', '{"chunks":'], /--options must be a JSON object of arithmetic task options \(got "\{\\"chunks\\":"\)/],
      [['eval', '--task', 'multihop', '--options', '[1]'], /--options must be a JSON object of multihop task options/],
      [['eval', '--task', 'multihop', '--options', '{"chunks":40}'], /--options: multihop: chunks must be an integer in \[2, 16\] \(got 40\)/],
      [['frontier', '--options', '{"bogus":1}'], /--options: arithmetic has no option bogus/],
    ];
    for (const [args, message] of cases) {
      const r2 = await cli([...args, '--checkpoint', ckpt, '--n', '1']);
      expect(r2.code, args.join(' ')).toBe(2);
      expect(r2.stderr, args.join(' ')).toMatch(message);
    }
  });
});
