import { describe, expect, it } from 'vitest';
import { countTokens, TRACE_SCHEMA, type ContextTrace, type EpisodeTrace } from '../../core/rollout/trace';
import type { Violation } from '../../core/protocol/violations';
import { countLine, episodeMarks, filterRollouts, isRolloutFilter, markBadges, matches, violationClassesOf } from './rolloutFilter';

function ctx(id: number, role: 'root' | 'clone', extra: Partial<ContextTrace> = {}): ContextTrace {
  return {
    id,
    role,
    parent: role === 'root' ? null : 0,
    round: role === 'root' ? null : 0,
    subtask: null,
    budget: role === 'root' ? null : 16,
    tokens: [],
    text: '',
    writers: '',
    logprobs: [],
    generatedTokens: 4,
    answer: '1',
    violation: null,
    violationDetail: null,
    ...extra,
  };
}

function episode(correct: boolean, contexts: ContextTrace[]): EpisodeTrace {
  const violations = contexts.filter((c) => c.violation).map((c) => ({ violation: c.violation as Violation, context: c.id, detail: c.violationDetail ?? '' }));
  return {
    schema: TRACE_SCHEMA,
    policyVersion: 1,
    task: 'arithmetic',
    problemId: 'p',
    prompt: '1+2',
    truth: '3',
    method: 'delegate',
    answer: correct ? '3' : '4',
    correct,
    rounds: 1,
    contexts,
    events: [],
    violations,
    tokens: countTokens(contexts),
  };
}

const gate = { advantage: 0, weight: 1, gated: true, reward: 0 };
const rows = [
  // 0: mono, correct
  episode(true, [ctx(0, 'root')]),
  // 1: delegating, wrong, one gated clone that had no answer
  episode(false, [ctx(0, 'root'), ctx(1, 'clone', { violation: 'clone_no_answer', violationDetail: 'no <ans>', answer: null, credit: gate })]),
  // 2: delegating, correct, one ungated clone over budget
  episode(true, [ctx(0, 'root'), ctx(1, 'clone', { violation: 'clone_over_budget', answer: null, credit: { ...gate, gated: false, reward: 1 } })]),
  // 3: mono, wrong, root without answer
  episode(false, [ctx(0, 'root', { violation: 'root_no_answer', answer: null })]),
].map((trace, key) => ({ key, step: 1, trace }));

const keys = (f: Parameters<typeof matches>[1]) => rows.filter((r) => matches(r.trace, f)).map((r) => r.key);

describe('rollout filter', () => {
  it('selects by outcome, gating, violation and delegation', () => {
    expect(keys('all')).toEqual([0, 1, 2, 3]);
    expect(keys('correct')).toEqual([0, 2]);
    expect(keys('wrong')).toEqual([1, 3]);
    expect(keys('gated')).toEqual([1]);
    expect(keys('violation')).toEqual([1, 2, 3]);
    expect(keys('delegating')).toEqual([1, 2]);
    expect(keys('violation:clone_over_budget')).toEqual([2]);
    expect(keys('violation:root_no_answer')).toEqual([3]);
  });

  it('caps what is shown, not what is counted', () => {
    const { matching, shown } = filterRollouts(rows, 'violation', 2);
    expect(matching).toBe(3);
    expect(shown.map((r) => r.key)).toEqual([1, 2]);
  });

  it('says what is shown of what matches and what is kept', () => {
    expect(countLine(60, 200, 200, 'all')).toBe('showing 60 of 200, newest first');
    expect(countLine(8, 8, 8, 'all')).toBe('showing all 8, newest first');
    expect(countLine(60, 143, 200, 'wrong')).toBe('showing 60 of 143 wrong · 200 kept, newest first');
    expect(countLine(3, 3, 200, 'violation:clone_over_budget')).toBe('showing 3 of 3 with clone_over_budget · 200 kept, newest first');
    expect(countLine(5, 5, 200, 'violation')).toBe('showing 5 of 5 with a violation · 200 kept, newest first');
    expect(countLine(0, 0, 0, 'all')).toBe('none yet: train or step');
  });

  it('offers the violation classes that occur, in table order, and validates filter names', () => {
    expect(violationClassesOf(rows)).toEqual(['clone_over_budget', 'clone_no_answer', 'root_no_answer']);
    expect(isRolloutFilter('gated')).toBe(true);
    expect(isRolloutFilter('violation:clone_spawn')).toBe(true);
    expect(isRolloutFilter('violation:nope')).toBe(false);
    expect(isRolloutFilter('constructor')).toBe(false);
  });

  it('marks a gated clone apart from an ungated violating one', () => {
    expect(episodeMarks(rows[1].trace).violations).toEqual([{ violation: 'clone_no_answer', context: 1, detail: 'no <ans>', gated: true }]);
    expect(episodeMarks(rows[2].trace).violations.map((v) => v.gated)).toEqual([false]);
    const gatedOnly = episode(true, [ctx(0, 'root'), ctx(2, 'clone', { credit: gate })]);
    expect(episodeMarks(gatedOnly)).toEqual({ violations: [], gatedWithoutViolation: [2] });
  });

  it('groups the table badges: one per ungated class with its count, one "gated" for every gated context', () => {
    const t = episode(false, [
      ctx(0, 'root'),
      ctx(1, 'clone', { violation: 'clone_over_budget', credit: { ...gate, gated: false } }),
      ctx(2, 'clone', { violation: 'clone_over_budget', credit: { ...gate, gated: false } }),
      ctx(3, 'clone', { violation: 'clone_no_answer', credit: gate }),
      ctx(4, 'clone', { violation: 'clone_over_budget', credit: gate }),
    ]);
    expect(markBadges(t).map(({ kind, text, count }) => [kind, text, count])).toEqual([
      ['violation', 'clone_over_budget', 2],
      ['gated', 'gated', 2],
    ]);
    expect(markBadges(rows[0].trace)).toEqual([]);
  });
});
