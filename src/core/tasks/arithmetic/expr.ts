/**
 * Arithmetic expressions as a small tree, with the one-operation-at-a-time reduction
 * the chain of thought is written in.
 *
 * Shape: a sum of terms (joined by + or −), each term a product of factors, each factor a
 * number or a parenthesised sum (no nesting). Only the very first factor may carry a
 * unary minus, which is how a clone's subtask keeps the sign of its slice of the sum.
 */

export type Factor = { kind: 'num'; value: number } | { kind: 'group'; sum: Sum };
export interface Sum {
  terms: Factor[][];
  /** ops[i] joins terms[i] and terms[i + 1]. */
  ops: ('+' | '-')[];
  /** Unary minus on the first factor of the first term. */
  neg: boolean;
}

export function num(value: number): Factor {
  return { kind: 'num', value };
}

export function formatSum(s: Sum): string {
  let out = s.neg ? '-' : '';
  s.terms.forEach((term, i) => {
    if (i > 0) out += s.ops[i - 1];
    out += term.map(formatFactor).join('*');
  });
  return out;
}

function formatFactor(f: Factor): string {
  return f.kind === 'num' ? String(f.value) : `(${formatSum(f.sum)})`;
}

/** Standard-precedence evaluation, independent of the step reducer (tests compare both). */
export function evaluate(s: Sum): number {
  let total = 0;
  s.terms.forEach((term, i) => {
    let v = term.reduce((p, f) => p * (f.kind === 'num' ? f.value : evaluate(f.sum)), 1);
    if (i === 0 && s.neg) v = -v;
    total = i === 0 ? v : s.ops[i - 1] === '+' ? total + v : total - v;
  });
  return total;
}

/**
 * The exact value (BigInt): a product such as 123456789*987654321 = 121932631112635269 is above
 * 2^53, where `evaluate`'s doubles round. Throws for an operand that is not a safe integer (it
 * was already rounded when parsed), naming it.
 */
export function evaluateExact(s: Sum): bigint {
  let total = 0n;
  s.terms.forEach((term, i) => {
    let v = term.reduce((p, f) => p * (f.kind === 'num' ? exactOperand(f.value) : evaluateExact(f.sum)), 1n);
    if (i === 0 && s.neg) v = -v;
    total = i === 0 ? v : s.ops[i - 1] === '+' ? total + v : total - v;
  });
  return total;
}

function exactOperand(v: number): bigint {
  if (!Number.isSafeInteger(v)) throw new Error(`operand ${v} is above 2^53 − 1 = ${Number.MAX_SAFE_INTEGER}: it cannot be read exactly`);
  return BigInt(v);
}

export function operandCount(s: Sum): number {
  return s.terms.reduce((n, t) => n + t.reduce((m, f) => m + (f.kind === 'num' ? 1 : operandCount(f.sum)), 0), 0);
}

export function isNumber(s: Sum): boolean {
  return s.terms.length === 1 && s.terms[0].length === 1 && s.terms[0][0].kind === 'num';
}

/** The value of a fully reduced sum. */
export function valueOf(s: Sum): number {
  if (!isNumber(s)) throw new Error(`not reduced: ${formatSum(s)}`);
  const f = s.terms[0][0] as { kind: 'num'; value: number };
  return s.neg ? -f.value : f.value;
}

export interface StepInfo {
  /** The two operands and operator of the step, for difficulty checks. */
  a: number;
  b: number;
  op: '+' | '-' | '*';
  result: number;
}

/**
 * One reduction step, precedence respected: the first unfinished parenthesis first,
 * then the leftmost product, then the leftmost + or −. A parenthesis that reduces to a
 * number loses its brackets in the same step. Returns a new tree; the input is unchanged.
 */
export function reduceStep(s: Sum): { next: Sum; step: StepInfo } {
  if (isNumber(s)) throw new Error('nothing to reduce');
  const next = cloneSum(s);
  // 1. Parentheses.
  for (let t = 0; t < next.terms.length; t++) {
    for (let f = 0; f < next.terms[t].length; f++) {
      const factor = next.terms[t][f];
      if (factor.kind !== 'group') continue;
      if (isNumber(factor.sum)) {
        next.terms[t][f] = num(valueOf(factor.sum));
        continue;
      }
      const inner = reduceStep(factor.sum);
      next.terms[t][f] = isNumber(inner.next) ? num(valueOf(inner.next)) : { kind: 'group', sum: inner.next };
      return { next, step: inner.step };
    }
  }
  // 2. The leftmost product. The unary minus belongs to the first factor.
  for (let t = 0; t < next.terms.length; t++) {
    const term = next.terms[t];
    if (term.length < 2) continue;
    let a = factorValue(term[0]);
    if (t === 0 && next.neg) {
      a = -a;
      next.neg = false;
    }
    const b = factorValue(term[1]);
    const result = a * b;
    next.terms[t] = [signedNum(result, t === 0 ? next : null), ...term.slice(2)];
    return { next, step: { a, b, op: '*', result } };
  }
  // 3. The leftmost sum or difference.
  let a = factorValue(next.terms[0][0]);
  if (next.neg) a = -a;
  const b = factorValue(next.terms[1][0]);
  const op = next.ops[0];
  const result = op === '+' ? a + b : a - b;
  next.neg = false;
  next.terms = [[signedNum(result, next)], ...next.terms.slice(2)];
  next.ops = next.ops.slice(1);
  return { next, step: { a, b, op, result } };
}

/** A negative result in first position is written with the sum's unary minus. */
function signedNum(v: number, first: Sum | null): Factor {
  if (v < 0) {
    if (!first) throw new Error('a negative product can only stand first');
    first.neg = true;
    return num(-v);
  }
  return num(v);
}

function factorValue(f: Factor): number {
  if (f.kind !== 'num') throw new Error('factor is not reduced');
  return f.value;
}

function cloneSum(s: Sum): Sum {
  return {
    neg: s.neg,
    ops: [...s.ops],
    terms: s.terms.map((t) => t.map((f) => (f.kind === 'num' ? num(f.value) : { kind: 'group', sum: cloneSum(f.sum) }))),
  };
}

/** Every intermediate expression from the input to the value (input excluded). */
export function reductionChain(s: Sum): { chain: Sum[]; steps: StepInfo[] } {
  const chain: Sum[] = [];
  const steps: StepInfo[] = [];
  let cur = s;
  while (!isNumber(cur)) {
    const { next, step } = reduceStep(cur);
    chain.push(next);
    steps.push(step);
    cur = next;
  }
  return { chain, steps };
}

/** A sum whose terms are plain numbers (the root's combination of clone answers). */
export function sumOfValues(values: number[]): Sum {
  if (values.length === 0) throw new Error('sumOfValues needs at least one value');
  const terms: Factor[][] = values.map((v) => [num(Math.abs(v))]);
  const ops = values.slice(1).map((v) => (v < 0 ? '-' : '+') as '+' | '-');
  return { terms, ops, neg: values[0] < 0 };
}

/**
 * Parse expression text in the grammar above (digits, + - * and one level of
 * parentheses, an optional leading minus). Throws with the position of the problem.
 */
export function parseSum(text: string): Sum {
  let pos = 0;
  const fail = (what: string): never => {
    throw new Error(`expression ${JSON.stringify(text)}: ${what} at position ${pos}`);
  };
  const parseFactor = (depth: number): Factor => {
    if (text[pos] === '(') {
      if (depth > 0) fail('nested parentheses are not supported');
      pos++;
      const sum = parseSumAt(depth + 1);
      if (text[pos] !== ')') fail('expected ")"');
      pos++;
      return { kind: 'group', sum };
    }
    const start = pos;
    while (pos < text.length && text[pos] >= '0' && text[pos] <= '9') pos++;
    if (pos === start) fail('expected a number');
    if (pos - start > 1 && text[start] === '0') fail('a number has a leading zero');
    return num(Number(text.slice(start, pos)));
  };
  const parseTerm = (depth: number): Factor[] => {
    const factors = [parseFactor(depth)];
    while (text[pos] === '*') {
      pos++;
      factors.push(parseFactor(depth));
    }
    return factors;
  };
  const parseSumAt = (depth: number): Sum => {
    let neg = false;
    if (text[pos] === '-') {
      neg = true;
      pos++;
    }
    const terms = [parseTerm(depth)];
    const ops: ('+' | '-')[] = [];
    while (text[pos] === '+' || text[pos] === '-') {
      ops.push(text[pos] as '+' | '-');
      pos++;
      terms.push(parseTerm(depth));
    }
    return { terms, ops, neg };
  };
  const s = parseSumAt(0);
  if (pos !== text.length) fail(`unexpected ${JSON.stringify(text[pos])}`);
  return s;
}
