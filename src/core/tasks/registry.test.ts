import { describe, expect, it } from 'vitest';
import { ARITHMETIC_DEFAULTS, arithmetic } from './arithmetic';
import { TASK_NAMES, getTask, withOptions } from './index';
import { multihop } from './multihop';

describe('task registry', () => {
  it('finds tasks by their own names and bundles them with validated options', () => {
    expect(TASK_NAMES).toEqual(['arithmetic', 'multihop']);
    expect(getTask('arithmetic')).toBe(arithmetic);
    const mh = withOptions('multihop', { hops: 3 });
    expect(mh.task).toBe(multihop);
    expect(mh.opts).toEqual({ chunks: 6, perChunk: 3, hops: 3 });
    expect(withOptions('arithmetic').opts).toEqual(ARITHMETIC_DEFAULTS);
    expect(withOptions('arithmetic', null).opts).toEqual(ARITHMETIC_DEFAULTS);
  });

  it('names an unknown task and options that are not an object of valid fields', () => {
    expect(() => getTask('constructor')).toThrow('unknown task "constructor" (available: arithmetic, multihop)');
    expect(() => withOptions('sorting', {})).toThrow('unknown task "sorting" (available: arithmetic, multihop)');
    expect(() => withOptions('arithmetic', [3])).toThrow('arithmetic: options must be an object of fields (got [3])');
    expect(() => withOptions('multihop', 'hops=3')).toThrow('multihop: options must be an object of fields (got "hops=3")');
    expect(() => withOptions('arithmetic', { productRate: '0.5' })).toThrow('arithmetic: productRate must be in [0, 1] (got 0.5)');
    expect(() => withOptions('multihop', { hops: 9 })).toThrow(/multihop: hops must be an integer in \[1, 4\] \(got 9\)/);
  });
});
