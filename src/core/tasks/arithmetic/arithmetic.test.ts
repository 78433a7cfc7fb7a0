import { defaultRolloutConfig } from '../../runConfigTargets';
import type { ProtocolLimits } from '../../protocol/grammar';
import { describe, expect, it } from 'vitest';
import { arithmeticProbe, strategyOf } from '../../eval/strategy';
import { Rng } from '../../rng';
import { RolloutScheduler } from '../../rollout/scheduler';
import { ScriptedDecoder } from '../../rollout/scriptedDecoder';
import { Tokenizer } from '../../tokenizer/tokenizer';
import type { DemoContext, Demonstration, Problem } from '../types';
import { evaluate, evaluateExact, formatSum, parseSum, reductionChain, sumOfValues } from './expr';
import { arithmetic, parseIntegerAnswer } from './index';
import { chainText, combineSlices, firstTokens, sliceSum, tokenLength } from './teacher';

/** The rollout settings these tests were written against: the table's, with a root limit of 224. */
const ROLLOUT = defaultRolloutConfig('arithmetic', { rootMaxTokens: 224 });

const tok = Tokenizer.builtin();

describe('expressions', () => {
  it('reduces one operation per step with precedence and parentheses', () => {
    const s = parseSum('2+3*(4-1)-5');
    expect(reductionChain(s).chain.map(formatSum)).toEqual(['2+3*3-5', '2+9-5', '11-5', '6']);
    expect(chainText(parseSum('8-9*2'))).toBe('=8-18=-10<ans>-10<eos>');
  });

  it('keeps a leading minus on the first factor', () => {
    const s = parseSum('-(3+4)*2+5');
    expect(evaluate(s)).toBe(-9);
    expect(reductionChain(s).chain.map(formatSum)).toEqual(['-7*2+5', '-14+5', '-9']);
    expect(formatSum(sumOfValues([-3, 5, -7]))).toBe('-3+5-7');
  });

  it('parses what it formats and rejects malformed text with a position', () => {
    for (const t of ['1', '12*3-(4+5)', '-2+7*8', '(1-2+3)*4']) expect(formatSum(parseSum(t))).toBe(t);
    expect(() => parseSum('1+')).toThrow(/expected a number at position 2/);
    expect(() => parseSum('((1))')).toThrow(/nested parentheses/);
    expect(() => parseSum('1+2)')).toThrow(/unexpected "\)"/);
    expect(() => parseSum('07')).toThrow(/leading zero/);
  });
});

describe('generator', () => {
  it('is seeded and respects its bounds', () => {
    const o = arithmetic.defaultOptions;
    const a = Array.from({ length: 50 }, (_, i) => arithmetic.generate(new Rng(3 + i), o, String(i)).prompt);
    const b = Array.from({ length: 50 }, (_, i) => arithmetic.generate(new Rng(3 + i), o, String(i)).prompt);
    expect(a).toEqual(b);
    const rng = new Rng(11);
    for (let i = 0; i < 500; i++) {
      const p = arithmetic.generate(rng, o, String(i));
      const s = parseSum(p.prompt);
      expect(p.meta.operands).toBeGreaterThanOrEqual(3);
      expect(p.meta.operands).toBeLessThanOrEqual(8);
      expect(String(evaluate(s))).toBe(p.truth);
      for (const step of reductionChain(s).steps) {
        expect(Math.abs(step.result)).toBeLessThanOrEqual(o.maxValue);
        if (step.op === '*') expect(Math.min(Math.abs(step.a), Math.abs(step.b))).toBeLessThanOrEqual(9);
      }
    }
  });

  it('reaches 16 operands for out-of-distribution tests', () => {
    const o = arithmetic.validateOptions({ minOperands: 16, maxOperands: 16 });
    const p = arithmetic.generate(new Rng(5), o, 'ood');
    expect(p.meta.operands).toBe(16);
  });

  it('rejects bad options naming the field', () => {
    expect(() => arithmetic.validateOptions({ maxOperands: 17 })).toThrow(/maxOperands must be an integer in \[2, 16\]/);
    expect(() => arithmetic.validateOptions({ minOperands: 6, maxOperands: 4 })).toThrow(/maxOperands \(4\) must be ≥ minOperands/);
    expect(() => arithmetic.validateOptions({ productRate: 2 })).toThrow(/productRate must be in \[0, 1\]/);
  });
});

describe('verifier', () => {
  const p = { task: 'arithmetic', id: 'x', prompt: '2+3', truth: '5', meta: {} };
  it('accepts only the exact canonical integer', () => {
    expect(arithmetic.verify(p, '5').correct).toBe(true);
    for (const a of ['05', '5.0', '+5', '', null, '6', '-5']) expect(arithmetic.verify(p, a).correct).toBe(false);
    expect(parseIntegerAnswer('-0')).toBeNull();
    expect(arithmetic.verify(p, '6').value).toBe(6);
  });

  it('is exact beyond 2^53: 123456789*987654321 = 121932631112635269', () => {
    const s = parseSum('123456789*987654321');
    expect(evaluateExact(s)).toBe(121932631112635269n);
    // The doubles round it (to …5264), and a neighbour rounds to the same double.
    expect(String(evaluate(s))).not.toBe('121932631112635269');
    expect(Number('121932631112635268')).toBe(Number('121932631112635269'));
    const big = { task: 'arithmetic', id: 'big', prompt: '123456789*987654321', truth: String(evaluateExact(s)), meta: {} };
    expect(big.truth).toBe('121932631112635269');
    expect(arithmetic.verify(big, '121932631112635269').correct).toBe(true);
    expect(arithmetic.verify(big, '121932631112635268').correct).toBe(false);
    expect(evaluateExact(parseSum('-(2+3)*4-10000000000*10000000000'))).toBe(-100000000000000000020n);
    expect(() => evaluateExact(parseSum('99999999999999999*2'))).toThrow(/operand .* above 2\^53 − 1/);
  });

  it('gives generated problems the same truth as the double evaluation (all well below 2^53)', () => {
    const rng = new Rng(3);
    for (let i = 0; i < 200; i++) {
      const p = arithmetic.generate(rng, arithmetic.defaultOptions, String(i));
      expect(p.truth).toBe(String(evaluate(parseSum(p.prompt))));
    }
  });
});

describe('teacher', () => {
  it('writes monolithic and delegated demonstrations whose pieces add up', () => {
    const rng = new Rng(9);
    let delegated = 0;
    const budgets = new Set<number>();
    const parts = new Set<number>();
    for (let i = 0; i < 300; i++) {
      const p = arithmetic.generate(rng, arithmetic.defaultOptions, String(i));
      const mono = arithmetic.teacherMono(p, rng);
      expect(mono.contexts[0].segments.map((s) => s.text).join('')).toMatch(new RegExp(`<ans>${p.truth}<eos>$`));
      const d = arithmetic.teacherDelegate(p, rng, ROLLOUT);
      if (!d) continue;
      delegated++;
      const [root, ...clones] = d.contexts;
      parts.add(clones.length);
      expect(clones.length).toBeGreaterThanOrEqual(2);
      expect(clones.length).toBeLessThanOrEqual(4);
      // Clone answers sum to the truth, every clone fits its budget, and the spawn text names it.
      const answers = clones.map((c) => Number(/<ans>(-?\d+)<eos>$/.exec(c.segments[1].text)![1]));
      expect(answers.reduce((a, b) => a + b, 0)).toBe(Number(p.truth));
      const spawnText = root.segments[1].text;
      const blocks = [...spawnText.matchAll(/<spawn>([^<]+)<b(\d+)>/g)];
      expect(blocks.length).toBe(clones.length);
      blocks.forEach((m, j) => {
        expect(clones[j].segments[0].text).toBe(`<clone>${m[1]}<sep>`);
        expect(tokenLength(clones[j].segments[1].text)).toBeLessThanOrEqual(Number(m[2]));
        budgets.add(Number(m[2]));
      });
      expect(root.segments[2]).toEqual({ kind: 'injected', text: answers.map((a) => `<ret>${a}`).join('') + '<resume>' });
      expect(root.segments[3].text.endsWith(`<ans>${p.truth}<eos>`)).toBe(true);
      for (const c of d.contexts) tok.encode(c.segments.map((s) => s.text).join(''));
    }
    expect(delegated).toBeGreaterThan(250);
    expect(parts.size).toBeGreaterThanOrEqual(3);
    expect(budgets.size).toBeGreaterThanOrEqual(3);
  });

  it('demonstrates only the spawn limits it is given', () => {
    const rng = new Rng(9);
    const limits = { budgets: [16, 64], maxClonesPerRound: 2, maxRounds: 1 };
    let delegated = 0;
    for (let i = 0; i < 200; i++) {
      const p = arithmetic.generate(rng, arithmetic.defaultOptions, String(i));
      const d = arithmetic.teacherDelegate(p, rng, limits);
      if (!d) continue;
      delegated++;
      expect(d.contexts.length - 1).toBe(2);
      for (const m of d.contexts[0].segments[1].text.matchAll(/<b(\d+)>/g)) expect([16, 64]).toContain(Number(m[1]));
    }
    expect(delegated).toBeGreaterThan(100);
    expect(arithmetic.teacherDelegate(arithmetic.generate(rng, arithmetic.defaultOptions, 'x'), rng, { ...limits, maxClonesPerRound: 1 })).toBeNull();
    expect(arithmetic.teacherDelegate(arithmetic.generate(rng, arithmetic.defaultOptions, 'y'), rng, { ...limits, maxRounds: 0 })).toBeNull();
  });
});

const textOf = (c: DemoContext) => c.segments.map((g) => g.text).join('');
const generatedOf = (c: DemoContext) =>
  c.segments
    .filter((g) => g.kind === 'generated')
    .map((g) => g.text)
    .join('');
const spawnsOf = (d: Demonstration) =>
  [...d.contexts[0].segments[1].text.matchAll(/<spawn>([^<]+)<b(\d+)>/g)].map((m) => ({ sub: m[1], budget: Number(m[2]) }));

/** Naive demonstrations of a problem stream (every problem delegated), with the problems. */
function naiveDemos(n: number, seed: number, limits: ProtocolLimits = ROLLOUT) {
  const rng = new Rng(seed);
  return Array.from({ length: n }, (_, i) => {
    const p = arithmetic.generate(rng, arithmetic.defaultOptions, String(i));
    const d = arithmetic.teacherDelegate(p, rng, limits, 'naive');
    if (!d) throw new Error(`no naive demonstration for ${p.prompt}`);
    return d;
  });
}

describe('naive teacher', () => {
  it('draws 1–4 clones uniformly, budgets from every bucket (too small ones included), and reaches the truth', () => {
    const demos = naiveDemos(400, 21);
    const counts = [0, 0, 0, 0, 0];
    const countsLong = [0, 0, 0, 0, 0]; // problems with at least 4 top-level terms: every count possible
    const budgets = new Map<number, number>();
    const tooSmall = new Map<number, number>();
    let clones = 0;
    for (const d of demos) {
      const [root, ...cs] = d.contexts;
      const spawns = spawnsOf(d);
      expect(spawns.length).toBe(cs.length);
      counts[cs.length]++;
      if (parseSum(d.problem.prompt).terms.length >= 4) countsLong[cs.length]++;
      const answers: (number | null)[] = [];
      spawns.forEach(({ sub, budget }, j) => {
        clones++;
        budgets.set(budget, (budgets.get(budget) ?? 0) + 1);
        const full = chainText(parseSum(sub));
        const gen = generatedOf(cs[j]);
        expect(cs[j].segments[0]).toEqual({ kind: 'prompt', text: `<clone>${sub}<sep>` });
        // The clone's chain text is the expert's; over budget it is that chain cut at the budget.
        expect(full.startsWith(gen)).toBe(true);
        expect(tokenLength(gen)).toBeLessThanOrEqual(budget);
        if (tokenLength(full) > budget) {
          tooSmall.set(budget, (tooSmall.get(budget) ?? 0) + 1);
          expect(tokenLength(gen)).toBe(budget);
          answers.push(null);
        } else {
          expect(gen).toBe(full);
          answers.push(evaluate(parseSum(sub)));
        }
      });
      // The slices, put back together, are the prompt.
      expect(
        spawns
          .map((s) => s.sub)
          .join('+')
          .replace(/\+-/g, '-'),
      ).toBe(d.problem.prompt);
      expect(root.segments[2]).toEqual({ kind: 'injected', text: answers.map((a) => (a === null ? '<ret><fail>' : `<ret>${a}`)).join('') + '<resume>' });
      expect(root.segments[3].text.endsWith(`<ans>${d.problem.truth}<eos>`)).toBe(true);
      for (const c of d.contexts) tok.encode(textOf(c));
    }
    const share = (xs: number[], k: number) => xs[k] / xs.reduce((a, b) => a + b, 0);
    for (let k = 1; k <= 4; k++) {
      expect(share(counts, k), `${k} clones`).toBeGreaterThan(0.12);
      expect(share(countsLong, k), `${k} clones, ≥4 terms`).toBeGreaterThan(0.18);
      expect(share(countsLong, k), `${k} clones, ≥4 terms`).toBeLessThan(0.32);
    }
    for (const b of ROLLOUT.budgets) {
      expect((budgets.get(b) ?? 0) / clones, `budget ${b}`).toBeGreaterThan(0.15);
      expect((budgets.get(b) ?? 0) / clones, `budget ${b}`).toBeLessThan(0.25);
    }
    // Too small for their chain: the 8-token bucket often (a lone number fits it), 16 and 32 now and then.
    for (const b of [8, 16, 32]) expect(tooSmall.get(b) ?? 0, `too small ${b}`).toBeGreaterThan(0);
    expect(tooSmall.get(8)! / budgets.get(8)!).toBeGreaterThan(0.3);
  });

  it('cuts anywhere: a lone number is as likely a slice as any other', () => {
    const s = parseSum('1+2+3+4+5');
    const p: Problem = { task: 'arithmetic', id: 'x', prompt: formatSum(s), truth: '15', meta: {} };
    const rng = new Rng(4);
    const at = [0, 0, 0, 0, 0];
    for (let i = 0; i < 2000; i++) {
      const d = arithmetic.teacherDelegate(p, rng, ROLLOUT, 'naive')!;
      const subs = spawnsOf(d).map((x) => x.sub);
      if (subs.length === 2) at[subs[0].split('+').length]++;
    }
    const n = at.reduce((a, b) => a + b, 0);
    expect(n).toBeGreaterThan(400);
    // Cut after term 1 or 4 leaves a lone number: each cut a quarter, as uniform cuts give.
    for (let c = 1; c <= 4; c++) expect(Math.abs(at[c] / n - 0.25), `cut ${c}`).toBeLessThan(0.06);
  });

  it('keeps to the limits: clones per round, buckets, no round', () => {
    const limits = { budgets: [16, 64], maxClonesPerRound: 2, maxRounds: 1 };
    for (const d of naiveDemos(200, 5, limits)) {
      expect([1, 2]).toContain(d.contexts.length - 1);
      for (const { budget } of spawnsOf(d)) expect([16, 64]).toContain(budget);
    }
    // One clone per round: the whole sum to a single clone.
    for (const d of naiveDemos(50, 6, { ...limits, maxClonesPerRound: 1 })) expect(spawnsOf(d).map((x) => x.sub)).toEqual([d.problem.prompt]);
    const rng = new Rng(1);
    expect(arithmetic.teacherDelegate(arithmetic.generate(rng, arithmetic.defaultOptions, 'y'), rng, { ...limits, maxRounds: 0 }, 'naive')).toBeNull();
  });

  it('demonstrates every context as the runtime has it: an over-budget clone cut, <fail> injected, the root finishing its slice', async () => {
    const demos = naiveDemos(120, 33);
    const scripts: number[][] = [];
    for (const d of demos) {
      scripts.push(tok.encode(textOf(d.contexts[0])));
      // A clone writes its whole chain; the runtime, not the script, stops it at the budget.
      for (const { sub } of spawnsOf(d)) scripts.push(tok.encode(`<clone>${sub}<sep>${chainText(parseSum(sub))}`));
    }
    const scheduler = new RolloutScheduler(
      new ScriptedDecoder(scripts, tok.vocabSize, (h) => tok.decode(h)),
      { ...ROLLOUT, greedy: true },
      { policyVersion: 0, encode: (t) => tok.encode(t) },
    );
    demos.forEach((d, i) => scheduler.addEpisode(arithmetic, d.problem, new Rng(i)));
    const traces = await scheduler.run();
    let cut = 0;
    traces.forEach((t, i) => {
      const d = demos[i];
      expect(t.contexts.map((c) => c.text)).toEqual(d.contexts.map(textOf));
      expect(t.answer).toBe(d.problem.truth);
      const over = spawnsOf(d).filter(({ sub, budget }) => tokenLength(chainText(parseSum(sub))) > budget).length;
      expect(t.violations.map((v) => v.violation)).toEqual(Array(over).fill('clone_over_budget'));
      cut += over;
    });
    expect(cut).toBeGreaterThan(40);
    // The strategy summary of these episodes counts the same too-small budgets.
    const summary = strategyOf(traces, arithmeticProbe);
    expect(summary.tooSmall).toBe(cut);
    expect(summary.judged).toBe(summary.clones);
  });

  it('combines answered and failed slices into a sum of the same value', () => {
    const s = parseSum('57+77-1+7*7-1');
    const slices = sliceSum(s, [3, 4]);
    expect(slices.map(formatSum)).toEqual(['57+77-1', '7*7', '-1']);
    expect(formatSum(combineSlices(slices, [133, null, -1]))).toBe('133+7*7-1');
    expect(formatSum(combineSlices(slices, [null, 49, -1]))).toBe('57+77-1+49-1');
    expect(formatSum(combineSlices(sliceSum(parseSum('-3+4'), [1]), [-3, null]))).toBe('-3+4');
    expect(formatSum(combineSlices(slices, [133, 49, -1]))).toBe(formatSum(sumOfValues([133, 49, -1])));
    expect(firstTokens('=49-1=48<ans>48<eos>', 9)).toBe('=49-1=48<ans>');
  });
});
