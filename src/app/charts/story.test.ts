import { describe, expect, it } from 'vitest';
import type { FrontierPoint } from '../../core/eval/frontier';
import { wilsonInterval } from '../../core/eval/stats';
import { MEASURED_STEP_SEC, delegationDataOf, liveReadings, paceSentence, storySentence } from './story';

function point(method: 'delegate' | 'mono', step: number | undefined, correct: number, n: number, delegated?: number): FrontierPoint {
  return {
    method,
    limit: 224,
    n,
    accuracy: correct / n,
    meanTokens: 40,
    meanCriticalPathTokens: 30,
    interval: wilsonInterval(correct, n),
    ...(delegated !== undefined ? { delegationRate: delegated / n } : {}),
    ...(step === undefined ? {} : { step }),
  };
}

describe('the story of a run', () => {
  it('reads the live evaluations in step order, delegate first, and leaves out points without a step', () => {
    const r = liveReadings([point('mono', 10, 5, 64), point('delegate', 10, 34, 64, 50), point('delegate', 0, 5, 64, 8), point('delegate', undefined, 60, 64)]);
    expect(r.map((x) => [x.step, x.method])).toEqual([
      [0, 'delegate'],
      [10, 'delegate'],
      [10, 'mono'],
    ]);
    const [lo, hi] = wilsonInterval(34, 64);
    expect(r[1]).toEqual({ step: 10, method: 'delegate', accuracy: 34 / 64, lo, hi, n: 64, delegationRate: 50 / 64 });
    expect('delegationRate' in r[2]).toBe(false);
  });

  it('says what changed between the first reading and the newest, and whether the intervals are apart', () => {
    // 5/64 = 7.8% [3.4, 17.0] → 34/64 = 53.1% [41.1, 64.8]: apart.
    const rose = liveReadings([point('delegate', 0, 5, 64, 8), point('delegate', 5, 12, 64, 30), point('delegate', 10, 34, 64, 51)]);
    expect(storySentence(rose)).toBe(
      'held-out accuracy 8% [3%, 17%] at step 0 → 53% [41%, 65%] at step 10 (intervals apart: a real rise); problems delegated 13% → 80%.',
    );
    const noise = liveReadings([point('delegate', 0, 30, 64, 8), point('delegate', 5, 34, 64, 9)]);
    expect(storySentence(noise)).toMatch(/\(intervals overlap: within the noise so far\); problems delegated 13% → 14%\.$/);
    expect(storySentence(rose.slice(0, 1))).toBeNull();
    // Older points without the delegated share: the sentence leaves it out.
    expect(storySentence(liveReadings([point('delegate', 0, 5, 64), point('delegate', 10, 34, 64)]))).toMatch(/a real rise\)\.$/);
  });

  it('charts the delegated share of the delegate readings with Wilson intervals', () => {
    const d = delegationDataOf(liveReadings([point('delegate', 0, 5, 64, 8), point('mono', 0, 5, 64, 0), point('delegate', 10, 34, 64, 51)]));
    expect(d.steps).toEqual([0, 10]);
    expect(d.series[0].values).toEqual([8 / 64, 51 / 64]);
    expect(d.series[0].intervals).toEqual([wilsonInterval(8, 64), wilsonInterval(51, 64)]);
    expect(delegationDataOf([]).series).toEqual([]);
  });

  it("says this machine's pace and when the next reading comes, and that it is slower than the demo's machine where it is", () => {
    expect(paceSentence([], 0, 4)).toBeNull();
    expect(paceSentence([5], 1, 0)).toBeNull();
    // The last three steps took 30, 26 and 25 s (27 s a step); 4 steps done, the next reading after step 8, 4 steps away.
    expect(paceSentence([30, 26, 25], 4, 4)).toBe(
      `27 s a GRPO step here: the next reading, after step 8, in about 108 s. This machine runs slower than the 2-core one the demo was measured on (${MEASURED_STEP_SEC} s a step): the same curve comes later.`,
    );
    expect(paceSentence([6, 8], 2, 2)).toBe('7 s a GRPO step here: the next reading, after step 4, in about 14 s.');
  });
});
