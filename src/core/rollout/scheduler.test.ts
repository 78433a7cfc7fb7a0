import { ScriptedDecoder } from './scriptedDecoder';
/**
 * The scheduler against a scripted decoder (teacher demonstrations replayed token by
 * token, so every protocol path is exact and hand-checkable) and against a real tiny model
 * (determinism and batch independence).
 */
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { presetConfig } from '../model/config';
import { initParams } from '../model/params';
import { Rng } from '../rng';
import { arithmetic } from '../tasks/arithmetic';
import { multihop } from '../tasks/multihop';
import type { Problem } from '../tasks/types';
import { Tokenizer } from '../tokenizer/tokenizer';
import { initBackend } from '../../runtime/backend';
import { parseTracesJsonl, tracesToJsonl } from '../io/traces';
import type { RolloutConfig } from './config';
import { defaultRolloutConfig } from '../runConfigTargets';
import { PolicyDecoder } from './policyDecoder';
import { RolloutScheduler } from './scheduler';

const tok = Tokenizer.builtin();
const encode = (t: string) => tok.encode(t);
const V = tok.vocabSize;

const greedy: RolloutConfig = defaultRolloutConfig('arithmetic', { rootMaxTokens: 224, greedy: true });

async function replay(scripts: string[], problem: Problem, cfg = greedy) {
  const decoder = new ScriptedDecoder(scripts.map(encode), V, (h) => tok.decode(h));
  const s = new RolloutScheduler(decoder, cfg, { policyVersion: 3, encode });
  s.addEpisode(arithmetic, problem, new Rng(1));
  const [trace] = await s.run();
  return { trace, decoder };
}

const problem: Problem = { task: 'arithmetic', id: 'p', prompt: '57+77-1+7*7-1', truth: '181', meta: {} };
const ROOT = '<root>57+77-1+7*7-1<sep><spawn>57+77<b16><spawn>-1<b8><spawn>7*7-1<b16><join><ret>134<ret>-1<ret>48<resume>=134-1+48=133+48=181<ans>181<eos>';
const CLONES = ['<clone>57+77<sep>=134<ans>134<eos>', '<clone>-1<sep><ans>-1<eos>', '<clone>7*7-1<sep>=49-1=48<ans>48<eos>'];

describe('rollout scheduler (scripted decoder)', () => {
  it('runs a delegation round exactly as the protocol says', async () => {
    const { trace, decoder } = await replay([ROOT, ...CLONES], problem);
    expect(trace.contexts.map((c) => c.text)).toEqual([ROOT, ...CLONES]);
    expect(trace.answer).toBe('181');
    expect(trace.correct).toBe(true);
    expect(trace.rounds).toBe(1);
    const root = trace.contexts[0];
    // Writers: prompt, then the spawn blocks, then the runtime's injection, then the root again.
    const gen1 = '<spawn>57+77<b16><spawn>-1<b8><spawn>7*7-1<b16><join>';
    const inj = '<ret>134<ret>-1<ret>48<resume>';
    const tail = '=134-1+48=133+48=181<ans>181<eos>';
    const n = (t: string) => encode(t).length;
    expect(root.writers).toBe('p'.repeat(n('<root>57+77-1+7*7-1<sep>')) + 'g'.repeat(n(gen1)) + 'i'.repeat(n(inj)) + 'g'.repeat(n(tail)));
    expect(root.generatedTokens).toBe(n(gen1) + n(tail));
    expect(root.logprobs).toHaveLength(root.generatedTokens);
    const cloneGen = [n('=134<ans>134<eos>'), n('<ans>-1<eos>'), n('=49-1=48<ans>48<eos>')];
    expect(trace.contexts.slice(1).map((c) => [c.subtask, c.budget, c.round, c.parent, c.generatedTokens, c.answer])).toEqual([
      ['57+77', 16, 0, 0, cloneGen[0], '134'],
      ['-1', 8, 0, 0, cloneGen[1], '-1'],
      ['7*7-1', 16, 0, 0, cloneGen[2], '48'],
    ]);
    expect(trace.tokens).toEqual({
      root: n(gen1) + n(tail),
      clonesTotal: cloneGen[0] + cloneGen[1] + cloneGen[2],
      longestClonePerRound: [cloneGen[2]],
      criticalPath: n(gen1) + n(tail) + cloneGen[2],
      total: n(gen1) + n(tail) + cloneGen[0] + cloneGen[1] + cloneGen[2],
    });
    expect(trace.events).toEqual([
      { kind: 'spawn', round: 0, atToken: n('<root>57+77-1+7*7-1<sep>') + n(gen1) - 1, clones: [1, 2, 3] },
      { kind: 'join', round: 0, atToken: n('<root>57+77-1+7*7-1<sep>') + n(gen1), answers: ['134', '-1', '48'] },
    ]);
    expect(trace.violations).toEqual([]);
    expect(trace.policyVersion).toBe(3);
    // The three clones ran side by side: one batched feed held all of them.
    expect(decoder.maxLive).toBe(4);
    expect(Math.max(...decoder.calls)).toBe(3);
  });

  it('steps the contexts of many episodes in one batched call', async () => {
    const decoder = new ScriptedDecoder([ROOT, ...CLONES].map(encode), V, (h) => tok.decode(h));
    const s = new RolloutScheduler(decoder, greedy, { policyVersion: 0, encode });
    for (let i = 0; i < 5; i++) s.addEpisode(arithmetic, { ...problem, id: `p${i}` }, new Rng(i));
    const traces = await s.run();
    expect(traces.every((t) => t.correct)).toBe(true);
    expect(Math.max(...decoder.calls)).toBe(15); // 5 episodes × 3 clones in one step
  });

  it('injects <fail> for a clone over budget and one without an answer', async () => {
    const root = '<root>57+77-1+7*7-1<sep><spawn>57+77<b8><spawn>7*7-1<b16><join><ret><fail><ret><fail><resume>=0<ans>0<eos>';
    const c1 = '<clone>57+77<sep>=134=134=134=134<ans>134<eos>';
    const c2 = '<clone>7*7-1<sep>=49-1=48<eos>';
    const { trace } = await replay([root, c1, c2], problem);
    expect(trace.contexts[1].violation).toBe('clone_over_budget');
    expect(trace.contexts[1].generatedTokens).toBe(8);
    expect(trace.contexts[2].violation).toBe('clone_no_answer');
    expect(trace.events[1]).toMatchObject({ kind: 'join', answers: [null, null] });
    expect(trace.contexts[0].text).toBe(root);
    expect(trace.violations.map((v) => v.violation)).toEqual(['clone_over_budget', 'clone_no_answer']);
    expect(trace.correct).toBe(false);
  });

  it('cuts injected answers and classifies a clone that spawns', async () => {
    const root = '<root>1+2<sep><spawn>1+2<b16><spawn>2<b8><join><ret>123<ret><fail><resume><ans>3<eos>';
    const c1 = '<clone>1+2<sep><ans>12345<eos>';
    const c2 = '<clone>2<sep><spawn>';
    const { trace } = await replay([root, c1, c2], { ...problem, prompt: '1+2', truth: '3' }, { ...greedy, answerMaxChars: 3 });
    expect(trace.contexts[2].violation).toBe('clone_spawn');
    expect(trace.contexts[0].text).toBe(root);
    expect(trace.correct).toBe(true);
  });

  it('ends the episode on a root violation', async () => {
    const cases: [string, string, Partial<RolloutConfig>][] = [
      ['<root>1+2<sep><spawn>1+2<join>', 'malformed_spawn', {}],
      ['<root>1+2<sep>=3<eos>', 'root_no_answer', {}],
      ['<root>1+2<sep>=3=3=3', 'root_over_max', { rootMaxTokens: 6 }], // stops at the 6th token
      ['<root>1+2<sep><spawn>1<b8><spawn>', 'too_many_clones', { maxClonesPerRound: 1 }],
      ['<root>1+2<sep><spawn>1<b8><join><ret>1<resume><spawn>', 'too_many_rounds', { maxRounds: 1 }],
      ['<root>1+2<sep><spawn><ctx>k1<b8><join>', 'malformed_spawn', {}],
    ];
    for (const [root, violation, cfg] of cases) {
      const { trace } = await replay([root + '=3=3', '<clone>1<sep><ans>1<eos>'], { ...problem, prompt: '1+2', truth: '3' }, { ...greedy, ...cfg });
      expect(trace.violations.map((v) => v.violation)).toEqual([violation]);
      expect(trace.answer).toBeNull();
      expect(trace.contexts[0].text).toBe(root);
    }
  });

  it('masks spawn tokens for the monolithic method', async () => {
    // The script wants <spawn>; with spawning forbidden the greedy choice must be another token.
    const decoder = new ScriptedDecoder([encode('<root>1+2<sep><spawn>')], V, (h) => tok.decode(h));
    const s = new RolloutScheduler(decoder, { ...greedy, allowSpawn: false, rootMaxTokens: 1 }, { policyVersion: 0, encode });
    s.addEpisode(arithmetic, { ...problem, prompt: '1+2' }, new Rng(0));
    const [t] = await s.run();
    expect(t.method).toBe('mono');
    expect(t.contexts[0].tokens.at(-1)).not.toBe(encode('<spawn>')[0]);
  });

  it('gives the monolithic root the whole context, and records a prompt that does not fit as root_over_max', async () => {
    const long = multihop.generate(new Rng(1), { chunks: 12, perChunk: 4, hops: 2, names: 2, filler: 0 }, 'long');
    expect(encode(long.monoPrompt!).length).toBeGreaterThan(256);
    const decoder = new ScriptedDecoder([], V, (h) => tok.decode(h));
    const s = new RolloutScheduler(decoder, { ...greedy, allowSpawn: false }, { policyVersion: 0, encode });
    s.addEpisode(multihop, long, new Rng(0));
    const [t] = await s.run();
    expect(t.prompt).toBe(long.monoPrompt);
    expect(t.violations.map((v) => v.violation)).toEqual(['root_over_max']);
    expect(t.tokens.total).toBe(0);
    expect(decoder.calls).toEqual([]);
  });

  it('fans a <ctx>* spawn out to one clone per chunk, each reading its own chunk', async () => {
    const mh = multihop.generate(new Rng(6), multihop.validateOptions({ chunks: 4, perChunk: 3, hops: 2 }), 'fan');
    const demo = multihop.teacherDelegate(mh, new Rng(0), defaultRolloutConfig('multihop'))!;
    const rootText = demo.contexts[0].segments.map((x) => x.text).join('');
    expect(rootText.match(/<spawn><ctx>\* [a-z]\?<b\d+>/g)).toHaveLength(2);
    // What each clone writes, from its own chunk: the name and what followed it, or the name alone.
    const keys = Object.keys(mh.context!);
    const asked = [/ ([a-z])\?$/.exec(mh.prompt)![1], ...[...rootText.matchAll(/<resume>=([a-z])/g)].map((m) => m[1])];
    const clones = asked.flatMap((v) =>
      keys.map((k) => {
        const rhs = new RegExp(`(?:^| )${v}([a-z]|\\d+)\\.`).exec(mh.context![k])?.[1];
        return `<clone>${mh.context![k]} ${v}?<sep>${v}${rhs ?? ''}<ans>${rhs ?? 'none'}<eos>`;
      }),
    );
    const decoder = new ScriptedDecoder([rootText, ...clones].map(encode), V, (h) => tok.decode(h));
    const cfg = defaultRolloutConfig('multihop', { greedy: true });
    const s = new RolloutScheduler(decoder, cfg, { policyVersion: 0, encode });
    s.addEpisode(multihop, mh, new Rng(1));
    const [t] = await s.run();
    expect(t.violations).toEqual([]);
    expect(t.answer).toBe(mh.truth);
    expect(t.contexts[0].text).toBe(rootText);
    // Two rounds of four clones, in key order, each subtask naming its chunk.
    expect(t.contexts.slice(1).map((c) => [c.round, c.subtask, c.budget !== null])).toEqual(
      asked.flatMap((v, r) => keys.map((k) => [r, `<ctx>${k} ${v}?`, true])),
    );
    expect(t.contexts.slice(1).map((c) => c.text)).toEqual(clones);
  });

  it('refuses a fan-out without a context, and one past the clones a round may start', async () => {
    const { trace } = await replay(['<root>57+77-1+7*7-1<sep><spawn><ctx>* 1?<b8><join>'], problem);
    expect(trace.violations.map((v) => [v.violation, v.detail])).toEqual([['malformed_spawn', '<ctx>* with no context to fan out over']]);
    const mh = multihop.generate(new Rng(2), multihop.validateOptions({ chunks: 5, perChunk: 2, hops: 1 }), 'many');
    const q = / ([a-z])\?$/.exec(mh.prompt)![1];
    const decoder = new ScriptedDecoder([encode(`<root>${mh.prompt}<sep><spawn><ctx>* ${q}?<b8><join>`)], V, (h) => tok.decode(h));
    const s = new RolloutScheduler(decoder, defaultRolloutConfig('arithmetic', { ...greedy, maxClonesPerRound: 4 }), { policyVersion: 0, encode });
    s.addEpisode(multihop, mh, new Rng(1));
    const [t] = await s.run();
    expect(t.violations.map((v) => [v.violation, v.detail])).toEqual([['too_many_clones', "the round's spawns fan out to 5 clones (max 4)"]]);
    expect(t.contexts).toHaveLength(1);
  });

  it('validates its configuration', () => {
    expect(() => defaultRolloutConfig('arithmetic', { maxClonesPerRound: 0 })).toThrow(/maxClonesPerRound must be an integer in \[1, 30\]/);
    expect(() => defaultRolloutConfig('arithmetic', { budgets: [7] })).toThrow(/budgets must be /);
    expect(() => defaultRolloutConfig('arithmetic', { temperature: 0 })).toThrow(/temperature must be /);
    expect(() => defaultRolloutConfig('arithmetic', { rootMaxTokens: 1.5 })).toThrow(/rootMaxTokens/);
  });
});

describe('rollout scheduler (tiny model)', () => {
  beforeAll(async () => {
    await initBackend('wasm');
  });

  const run = async (problems: Problem[], seeds: number[], cfg: RolloutConfig) => {
    const config = presetConfig('tiny');
    const params = initParams(config, 5);
    const decoder = new PolicyDecoder({ config, params });
    const s = new RolloutScheduler(decoder, cfg, { policyVersion: 0, encode });
    problems.forEach((p, i) => s.addEpisode(arithmetic, p, new Rng(seeds[i])));
    const traces = await s.run();
    decoder.dispose();
    params.forEach((p) => p.dispose());
    return traces;
  };

  it('finishes every episode, classified, with consistent counts; same seeds give the same traces', async () => {
    const rng = new Rng(2);
    const problems = Array.from({ length: 6 }, (_, i) => arithmetic.generate(rng, arithmetic.defaultOptions, `t${i}`));
    const cfg = defaultRolloutConfig('arithmetic', { rootMaxTokens: 40 });
    const before = tf.memory().numTensors;
    const a = await run(problems, [1, 2, 3, 4, 5, 6], cfg);
    expect(tf.memory().numTensors).toBe(before);
    const b = await run(problems, [1, 2, 3, 4, 5, 6], cfg);
    expect(b).toEqual(a);
    // What the scheduler writes is what the trace reader accepts.
    expect(parseTracesJsonl(tracesToJsonl(a))).toEqual(a);
    for (const t of a) {
      expect(t.answer !== null || t.violations.length > 0).toBe(true);
      for (const c of t.contexts) {
        expect(c.writers.length).toBe(c.tokens.length);
        expect(c.logprobs.length).toBe(c.generatedTokens);
        expect(c.writers.split('').filter((w) => w === 'g').length).toBe(c.generatedTokens);
        for (const lp of c.logprobs) expect(lp).toBeLessThanOrEqual(0);
      }
      expect(t.tokens.criticalPath).toBeLessThanOrEqual(t.tokens.total);
    }
    // An episode does not depend on what shares its batch.
    const alone = await run([problems[3]], [4], cfg);
    expect(alone[0].contexts.map((c) => c.text)).toEqual(a[3].contexts.map((c) => c.text));
  });
});
