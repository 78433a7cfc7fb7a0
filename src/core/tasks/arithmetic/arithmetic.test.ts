import { ROLLOUT_DEFAULTS } from '../../rollout/config';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../rng';
import { Tokenizer } from '../../tokenizer/tokenizer';
import { evaluate, formatSum, parseSum, reductionChain, sumOfValues } from './expr';
import { arithmetic, parseIntegerAnswer } from './index';
import { chainText, tokenLength } from './teacher';

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
      const d = arithmetic.teacherDelegate(p, rng, ROLLOUT_DEFAULTS);
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
