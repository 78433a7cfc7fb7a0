import { describe, expect, it } from 'vitest';
import { sftMixSequences } from '../sft/sft';
import { Rng } from '../rng';
import { TASKS } from '../tasks';
import type { Problem, Task } from '../tasks/types';
import { Tokenizer } from '../tokenizer/tokenizer';
import { heldOutProblems } from './evaluate';
import { drawProblem, splitOf } from './splits';
import { defaultSftConfig } from '../runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_SFT = defaultSftConfig();

const tok = Tokenizer.builtin();
const encode = (t: string) => tok.encode(t);
const key = (p: Problem) => JSON.stringify([p.prompt, p.monoPrompt ?? '', p.context ?? {}, p.truth]);

/** Every set of one task: disjoint, stable, and about the intended sizes. */
function checkSets<O>(task: Task<O>): void {
  const opts = task.defaultOptions;
  const final = heldOutProblems(task, opts, 500, 12345, 'final');
  const monitor = heldOutProblems(task, opts, 500, 12345, 'monitor');
  expect(final.every((p) => splitOf(p) === 'final')).toBe(true);
  expect(monitor.every((p) => splitOf(p) === 'monitor')).toBe(true);
  const finalKeys = new Set(final.map(key));
  expect(monitor.filter((p) => finalKeys.has(key(p)))).toEqual([]);
  // The same seed, other sets: the first problems are not the same ones.
  expect(final[0].prompt === monitor[0].prompt && final[1].prompt === monitor[1].prompt).toBe(false);
  // A larger set starts with the smaller one.
  expect(heldOutProblems(task, opts, 50, 12345, 'final').map(key)).toEqual(final.slice(0, 50).map(key));

  // Training draws, seeded like the trainers, never hit a held-out problem.
  const heldOut = new Set([...finalKeys, ...monitor.map(key)]);
  const rng = Rng.stream(3, 'grpo-step', 0);
  const train = Array.from({ length: 2000 }, (_, i) => drawProblem(task, rng, opts, `t${i}`, 'train'));
  expect(train.filter((p) => heldOut.has(key(p)))).toEqual([]);
  // About 10% of all problems go to each held-out set.
  const raw = new Rng(7);
  const counts = { train: 0, monitor: 0, final: 0 };
  for (let i = 0; i < 4000; i++) counts[splitOf(task.generate(raw, opts, 'x'))]++;
  expect(counts.final / 4000).toBeGreaterThan(0.07);
  expect(counts.final / 4000).toBeLessThan(0.13);
  expect(counts.monitor / 4000).toBeGreaterThan(0.07);
  expect(counts.monitor / 4000).toBeLessThan(0.13);
}

describe('problem sets', () => {
  it('arithmetic: training, monitored and final problems are disjoint by content', () => checkSets(TASKS.arithmetic));
  it('multihop: training, monitored and final problems are disjoint by content', () => checkSets(TASKS.multihop));

  it('the warm start trains on training problems only', () => {
    const cfg = { ...TABLE_SFT, task: 'arithmetic', steps: 10, seed: 1, limits: TABLE_SFT.limits };
    const final = new Set(heldOutProblems(TASKS.arithmetic, TASKS.arithmetic.defaultOptions, 500, 12345, 'final').map((p) => p.prompt));
    const monitor = new Set(heldOutProblems(TASKS.arithmetic, TASKS.arithmetic.defaultOptions, 500, 12345, 'monitor').map((p) => p.prompt));
    const prompts: string[] = [];
    for (let step = 0; step < 20; step++) {
      for (const s of sftMixSequences([{ task: TASKS.arithmetic, opts: TASKS.arithmetic.defaultOptions }], cfg, step, encode)) {
        const text = tok.decode(s.tokens);
        const m = /^<root>(.*?)<sep>/.exec(text);
        if (m) prompts.push(m[1]);
      }
    }
    expect(prompts.length).toBeGreaterThan(200);
    expect(prompts.filter((p) => final.has(p) || monitor.has(p))).toEqual([]);
  });
});
