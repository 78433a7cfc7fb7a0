import { describe, expect, it } from 'vitest';
import { getTask } from '../../core/tasks';
import { problemFromPrompt } from './stepper';

describe("problemFromPrompt (the stepper's own prompt)", () => {
  it('gives the exact truth beyond 2^53', () => {
    const p = problemFromPrompt(getTask('arithmetic'), '123456789*987654321');
    expect(p.truth).toBe('121932631112635269');
    expect(getTask('arithmetic').verify(p, '121932631112635269').correct).toBe(true);
  });

  it('names what it cannot read', () => {
    expect(() => problemFromPrompt(getTask('arithmetic'), '12+')).toThrow(/not an arithmetic expression/);
    expect(() => problemFromPrompt(getTask('arithmetic'), '99999999999999999+1')).toThrow(/above 2\^53 − 1/);
    expect(() => problemFromPrompt(getTask('multihop'), 'a')).toThrow(/arithmetic only/);
  });
});
