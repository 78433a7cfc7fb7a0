/** src/cli/runDir.ts in process: saves, recovery of leftovers, and messages for what cannot resume. */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readCheckpointDir } from '../src/cli/checkpointDir';
import { RunDir, type RunState, allSkippedError, checkResumeConfig, policyWeights } from '../src/cli/runDir';
import { UsageError } from '../src/cli/args';
import { GRPO_IMPLIED } from '../src/core/io/savedConfig';
import { freshPolicy } from '../src/cli/setup';
import { decodeSafetensors, encodeSafetensors } from '../src/core/io/safetensors';
import type { Policy } from '../src/core/policy';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import { initBackend } from '../src/runtime/backend';

let root: string;
let policy: Policy;
beforeAll(async () => {
  await initBackend('wasm');
  root = await mkdtemp(join(tmpdir(), 'selfcest-rundir-'));
  policy = freshPolicy('tiny', 1);
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const state = (step: number): RunState => ({ kind: 'sft', step, config: { lr: 1 }, elapsedSec: 1, tokensSeen: 10, savedAt: 'now' });

/** A run directory with saves at the given steps, one metrics row per step. */
async function runWith(name: string, steps: number[]): Promise<string> {
  const dir = join(root, name);
  const run = await RunDir.open(dir, 'sft', policyWeights('tiny'));
  const opt = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
  let last = 0;
  for (const s of steps) {
    const rows = Array.from({ length: s - last }, (_, i) => ({ step: last + i + 1 }));
    await run.save(policy, opt, state(s), { 'metrics.jsonl': rows });
    last = s;
  }
  opt.dispose();
  return dir;
}

const message = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (e) {
    return (e as Error).message;
  }
  return 'no error';
};

describe('run directory', () => {
  it('keeps only the committed save, with its rows, and reads back as a checkpoint', async () => {
    const dir = await runWith('two-saves', [2, 4]);
    expect((await readdir(dir)).sort()).toEqual(['LATEST', 'LOCK', 'metrics.jsonl', 'save-000004']);
    expect(
      (await readFile(join(dir, 'metrics.jsonl'), 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).step),
    ).toEqual([1, 2, 3, 4]);
    expect((await readCheckpointDir(dir)).selfcest.step).toBe(4);
    const again = await RunDir.open(dir, 'sft', policyWeights('tiny'));
    expect(again.saved?.state.step).toBe(4);
    await expect(RunDir.open(dir, 'train', policyWeights('tiny'))).rejects.toThrow(/holds a sft run, not a train run/);
  });

  it('removes the leftovers of an interrupted save and keeps the committed one', async () => {
    const dir = await runWith('leftovers', [2]);
    // Temporaries of a process that is gone (pid 999999999), and a save it renamed but did not commit.
    await mkdir(join(dir, 'save-000004.tmp-999999999'));
    await mkdir(join(dir, 'save-000004'));
    await writeFile(join(dir, 'LATEST.tmp-999999999'), 'save-000004\n');
    await writeFile(join(dir, 'metrics.jsonl.tmp-999999999'), '');
    const run = await RunDir.open(dir, 'sft', policyWeights('tiny'));
    expect(run.saved?.state.step).toBe(2);
    expect((await readdir(dir)).sort()).toEqual(['LATEST', 'LOCK', 'metrics.jsonl', 'save-000002']);
  });

  it('keeps a model.safetensors a user put at the top of a run directory, on resume and on the next save', async () => {
    const dir = await runWith('user-file', [2]);
    await writeFile(join(dir, 'model.safetensors'), 'the user’s own file');
    const run = await RunDir.open(dir, 'sft', policyWeights('tiny'));
    expect(run.saved?.state.step).toBe(2);
    const opt = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    run.restoreOptimizer(opt);
    await run.save(policy, opt, state(4), { 'metrics.jsonl': [{ step: 3 }, { step: 4 }] });
    opt.dispose();
    expect(await readFile(join(dir, 'model.safetensors'), 'utf8')).toBe('the user’s own file');
  });

  it('without LATEST removes no save: it continues from the newest one that loads, names the missing LATEST, and refuses when none loads', async () => {
    const dir = await runWith('no-latest', [2, 4]);
    await rm(join(dir, 'LATEST'));
    const warnings: string[] = [];
    const warn = console.warn;
    console.warn = (m: string) => warnings.push(m);
    try {
      expect((await RunDir.open(dir, 'sft', policyWeights('tiny'))).saved?.state.step).toBe(4);
      expect(warnings.join('\n')).toMatch(/had no LATEST \(the name of its committed save\): continuing from save-000004.*nothing was removed/);
      expect((await readFile(join(dir, 'LATEST'), 'utf8')).trim()).toBe('save-000004');
      // The row views gone too, and an older save beside a damaged newer one: the older one is taken, both kept.
      await rm(join(dir, 'LATEST'));
      await rm(join(dir, 'metrics.jsonl'));
      await mkdir(join(dir, 'save-000002'));
      await writeFile(join(dir, 'save-000002', 'state.json'), 'garbage');
      await writeFile(join(dir, 'save-000006.tmp-4000000'), '');
      await mkdir(join(dir, 'save-000009'));
      const run = await RunDir.open(dir, 'sft', policyWeights('tiny'));
      expect(run.saved?.state.step).toBe(4);
      expect((await readdir(dir)).sort()).toEqual(['LATEST', 'LOCK', 'metrics.jsonl', 'save-000002', 'save-000004', 'save-000009']);
      // None loads: refused, naming LATEST and each save, and nothing is removed.
      await rm(join(dir, 'LATEST'));
      await writeFile(join(dir, 'save-000004', 'state.json'), '{}');
      const before = (await readdir(dir)).sort();
      const e = await RunDir.open(dir, 'sft', policyWeights('tiny')).catch((x: Error) => x);
      expect(e).toBeInstanceOf(UsageError);
      expect((e as Error).message).toMatch(
        /has no LATEST \(the name of its committed save\), and none of its saves can be resumed:\n  save-000009: .*\n  save-000004: .*\n  save-000002: .*\nnothing was removed; restore LATEST/,
      );
      expect((await readdir(dir)).sort()).toEqual(before);
    } finally {
      console.warn = warn;
    }
  });

  it('says that nothing was committed when the first save of a run fails, and what is kept when a later one does', async () => {
    const dir = join(root, 'first-save-fails');
    const run = await RunDir.open(dir, 'sft', policyWeights('tiny'));
    const opt = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    // LATEST's temporary cannot be written: a directory is in its way.
    await mkdir(join(dir, `LATEST.tmp-${process.pid}`, 'x'), { recursive: true });
    expect(await message(run.save(policy, opt, state(1), { 'metrics.jsonl': [{ step: 1 }] }))).toMatch(
      /cannot commit the save of step 1 .*\(nothing was committed: this run has no save yet\)/,
    );
    await rm(join(dir, `LATEST.tmp-${process.pid}`), { recursive: true });
    const again = await RunDir.open(dir, 'sft', policyWeights('tiny'));
    await again.save(policy, opt, state(2), { 'metrics.jsonl': [{ step: 1 }, { step: 2 }] });
    await mkdir(join(dir, `LATEST.tmp-${process.pid}`, 'x'), { recursive: true });
    expect(await message(again.save(policy, opt, state(3), { 'metrics.jsonl': [{ step: 3 }] }))).toMatch(/\(the previous save, save-000002, is kept\)/);
    opt.dispose();
  });

  it('names a LATEST that is a directory', async () => {
    const dir = join(root, 'latest-dir');
    await mkdir(join(dir, 'LATEST'), { recursive: true });
    expect(await message(RunDir.open(dir, 'sft', policyWeights('tiny')))).toMatch(/LATEST is not a file: LATEST must hold the name of the committed save/);
  });

  it('refuses a finite but absurd first moment by name (exit 2), as no optimizer step writes it', async () => {
    const dir = await runWith('absurd-moment', [1]);
    const file = join(dir, 'save-000001', 'optimizer.safetensors');
    const opt = decodeSafetensors(new Uint8Array(await readFile(file)));
    const tensors = [...opt.tensors].map(([name, t]) => ({
      name,
      shape: t.shape,
      data: name === 'm.transformer.wte.weight' ? t.data.map((x, i) => (i === 5 ? 3e38 : x)) : t.data,
    }));
    await writeFile(file, encodeSafetensors(tensors, opt.metadata));
    const run = await RunDir.open(dir, 'sft', policyWeights('tiny'));
    const fresh = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    const e = (() => {
      try {
        run.restoreOptimizer(fresh);
      } catch (x) {
        return x as Error;
      }
      return null;
    })();
    expect(e).toBeInstanceOf(UsageError);
    expect(e!.message).toMatch(
      /optimizer\.safetensors: moment tensor m\.transformer\.wte\.weight holds 3.*e\+38 at index 5, past what 0 optimizer steps can write \(\|m\| ≤ 0\.000/,
    );
    fresh.dispose();
  });

  it('says which file is wrong and how to start over', async () => {
    const dir = await runWith('broken', [2]);
    const save = join(dir, 'save-000002');
    await writeFile(join(save, 'state.json'), 'null');
    expect(await message(RunDir.open(dir, 'sft', policyWeights('tiny')))).toMatch(
      /save-000002\/state\.json: expected a JSON object, got null.*remove .*broken or use a new --out/,
    );
    await writeFile(join(save, 'state.json'), JSON.stringify({ kind: 'sft', step: 2, elapsedSec: 0, tokensSeen: 0 }));
    expect(await message(RunDir.open(dir, 'sft', policyWeights('tiny')))).toMatch(/state\.json: config must be an object/);
    await writeFile(join(save, 'state.json'), JSON.stringify(state(3)));
    expect(await message(RunDir.open(dir, 'sft', policyWeights('tiny')))).toMatch(/selfcest\.json says step 2 but .*state\.json says 3/);
    await writeFile(join(dir, 'LATEST'), 'save-000009\n');
    expect(await message(RunDir.open(dir, 'sft', policyWeights('tiny')))).toMatch(/LATEST names "save-000009", which is not a save/);
  });

  it('refuses an optimizer file with non-finite or negative moments, naming the file and the tensor', async () => {
    const dir = await runWith('bad-optimizer', [1]);
    const file = join(dir, 'save-000001', 'optimizer.safetensors');
    const opt = decodeSafetensors(new Uint8Array(await readFile(file)));
    const tensors = [...opt.tensors].map(([name, t]) => ({
      name,
      shape: t.shape,
      data: name === 'v.transformer.wte.weight' ? t.data.map((_, i) => (i === 3 ? -1 : 0)) : t.data,
    }));
    await writeFile(file, encodeSafetensors(tensors, opt.metadata));
    const run = await RunDir.open(dir, 'sft', policyWeights('tiny'));
    const fresh = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    expect(() => run.restoreOptimizer(fresh)).toThrow(/optimizer\.safetensors: .*v\.transformer\.wte\.weight.*cannot resume/);
    fresh.dispose();
  });

  it('will not mix a new run into rows of another run', async () => {
    const dir = join(root, 'stray');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'metrics.jsonl'), '{"step":1}\n');
    expect(await message(RunDir.open(dir, 'sft', policyWeights('tiny')))).toMatch(/holds metrics\.jsonl but no committed save/);
  });

  it('reads a run of the older layout, drops rows past its save, and converts it on the next save', async () => {
    const dir = await runWith('legacy-src', [2]);
    const legacy = join(root, 'legacy');
    await mkdir(legacy);
    for (const f of await readdir(join(dir, 'save-000002'))) await writeFile(join(legacy, f), await readFile(join(dir, 'save-000002', f)));
    await writeFile(join(legacy, 'metrics.jsonl'), '{"step":1}\n{"step":2}\n{"step":3}\n');
    const run = await RunDir.open(legacy, 'sft', policyWeights('tiny'));
    expect(run.saved?.state.step).toBe(2);
    const opt = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    run.restoreOptimizer(opt);
    await run.save(policy, opt, state(4), { 'metrics.jsonl': [{ step: 3 }, { step: 4 }] });
    opt.dispose();
    expect((await readdir(legacy)).sort()).toEqual(['LATEST', 'LOCK', 'metrics.jsonl', 'save-000004']);
    expect(await readFile(join(legacy, 'metrics.jsonl'), 'utf8')).toBe('{"step":1}\n{"step":2}\n{"step":3}\n{"step":4}\n');
  });

  it('refuses a legacy directory whose weights and state are from different saves, also as a checkpoint', async () => {
    const dir = await runWith('legacy-src2', [2]);
    const legacy = join(root, 'legacy-mixed');
    await mkdir(legacy);
    for (const f of await readdir(join(dir, 'save-000002'))) await writeFile(join(legacy, f), await readFile(join(dir, 'save-000002', f)));
    await writeFile(join(legacy, 'state.json'), JSON.stringify(state(4)));
    expect(await message(RunDir.open(legacy, 'sft', policyWeights('tiny')))).toMatch(/selfcest\.json says step 2 but .*state\.json says 4/);
    expect(await message(readCheckpointDir(legacy))).toMatch(
      /selfcest\.json says step 2 but state\.json says 4: the weights and the run state are from different saves/,
    );
    expect(existsSync(join(legacy, 'LATEST'))).toBe(false);
  });

  it('resumes a config without a field it predates as that field’s default', () => {
    expect(() => checkResumeConfig({ lr: 1 }, { lr: 1, limits: { a: 1 } }, [], { limits: { a: 1 } })).not.toThrow();
    expect(() => checkResumeConfig({ lr: 1 }, { lr: 1, limits: { a: 2 } }, [], { limits: { a: 1 } })).toThrow(
      /limits was \{"a":1\} in the saved run, now \{"a":2\}/,
    );
    // A multihop run from before the notation options resumes only in its own notation (names 2, no filler).
    const old = { task: 'multihop', taskOptions: { chunks: 6, perChunk: 3, hops: 2 } };
    expect(() => checkResumeConfig(old, { task: 'multihop', taskOptions: { chunks: 6, perChunk: 3, hops: 2, names: 1, filler: 0 } }, [])).toThrow(
      /"names":2,"filler":0\} in the saved run, now .*"names":1/,
    );
    expect(() => checkResumeConfig(old, { task: 'multihop', taskOptions: { chunks: 6, perChunk: 3, hops: 2, names: 2, filler: 0 } }, [])).not.toThrow();
    const oldMix = { task: 'arithmetic:1,multihop:3', taskOptions: { arithmetic: { maxValue: 99 }, multihop: { chunks: 6, perChunk: 3, hops: 2 } } };
    expect(() =>
      checkResumeConfig(
        oldMix,
        { task: 'arithmetic:1,multihop:3', taskOptions: { arithmetic: { maxValue: 99 }, multihop: { chunks: 6, perChunk: 3, hops: 2, names: 2, filler: 0 } } },
        [],
      ),
    ).not.toThrow();
    // Arithmetic runs gain nothing.
    expect(() =>
      checkResumeConfig({ task: 'arithmetic', taskOptions: { maxValue: 99 } }, { task: 'arithmetic', taskOptions: { maxValue: 99 } }, []),
    ).not.toThrow();
    expect(() => checkResumeConfig({ lr: 1 }, { lr: 2 }, [])).toThrow(/cannot resume: lr was 1/);
    // A GRPO run from before the token cost had none: it resumes without one, and refuses one; one from before the restart of Adam had a single optimizer.
    const beforeCost = { lr: 1, reward: { rootTau: 64, partialCredit: true } };
    // The new field sits before partialCredit in today's config: the order of keys does not matter.
    expect(() =>
      checkResumeConfig(
        beforeCost,
        { lr: 1, reward: { rootTau: 64, tokenRate: 0, partialCredit: true }, tokenRateAfter: 0, restartOptimizer: false },
        [],
        GRPO_IMPLIED,
      ),
    ).not.toThrow();
    expect(() =>
      checkResumeConfig(
        beforeCost,
        { lr: 1, reward: { rootTau: 64, tokenRate: 0.003, partialCredit: true }, tokenRateAfter: 0, restartOptimizer: false },
        [],
        GRPO_IMPLIED,
      ),
    ).toThrow(/reward was \{"rootTau":64,"partialCredit":true,"tokenRate":0\} in the saved run/);
    expect(() =>
      checkResumeConfig(
        beforeCost,
        { lr: 1, reward: { rootTau: 64, tokenRate: 0, partialCredit: true }, tokenRateAfter: 250, restartOptimizer: false },
        [],
        GRPO_IMPLIED,
      ),
    ).toThrow(/tokenRateAfter was 0 in the saved run, now 250/);
    expect(() =>
      checkResumeConfig(
        { ...beforeCost, reward: { ...beforeCost.reward, tokenRate: 0.003 }, tokenRateAfter: 250 },
        { lr: 1, reward: { rootTau: 64, tokenRate: 0.003, partialCredit: true }, tokenRateAfter: 250, restartOptimizer: true },
        [],
        GRPO_IMPLIED,
      ),
    ).toThrow(/restartOptimizer was false in the saved run, now true/);
    // A field that older runs recorded and that never had an effect does not block a resume.
    expect(() => checkResumeConfig({ reward: { rootTau: 64, cloneFormatPenalty: 0.05 } }, { reward: { rootTau: 64 } }, [])).not.toThrow();
  });

  it('fails a session whose every step was skipped as non-finite', () => {
    expect(allSkippedError(0, 3)).toMatch(/every step of this session \(3\) was skipped/);
    expect(allSkippedError(1, 3)).toBeNull();
    expect(allSkippedError(0, 0)).toBeNull();
  });

  it('lets one process at a time use a run directory', async () => {
    const dir = await runWith('locked', [1]);
    await writeFile(join(dir, 'LOCK'), `${process.ppid}\n`); // a live process that is not this one
    expect(await message(RunDir.open(dir, 'sft', policyWeights('tiny')))).toMatch(/is in use by process \d+/);
    await writeFile(join(dir, 'LOCK'), '999999999\n'); // gone: taken over
    expect((await RunDir.open(dir, 'sft', policyWeights('tiny'))).saved?.state.step).toBe(1);
    expect((await readFile(join(dir, 'LOCK'), 'utf8')).trim()).toBe(String(process.pid));
    await writeFile(join(dir, 'LOCK'), 'not a pid\n'); // unreadable: taken over
    expect((await RunDir.open(dir, 'sft', policyWeights('tiny'))).saved?.state.step).toBe(1);
    expect((await readdir(dir)).filter((e) => e.startsWith('LOCK'))).toEqual(['LOCK']);
  });

  it('lets exactly one of two processes that open a run directory at the same moment in', async () => {
    const dir = await runWith('race', [1]);
    const script = `import { RunDir, policyWeights } from ${JSON.stringify(join(process.cwd(), 'src/cli/runDir.ts'))};
const [dir, at] = process.argv.slice(2);
while (Date.now() < Number(at)) {}
try { await RunDir.open(dir, 'sft', policyWeights('tiny')); console.log('in'); await new Promise((r) => setTimeout(r, 1500)); } catch (e) { console.log('refused: ' + e.message); }`;
    const file = join(root, 'race.mts');
    await writeFile(file, script);
    const { spawn } = await import('node:child_process');
    const once = (at: number) =>
      new Promise<string>((resolve) => {
        const p = spawn('npx', ['tsx', file, dir, String(at)], { cwd: process.cwd() });
        let out = '';
        p.stdout.on('data', (d) => (out += d));
        p.on('close', () => resolve(out.trim()));
      });
    for (let round = 0; round < 3; round++) {
      await rm(join(dir, 'LOCK'), { force: true });
      const at = Date.now() + 4000; // both processes started by then, then both open at once
      const outs = await Promise.all([once(at), once(at)]);
      expect(
        outs.filter((o) => o === 'in'),
        outs.join(' | '),
      ).toHaveLength(1);
      expect(outs.find((o) => o !== 'in')).toMatch(/^refused: .* is in use by process \d+/);
    }
  }, 60_000);

  it('never replaces the committed save by a save of the same step', async () => {
    const dir = await runWith('same-step', [2]);
    const run = await RunDir.open(dir, 'sft', policyWeights('tiny'));
    const opt = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    expect(await message(run.save(policy, opt, state(2), {}))).toMatch(/already the committed save/);
    opt.dispose();
    expect((await RunDir.open(dir, 'sft', policyWeights('tiny'))).saved?.state.step).toBe(2);
  });

  it('refuses to resume a run trained under the old clone credit, and says what to do', () => {
    expect(() => checkResumeConfig({ advantage: { credit: 'ratio', cloneFormatPenalty: 0.05 } }, { advantage: { credit: 'ratio' } }, [])).toThrow(
      /clone credit of before the reference fix.*25f3c14/,
    );
    // Missing keys at any depth count as the implied value.
    expect(() => checkResumeConfig({ loss: { clip: 0.2 } }, { loss: { clip: 0.2, dualClip: null } }, [], { loss: { dualClip: null } })).not.toThrow();
  });
});
