/**
 * `export-verl` as a user runs it (a real process, real files): the folder holds the dataset, the
 * reward with the run's thresholds, a config verl's YAML loader reads with the run's recipe, and
 * a README; bad flags are refused before anything is written.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readParquet } from 'parquet-wasm';
import { tableFromIPC } from 'apache-arrow';
import { parse } from 'yaml';
import { cli } from './cliProcess';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const python = (() => {
  try {
    execFileSync('python3', ['--version']);
    return 'python3';
  } catch {
    return null;
  }
})();

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'selfcest-export-verl-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('export-verl', () => {
  it('writes the dataset, the reward, the config and a README from the run config', async () => {
    const out = join(dir, 'mh');
    const r = await cli('export-verl', '--task', 'multihop', '--options', '{"chunks":6,"perChunk":6}', '--train', '40', '--test', '12', '--seed', '3', '--group', '8', '--lr', '3e-5', '--no-gating', '--root-tau', '100', '--verl-dir', '/data/mh', '--out', out);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect((await readdir(out)).sort()).toEqual(['README.md', 'config.yaml', 'run.json', 'selfcest_reward.py', 'test.parquet', 'train.parquet']);
    const rows = async (f: string) => tableFromIPC(readParquet(new Uint8Array(await readFile(join(out, f)))).intoIPCStream()).numRows;
    expect([await rows('train.parquet'), await rows('test.parquet')]).toEqual([40, 12]);

    const config = parse(await readFile(join(out, 'config.yaml'), 'utf8'));
    expect(config.data.train_files).toBe('/data/mh/train.parquet');
    expect(config.data.val_files).toBe('/data/mh/test.parquet');
    expect(config.actor_rollout_ref.rollout.n).toBe(8);
    expect(config.actor_rollout_ref.actor.optim.lr).toBe(3e-5);
    const clone = config.actor_rollout_ref.rollout.multi_turn.clone;
    expect(clone).toMatchObject({ enable: true, max_clone_depth: 1, allow_nested_clones: false, max_clones_per_call: 16, max_response_length: 128, reward_function: '/data/mh/selfcest_reward.py:clone_accuracy_reward' });
    expect(config.custom_reward_function).toEqual({ path: '/data/mh/selfcest_reward.py', name: 'compute_score' });

    const reward = await readFile(join(out, 'selfcest_reward.py'), 'utf8');
    expect(reward).toContain('"task": "multihop"');
    expect(reward).toContain('"rootTau": 100');
    expect(reward).toContain('"gating": False');
    const meta = JSON.parse(await readFile(join(out, 'run.json'), 'utf8'));
    expect(meta.config.reward.rootTau).toBe(100);
    expect(meta.command).toContain('export-verl');
    const readme = await readFile(join(out, 'README.md'), 'utf8');
    expect(readme).toContain('python -m verl.trainer.main_ppo');
    expect(readme).toContain('What differs from the playground');
  });

  it.skipIf(!python)('the exported reward scores a test row under python3: its truth after "Answer:" gets score 1', async () => {
    const out = join(dir, 'arith');
    expect((await cli('export-verl', '--train', '5', '--test', '3', '--out', out)).code).toBe(0);
    const t = tableFromIPC(readParquet(new Uint8Array(await readFile(join(out, 'test.parquet')))).intoIPCStream());
    const truth = String(t.get(0)!.reward_model.ground_truth);
    const script = `import sys, json; sys.path.insert(0, ${JSON.stringify(out)}); import selfcest_reward as r
ok = r.compute_score("selfcest_arithmetic", "so\\nAnswer: ${truth}", ${JSON.stringify(truth)}, {"response_tokens": 10})
bad = r.compute_score("selfcest_arithmetic", "Answer: ${truth}0", ${JSON.stringify(truth)}, {"response_tokens": 10})
print(json.dumps([ok, bad]))`;
    const [ok, bad] = JSON.parse(execFileSync(python!, ['-c', script], { encoding: 'utf8' }));
    const score = (x: unknown) => (typeof x === 'number' ? x : (x as { score: number }).score);
    expect(score(ok)).toBe(1);
    expect(score(bad)).toBeGreaterThan(0);
    expect(score(bad)).toBeLessThan(0.2);
  });

  it('refuses bad flags by name and writes nothing', async () => {
    const out = join(dir, 'never');
    const bad = async (...args: string[]) => {
      const r = await cli('export-verl', ...args, '--out', out);
      expect(r.code).not.toBe(0);
      return r.stderr;
    };
    expect(await bad('--train', '0', '--test', '3')).toMatch(/--train/);
    expect(await bad('--train', '3', '--test', '3', '--task', 'chess')).toMatch(/task/);
    expect(await bad('--train', '3', '--test', '3', '--task', 'multihop', '--options', '{"perChunk":9}')).toContain('perChunk must be an integer in [1, 6] (got 9)');
    expect(await bad('--train', '3', '--test', '3', '--test-split', 'train')).toMatch(/--test-split/);
    await expect(readdir(out)).rejects.toThrow();
  });
});
