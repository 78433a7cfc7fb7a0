import { describe, expect, it } from 'vitest';
import { type ContextTrace, type EpisodeTrace, TRACE_SCHEMA } from '../rollout/trace';
import { arithmeticProbe, strategyOf } from './strategy';

function ctx(id: number, role: 'root' | 'clone', subtask: string | null, budget: number | null): ContextTrace {
  return {
    id,
    role,
    parent: role === 'root' ? null : 0,
    round: role === 'root' ? null : 0,
    subtask,
    budget,
    tokens: [],
    text: '',
    writers: '',
    logprobs: [],
    generatedTokens: 0,
    answer: null,
    violation: null,
    violationDetail: null,
  };
}

/** A hand-made episode: its prompt and its clones' (subtask, budget). */
function episode(prompt: string, clones: [string, number][], correct = false, total = 0): EpisodeTrace {
  return {
    schema: TRACE_SCHEMA,
    policyVersion: 0,
    task: 'arithmetic',
    problemId: prompt,
    prompt,
    truth: '0',
    method: 'delegate',
    answer: null,
    correct,
    rounds: clones.length > 0 ? 1 : 0,
    contexts: [ctx(0, 'root', null, null), ...clones.map(([s, b], i) => ctx(i + 1, 'clone', s, b))],
    events: [],
    violations: [],
    tokens: { root: 0, clonesTotal: 0, longestClonePerRound: [], criticalPath: 0, total },
  };
}

describe('strategy summary', () => {
  it('counts delegation, accuracy and tokens by operand count, budgets by bucket and the budgets below a clone’s need', () => {
    // Needs: "5" → <ans>5<eos> = 3 tokens; "57+77" → =134<ans>134<eos> = 9; "7*7-1" → =49-1=48<ans>48<eos> = 12.
    expect(arithmeticProbe.need('5')).toBe(3);
    expect(arithmeticProbe.need('57+77')).toBe(9);
    expect(arithmeticProbe.need('7*7-1')).toBe(12);
    const traces = [
      episode('1+2+3', [], true, 12),
      episode('1+2+3', [['1+2', 8]], false, 30), // need =3<ans>3<eos> = 7: fits
      episode('57+77-1+7*7-1', [
        ['57+77', 8],
        ['-1', 16],
        ['7*7-1', 16],
      ]), // 57+77 too small
      episode('57+77-1+7*7-1', [['57+77-1+7*7-1', 32]]), // needs 48: too small
      episode('57+77-1+7*7-1', [], true, 40),
      episode('2*3', [['2*', 64]], true, 9), // a subtask that does not parse: counted, not judged
    ];
    const s = strategyOf(traces, arithmeticProbe);
    expect(s.episodes).toBe(6);
    expect(s.delegated).toBe(4);
    expect(s.bySize).toEqual([
      { size: 2, episodes: 1, delegated: 1, rate: 1, correct: 1, accuracy: 1, meanTokens: 9 },
      { size: 3, episodes: 2, delegated: 1, rate: 0.5, correct: 1, accuracy: 0.5, meanTokens: 21 },
      { size: 6, episodes: 3, delegated: 2, rate: 2 / 3, correct: 1, accuracy: 1 / 3, meanTokens: 40 / 3 },
    ]);
    expect(s.cloneCounts).toEqual({ 1: 3, 3: 1 });
    expect(s.clones).toBe(6);
    expect(s.budgets).toEqual({ 8: 2, 16: 2, 32: 1, 64: 1, 128: 0 });
    expect(arithmeticProbe.need('57+77-1+7*7-1')).toBe(48);
    expect(s.judged).toBe(5);
    expect(s.tooSmall).toBe(2);
    expect(s.tooSmallShare).toBeCloseTo(0.4, 12);
  });

  it('never throws on model output and reports an empty set as zeros', () => {
    for (const t of ['', '1+', '((1))', '5+(1-3)*2', '<ctx>k1 x?']) expect(arithmeticProbe.need(t)).toBeNull();
    expect(arithmeticProbe.size('nonsense')).toBeNull();
    const s = strategyOf([episode('nonsense', [['', 16]])], arithmeticProbe, [16]);
    expect(s).toMatchObject({ bySize: [], clones: 1, budgets: { 16: 1 }, judged: 0, tooSmall: 0, tooSmallShare: 0 });
    expect(strategyOf([], arithmeticProbe)).toMatchObject({ episodes: 0, delegated: 0, clones: 0, tooSmallShare: 0 });
  });
});
