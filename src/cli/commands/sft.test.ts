import { describe, expect, it } from 'vitest';
import { parseTaskMix } from './sft';

describe('sft --task', () => {
  it('reads one task, a uniform mix and a weighted mix', () => {
    expect(parseTaskMix('arithmetic').map((m) => [m.task.name, m.weight])).toEqual([['arithmetic', 1]]);
    expect(parseTaskMix('arithmetic, multihop').map((m) => [m.task.name, m.weight])).toEqual([
      ['arithmetic', 1],
      ['multihop', 1],
    ]);
    expect(parseTaskMix('arithmetic:1,multihop:2.5').map((m) => m.weight)).toEqual([1, 2.5]);
  });

  it('names a bad task or weight', () => {
    expect(() => parseTaskMix('arithmetic,chess')).toThrow(/--task: .*chess/);
    expect(() => parseTaskMix('arithmetic:0,multihop')).toThrow(/weight of arithmetic must be a positive number \(got "arithmetic:0"\)/);
    expect(() => parseTaskMix('multihop:x')).toThrow(/weight of multihop must be a positive number/);
    expect(() => parseTaskMix('multihop:1:2')).toThrow(/weight of multihop/);
  });
});
