/**
 * Seeded generator of arithmetic problems.
 *
 * Difficulty is set so that one reduction step is easy (every intermediate value within
 * ±maxValue, every product with a one-digit side, parentheses never negative) while the
 * monolithic chain of thought grows quadratically with the operand count — the whole
 * expression is rewritten after every step — so long expressions strain one context and
 * splitting them across clones pays.
 */
import type { Rng } from '../../rng';
import { type Factor, type Sum, evaluate, num, operandCount, reductionChain } from './expr';
import { optionFields } from '../options';

export interface ArithmeticOptions {
  minOperands: number;
  maxOperands: number;
  /** Bound on the absolute value of the result and of every intermediate value. */
  maxValue: number;
  /** Probability that a term is a product, and that it is a parenthesised group. */
  productRate: number;
  groupRate: number;
}

export const ARITHMETIC_DEFAULTS: ArithmeticOptions = {
  minOperands: 3,
  maxOperands: 8,
  maxValue: 99,
  productRate: 0.3,
  groupRate: 0.15,
};

export const MAX_OPERANDS = 16;

/** Options from outside (see Task.validateOptions): fields not given take ARITHMETIC_DEFAULTS. */
export function validateArithmeticOptions(raw: unknown): ArithmeticOptions {
  const o = { ...ARITHMETIC_DEFAULTS, ...optionFields('arithmetic', raw) };
  const intIn = (field: keyof ArithmeticOptions, lo: number, hi: number) => {
    const v = o[field];
    if (!Number.isInteger(v) || v < lo || v > hi) {
      throw new Error(`arithmetic: ${field} must be an integer in [${lo}, ${hi}] (got ${v})`);
    }
  };
  const rate = (field: keyof ArithmeticOptions) => {
    const v = o[field];
    if (!(typeof v === 'number' && v >= 0 && v <= 1)) throw new Error(`arithmetic: ${field} must be in [0, 1] (got ${v})`);
  };
  intIn('minOperands', 2, MAX_OPERANDS);
  intIn('maxOperands', 2, MAX_OPERANDS);
  if (o.maxOperands < o.minOperands) {
    throw new Error(`arithmetic: maxOperands (${o.maxOperands}) must be ≥ minOperands (${o.minOperands})`);
  }
  intIn('maxValue', 20, 9999);
  rate('productRate');
  rate('groupRate');
  if (o.productRate + o.groupRate > 1) throw new Error('arithmetic: productRate + groupRate must be ≤ 1');
  return o;
}

function operand(rng: Rng): number {
  // Half one-digit, half two-digit operands; zero is rare (it makes steps trivial).
  return rng.bool() ? (rng.bool(0.05) ? 0 : rng.int(1, 9)) : rng.int(10, 99);
}

function digit(rng: Rng): number {
  return rng.int(2, 9);
}

/** A term using at most `budget` operands; returns the term and the operands it used. */
function randomTerm(rng: Rng, budget: number, o: ArithmeticOptions): { term: Factor[]; used: number } {
  const r = rng.next();
  if (budget >= 2 && r < o.groupRate) {
    const inner = Math.min(budget, rng.int(2, 3));
    const ops = Array.from({ length: inner - 1 }, () => (rng.bool() ? '+' : '-') as '+' | '-');
    const group: Factor = { kind: 'group', sum: { terms: Array.from({ length: inner }, () => [num(operand(rng))]), ops, neg: false } };
    if (inner < budget && rng.bool()) {
      const d = num(digit(rng));
      return { term: rng.bool() ? [d, group] : [group, d], used: inner + 1 };
    }
    return { term: [group], used: inner };
  }
  if (budget >= 2 && r < o.groupRate + o.productRate) {
    const d = num(digit(rng));
    const x = num(operand(rng));
    return { term: rng.bool() ? [d, x] : [x, d], used: 2 };
  }
  return { term: [num(operand(rng))], used: 1 };
}

/** True when every step stays within bounds and every product has a one-digit side. */
export function withinBounds(s: Sum, maxValue: number): boolean {
  if (Math.abs(evaluate(s)) > maxValue) return false;
  for (const t of s.terms) {
    for (const f of t) if (f.kind === 'group' && evaluate(f.sum) < 0) return false;
  }
  for (const step of reductionChain(s).steps) {
    if (Math.abs(step.result) > maxValue) return false;
    if (step.op === '*' && Math.min(Math.abs(step.a), Math.abs(step.b)) > 9) return false;
  }
  return true;
}

/** An expression with exactly `operands` operands; rejection-samples until in bounds. */
export function generateSum(rng: Rng, operands: number, o: ArithmeticOptions): Sum {
  for (let attempt = 0; attempt < 10_000; attempt++) {
    const terms: Factor[][] = [];
    let left = operands;
    while (left > 0) {
      const { term, used } = randomTerm(rng, left, o);
      terms.push(term);
      left -= used;
    }
    const ops = terms.slice(1).map(() => (rng.bool(0.6) ? '+' : '-') as '+' | '-');
    const s: Sum = { terms, ops, neg: false };
    if (operandCount(s) !== operands) throw new Error('generator bookkeeping error');
    if (withinBounds(s, o.maxValue)) return s;
  }
  throw new Error(`arithmetic: could not generate ${operands} operands within ±${o.maxValue}`);
}
