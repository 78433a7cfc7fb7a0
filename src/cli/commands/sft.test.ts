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

describe('sft --options', () => {
  it('sets the options of one task, or of each task of a mix', () => {
    expect(parseTaskMix('multihop', '{"perChunk":1}')[0].opts).toMatchObject({ perChunk: 1, chunks: 6, hops: 2 });
    const mix = parseTaskMix('arithmetic:1,multihop:3', '{"multihop":{"hops":3}}');
    expect(mix[1].opts).toMatchObject({ hops: 3, perChunk: 3 });
    expect(mix[0].opts).toMatchObject({ minOperands: 3, maxOperands: 8 });
  });

  it('names bad options', () => {
    expect(() => parseTaskMix('multihop', '{perChunk:1}')).toThrow(/--options: not JSON/);
    expect(() => parseTaskMix('multihop', '{"perchunk":1}')).toThrow(/multihop has no option perchunk \(it has chunks, perChunk, hops\)/);
    expect(() => parseTaskMix('multihop', '{"perChunk":9}')).toThrow(/--options: multihop: perChunk must be an integer in \[1, 6\] \(got 9\)/);
    expect(() => parseTaskMix('arithmetic,multihop', '{"chess":{}}')).toThrow(/chess is not a task of --task/);
    expect(() => parseTaskMix('multihop', '[1]')).toThrow(/give a JSON object/);
  });
});
