import { describe, expect, it } from 'vitest';
import { emaSmooth } from './smoothing';

describe('emaSmooth (debiased EMA, as TensorBoard)', () => {
  it('matches the hand-computed values', () => {
    // w = 0.5: last = 0.5, 1.25 (0.5·0.5 + 0.5·2), 2.625 (0.5·1.25 + 0.5·4); debias 1 − 0.5^k = 0.5, 0.75, 0.875.
    const s = emaSmooth([1, 2, 4], 0.5);
    expect(s[0]).toBeCloseTo(1, 12);
    expect(s[1]).toBeCloseTo(1.25 / 0.75, 12);
    expect(s[2]).toBeCloseTo(2.625 / 0.875, 12);
    expect(s[2]).toBeCloseTo(3, 12);
  });

  it('starts at the first value (debiased), and weight 0 is the raw series', () => {
    expect(emaSmooth([0.4, 0.75, 0.5], 0.97)[0]).toBeCloseTo(0.4, 12);
    expect(emaSmooth([0.4, 0.75, 0.5], 0)).toEqual([0.4, 0.75, 0.5]);
  });

  it('damps swings: the smoothed series of an alternating one stays near its mean', () => {
    const raw = Array.from({ length: 200 }, (_, i) => (i % 2 ? 0.75 : 0.4));
    const tail = emaSmooth(raw, 0.9).slice(100);
    expect(Math.max(...tail) - Math.min(...tail)).toBeLessThan(0.04);
    expect(tail[tail.length - 1]).toBeCloseTo(0.575, 1);
  });

  it('passes non-finite values through without counting them, keeps constants exact', () => {
    const s = emaSmooth([1, NaN, 3], 0.5);
    expect(s[1]).toBeNaN();
    // The NaN does not count: the 3 is the second value (last = 0.5·0.5 + 0.5·3 = 1.75, debias 0.75).
    expect(s[2]).toBeCloseTo(1.75 / 0.75, 12);
    expect(emaSmooth([0.3, 0.3, 0.3], 0.9)).toEqual([0.3, 0.3, 0.3]);
  });

  it('refuses a weight outside [0, 1)', () => {
    expect(() => emaSmooth([1], 1)).toThrow(/\[0, 1\)/);
    expect(() => emaSmooth([1], -0.1)).toThrow(/\[0, 1\)/);
  });
});
