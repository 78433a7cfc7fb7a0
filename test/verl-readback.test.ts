/**
 * Read-back from verl: the project's own committed traces, logged as verl's agent loop logs root
 * and clone samples (test/verlShape.ts), converted back by `import-verl` (a real process, real
 * files) into traces that keep the tree, the answers, the token counts and the reward; `compare`
 * then tabulates the converted run from its traces alone.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from './cliProcess';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTracesJsonl } from '../src/core/io/traces';
import type { EpisodeTrace } from '../src/core/rollout/trace';
import { verlSamplesOf } from './verlShape';

const committed = execFileSync('git', ['ls-files', 'runs/**/traces.sample.jsonl'], { encoding: 'utf8' }).split('\n').filter(Boolean);
let dir: string;
let ours: (EpisodeTrace & { step?: number })[];
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'selfcest-verl-'));
  ours = (await Promise.all(committed.map(async (f) => parseTracesJsonl(await readFile(f, 'utf8')) as (EpisodeTrace & { step?: number })[]))).flat();
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('import-verl', () => {
  it('turns verl root and clone samples back into the same delegation trees, answers, token counts and rewards', async () => {
    expect(ours.length).toBeGreaterThanOrEqual(250);
    const samples = ours.flatMap((t, i) => verlSamplesOf(t, `ep${i}`, i % 2 === 0));
    // The loop logs samples as they finish: clones before their root, rounds interleaved.
    samples.reverse();
    const input = join(dir, 'rollouts.jsonl');
    await writeFile(input, samples.map((s) => JSON.stringify(s)).join('\n') + '\n');
    const out = join(dir, 'traces.jsonl');
    const r = await cli('import-verl', '--in', input, '--out', out);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${ours.length} episodes`);
    expect(r.stdout).toContain(`${ours.length} with the source's reward`);
    const back = parseTracesJsonl(await readFile(out, 'utf8')) as (EpisodeTrace & { step?: number })[];
    const byId = new Map(back.map((t) => [t.problemId, t]));
    expect(byId.size).toBe(ours.length);
    ours.forEach((t, i) => {
      const b = byId.get(`ep${i}`)!;
      expect(b.step).toBe(t.step);
      expect(b.answer).toBe(t.answer);
      expect(b.correct).toBe(t.correct);
      expect(b.rounds).toBe(t.rounds);
      expect(b.tokens).toEqual(t.tokens);
      // With the parts logged the trace has the whole breakdown; else the source's reward alone.
      if (i % 2 === 0)
        expect([b.reward, b.sourceReward]).toEqual([{ budgetPenalty: 0, tokenPenalty: 0, ...t.reward }, undefined]); // older traces have no budget or token part: 0
      else expect([b.reward, b.sourceReward]).toEqual([undefined, { reward: t.reward!.reward, score: t.reward!.score }]);
      expect(b.contexts.map((c) => [c.role, c.round, c.subtask, c.answer, c.generatedTokens, c.budget])).toEqual(
        t.contexts.map((c) => [c.role, c.round, c.role === 'clone' ? c.subtask : null, c.answer, c.generatedTokens, c.budget]),
      );
      for (const c of b.contexts) expect(c.spans!.map((s) => s.text).join('')).toBe(c.text);
    });
  });

  it('compare tabulates the converted run from its traces, beside a run given by its metrics', async () => {
    const r = await cli('compare', '--runs', `verl=${join(dir, 'traces.jsonl')},gating=runs/ablation/gating-s1`, '--last', '3');
    expect(r.code).toBe(0);
    const line = r.stdout.split('\n').find((l) => l.startsWith('| verl |'))!;
    // Gate rate is not in a converted trace: shown as —, not as 0.
    expect(line).toMatch(/^\| verl \| \d+ \| -?\d\.\d{3} \| \d\.\d{3} \| — \| \d+\.\d \| \d\.\d\d \|$/);
    expect(r.stdout).toMatch(/^\| gating \| \d+ \|/m);
  });

  it('compare takes a metrics file named directly as metrics, and import-verl warns of episodes without a reward', async () => {
    const r = await cli('compare', '--runs', 'a=runs/ablation/gating-s1/metrics.jsonl');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^\| a \| \d+ \|/m);
    const input = join(dir, 'no-reward.jsonl');
    await writeFile(input, '{"request_id":"a","parent_request_id":null,"response":"Answer: 1","response_mask":[1]}\n');
    const w = await cli('import-verl', '--in', input, '--out', join(dir, 'no-reward-traces.jsonl'));
    expect(w.code).toBe(0);
    expect(w.stdout).toContain('warning: 1 episodes carry no reward');
    expect((await cli('import-verl', '--in', input, '--out', input)).stderr).toContain('--out must not be --in');
  });

  it('refuses a bad record by line and field, and writes nothing', async () => {
    const input = join(dir, 'bad.jsonl');
    await writeFile(
      input,
      '{"request_id":"a","parent_request_id":null,"response":"Answer: 1","response_mask":[1]}\n{"request_id":"b","parent_request_id":"a","response":"x","response_mask":"all"}\n',
    );
    const r = await cli('import-verl', '--in', input, '--out', join(dir, 'bad-out.jsonl'));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`verl rollouts: ${input}: line 2: response_mask must be an array of 0 and 1`);
    await expect(readFile(join(dir, 'bad-out.jsonl'))).rejects.toThrow();
  });
});
