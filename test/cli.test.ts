/** The CLI as a user runs it: real processes, real files. */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { cli } from './cliProcess';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UsageError, parseFlags } from '../src/cli/args';
import { readCheckpointDir } from '../src/cli/checkpointDir';
import { forwardLogits } from '../src/core/model/gpt';
import { policyFromCheckpoint } from '../src/core/policy';
import { Tokenizer } from '../src/core/tokenizer/tokenizer';
import { VOCAB_SIZE } from '../src/core/tokenizer/vocab';
import { initBackend } from '../src/runtime/backend';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'selfcest-cli-'));
  await initBackend('wasm');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('cli', () => {
  it('init writes a checkpoint whose logits match the in-process model', async () => {
    const ckpt = join(dir, 'tiny');
    const init = await cli('init', '--preset', 'tiny', '--seed', '3', '--out', ckpt);
    expect(init.code).toBe(0);
    expect(init.stdout).toMatch(/wrote tiny/);
    const text = '<root>12+3*4<sep>=12+12';
    const out = await cli('logits', '--checkpoint', ckpt, '--text', text, '--json');
    expect(out.code).toBe(0);
    const { tokens, logits } = JSON.parse(out.stdout) as { tokens: number[]; logits: number[][] };
    expect(tokens).toEqual(Tokenizer.builtin().encode(text));
    expect(logits).toHaveLength(tokens.length);
    expect(logits[0]).toHaveLength(VOCAB_SIZE);
    const policy = policyFromCheckpoint(await readCheckpointDir(ckpt), false);
    const expected = tf.tidy(() => forwardLogits(policy.params, policy.config, tf.tensor2d([tokens], [1, tokens.length], 'int32')));
    const rows = (await expected.array())[0];
    expected.dispose();
    const diff = Math.max(...rows.flatMap((r, i) => r.map((v, j) => Math.abs(v - logits[i][j]))));
    expect(diff).toBeLessThan(1e-5);
  });

  it('rollout prints a delegation tree or a JSON trace', async () => {
    const ckpt = join(dir, 'tiny');
    const json = await cli('rollout', '--task', 'arithmetic', '--checkpoint', ckpt, '--seed', '2', '--json');
    expect(json.code).toBe(0);
    const trace = JSON.parse(json.stdout);
    expect(trace.schema).toBe('selfcest-episode/1');
    expect(trace.contexts[0].role).toBe('root');
    const text = await cli('rollout', '--checkpoint', ckpt, '--seed', '2');
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^arithmetic seed2 \[delegate\]/);
    expect(text.stdout).toMatch(/tokens: root \d+, clones \d+, critical path \d+/);
    // --options sets the problem: an eight-chunk multihop problem shows eight keys.
    const hops = await cli('rollout', '--task', 'multihop', '--options', '{"chunks":8,"hops":3}', '--checkpoint', ckpt, '--seed', '2');
    expect(hops.code).toBe(0);
    expect(hops.stdout).toMatch(/^multihop seed2 \[delegate\]  keys k1 k2 k3 k4 k5 k6 k7 k8\./);
    const bad = await cli('rollout', '--task', 'multihop', '--options', '{"hops":9}', '--checkpoint', ckpt);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('hops must be an integer in [1, 4] (got 9)');
  });

  it('bad flags give a usage error and exit code 2', async () => {
    for (const args of [['init', '--preset', 'huge', '--out', 'x'], ['rollout', '--seed', 'abc'], ['nonsense']]) {
      const r = await cli(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr + r.stdout).toMatch(/usage|must be|required|unknown/);
    }
  });

  it('the flag parser names what is wrong', () => {
    const specs = {
      out: { type: 'string', required: true, help: '' },
      n: { type: 'int', min: 1, max: 1000, help: '' },
      gating: { type: 'bool', default: true, help: '' },
    } as const;
    expect(parseFlags(['--out', 'd', '--n', '3', '--no-gating'], specs)).toEqual({ out: 'd', n: 3, gating: false });
    expect(() => parseFlags(['--n', '3'], specs)).toThrow(/--out is required/);
    expect(() => parseFlags(['--out', 'd', '--n', '0'], specs)).toThrow(/--n must be in \[1, 1000\] \(got 0\)/);
    expect(() => parseFlags(['--out', 'd', '--n', '1e12'], specs)).toThrow(/--n must be in \[1, 1000\] \(got 1000000000000\)/);
    // Decimal only: hex, octal, binary and Infinity are not numbers here, as they are not to a user.
    for (const v of ['0x10', '0o7', '0b1', 'Infinity', '', ' ']) expect(() => parseFlags(['--out', 'd', '--n', v], specs), v).toThrow(/--n must be an integer/);
    expect(() => parseFlags(['--out', 'd', '--n', '2.5'], specs)).toThrow(/--n must be an integer/);
    expect(() => parseFlags(['--out'], specs)).toThrow(/--out needs a value/);
    expect(() => parseFlags(['--bogus'], specs)).toThrow(UsageError);
  });

  it('compare tabulates runs from their metrics and draws the reward curves', async () => {
    const row = (step: number, meanReward: number, gateRate: number) =>
      JSON.stringify({ step, meanReward, accuracy: meanReward, gateRate, meanTotalTokens: 50, clonesPerEpisode: 2 });
    for (const [name, gate] of [
      ['on', 0.1],
      ['off', 0],
    ] as const) {
      await mkdir(join(dir, name), { recursive: true });
      await writeFile(join(dir, name, 'metrics.jsonl'), [row(1, 0.1, gate), row(2, 0.3, gate), row(3, 0.5, gate)].join('\n') + '\n');
    }
    const r = await cli('compare', '--runs', `gating=${join(dir, 'on')},no-gating=${join(dir, 'off')}`, '--last', '2', '--out', join(dir, 'compare', 'new'));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('| gating | 3 | 0.400 | 0.400 | 0.100 | 50.0 | 2.00 |');
    expect(r.stdout).toContain('| no-gating | 3 | 0.400 | 0.400 | 0.000 | 50.0 | 2.00 |');
    // The output folder is made when missing.
    expect((await readFile(join(dir, 'compare', 'new', 'reward.svg'), 'utf8')).match(/<path /g)).toHaveLength(2);

    // --curves: more fields, tabulated and drawn; a held-out field over the steps that evaluated.
    await writeFile(
      join(dir, 'on', 'metrics.jsonl'),
      [
        { step: 1, meanReward: 0.1, approxKl: 2e-5, evalAccuracy: 0.5 },
        { step: 2, meanReward: 0.3, approxKl: 4e-5 },
        { step: 3, meanReward: 0.5, approxKl: 6e-5, evalAccuracy: 0.75 },
      ]
        .map((x) => JSON.stringify(x))
        .join('\n') + '\n',
    );
    const c = await cli(
      'compare',
      '--runs',
      `on=${join(dir, 'on')},off=${join(dir, 'off')}`,
      '--last',
      '2',
      '--curves',
      'meanReward,approxKl,evalAccuracy',
      '--out',
      join(dir, 'compare', 'curves'),
    );
    expect(c.code).toBe(0);
    expect(c.stdout).toContain('| run | steps | reward (last 2) | accuracy | gate rate | tokens | clones | approxKl | evalAccuracy |');
    expect(c.stdout).toContain('| on | 3 | 0.400 | — | — | — | — | 5.00e-5 | 0.625 |');
    expect(c.stdout).toContain('| off | 3 | 0.400 | 0.400 | 0.000 | 50.0 | 2.00 | — | — |');
    const kl = await readFile(join(dir, 'compare', 'curves', 'approxKl.svg'), 'utf8');
    // One line per run: three points for the run that recorded the field, none for the other.
    expect([...kl.matchAll(/<path d="([^"]*)"/g)].map((m) => m[1].split(/[ML]/).length - 1)).toEqual([3, 0]);
    expect((await readFile(join(dir, 'compare', 'curves', 'evalAccuracy.svg'), 'utf8')).match(/<path d="M[^"]*"/g)?.[0].split(/[ML]/).length).toBe(3);
    const bad = await cli('compare', '--runs', join(dir, 'on'), '--curves', 'nope');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--curves: no run has a numeric field "nope"');
  });

  it('a corrupt checkpoint is refused with a message naming the problem', async () => {
    const bad = join(dir, 'bad');
    await cli('init', '--preset', 'tiny', '--out', bad);
    await writeFile(join(bad, 'model.safetensors'), new Uint8Array([1, 2, 3]));
    const r = await cli('logits', '--checkpoint', bad, '--text', '1+1');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--checkpoint .*bad is not a checkpoint this model can load: .*safetensors/);
  });
});
