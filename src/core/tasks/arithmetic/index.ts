/** The arithmetic task: generator, exact verifier and teacher. */
import type { ProtocolLimits } from '../../protocol/grammar';
import type { Rng } from '../../rng';
import type { Problem, Task, TeacherStyle, Verdict } from '../types';
import { evaluateExact, formatSum, operandCount, parseSum } from './expr';
import { type ArithmeticOptions, ARITHMETIC_DEFAULTS, generateSum, validateArithmeticOptions } from './generate';
import { delegateContexts, monoContexts, naiveDelegateContexts } from './teacher';

export * from './expr';
export * from './generate';
export * from './teacher';

/** A canonical integer: optional minus, no leading zeros. */
const INTEGER = /^-?(0|[1-9][0-9]*)$/;

export function parseIntegerAnswer(answer: string | null): number | null {
  if (answer === null || !INTEGER.test(answer) || answer === '-0') return null;
  return Number(answer);
}

export const arithmetic: Task<ArithmeticOptions> = {
  name: 'arithmetic',
  defaultOptions: ARITHMETIC_DEFAULTS,
  validateOptions: validateArithmeticOptions,
  presets: [
    {
      name: 'default',
      label: `default (${ARITHMETIC_DEFAULTS.minOperands}–${ARITHMETIC_DEFAULTS.maxOperands} operands up to ${ARITHMETIC_DEFAULTS.maxValue})`,
      options: {},
    },
  ],

  generate(rng: Rng, opts: ArithmeticOptions, id: string): Problem {
    const operands = rng.int(opts.minOperands, opts.maxOperands);
    const s = generateSum(rng, operands, opts);
    return {
      task: 'arithmetic',
      id,
      prompt: formatSum(s),
      truth: String(evaluateExact(s)),
      meta: { operands: operandCount(s), terms: s.terms.length },
    };
  },

  verify(problem: Problem, answer: string | null): Verdict {
    const value = parseIntegerAnswer(answer);
    const truthValue = Number(problem.truth);
    // Exact: both are canonical integer texts, so equal values are equal strings (beyond 2^53 the doubles may round together).
    return { correct: value !== null && answer === problem.truth, value, truthValue };
  },

  teacherMono(problem: Problem) {
    return { problem, style: 'mono', contexts: monoContexts(parseSum(problem.prompt)) };
  },

  teacherDelegate(problem: Problem, rng: Rng, limits: ProtocolLimits, style: TeacherStyle = 'expert') {
    const teacher = style === 'naive' ? naiveDelegateContexts : delegateContexts;
    const contexts = teacher(parseSum(problem.prompt), rng, limits);
    return contexts ? { problem, style: 'delegate', contexts } : null;
  },
};
