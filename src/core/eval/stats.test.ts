import { describe, expect, it } from 'vitest';
import { majorityVote, paretoSet, wilsonInterval } from './stats';

describe('Wilson interval', () => {
  it('matches known values', () => {
    // Textbook values (z = 1.96): 8/10 → [0.4902, 0.9433]; 0/10 → [0, 0.2775]; 50/100 → [0.4038, 0.5962].
    const [a, b] = wilsonInterval(8, 10);
    expect(a).toBeCloseTo(0.4902, 4);
    expect(b).toBeCloseTo(0.9433, 4);
    const [c, d] = wilsonInterval(0, 10);
    expect(c).toBe(0);
    expect(d).toBeCloseTo(0.2775, 4);
    const [e, f] = wilsonInterval(50, 100);
    expect(e).toBeCloseTo(0.4038, 4);
    expect(f).toBeCloseTo(0.5962, 4);
    expect(wilsonInterval(0, 0)).toEqual([0, 1]);
    expect(() => wilsonInterval(3, 2)).toThrow(/0 ≤ k ≤ n/);
  });
});

describe('majority vote', () => {
  it('counts answers, ignores nulls, breaks ties by first to the top', () => {
    expect(majorityVote(['3', '4', '3', null])).toBe('3');
    expect(majorityVote(['4', '3', '3', '4'])).toBe('3'); // '3' reached two votes first
    expect(majorityVote([null, null])).toBeNull();
    expect(majorityVote(['7', null, '8', '8'])).toBe('8');
    // Answers are model output: names every plain object has are counted like any other.
    expect(majorityVote(['constructor', '__proto__', '__proto__', 'tostring', null])).toBe('__proto__');
    expect(majorityVote(['constructor'])).toBe('constructor');
  });
});

describe('Pareto set', () => {
  it('keeps exactly the undominated points', () => {
    const pts = [
      { cost: 100, accuracy: 0.6 }, // 0: dominated by 2
      { cost: 50, accuracy: 0.4 }, // 1: cheapest
      { cost: 80, accuracy: 0.7 }, // 2
      { cost: 200, accuracy: 0.9 }, // 3: most accurate
      { cost: 200, accuracy: 0.85 }, // 4: dominated by 3
      { cost: 80, accuracy: 0.7 }, // 5: ties 2 exactly — neither dominates
    ];
    expect(paretoSet(pts)).toEqual([2, 5, 1, 3].sort((a, b) => pts[a].cost - pts[b].cost || a - b));
    expect(paretoSet([])).toEqual([]);
  });
});
