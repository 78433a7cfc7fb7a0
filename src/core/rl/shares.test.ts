import { describe, expect, it } from 'vitest';
import { type Remote, type ShareWork, computeShares } from './shares';

/** Shares of numbers; the result is a log of who computed what, in the order it was folded. */
function work(log: string[]): ShareWork<number[], string[], string> {
  return {
    isEmpty: (s) => s.length === 0,
    here: async (s) => {
      log.push(`here ${s.join(',')}`);
      return [`sum ${s.reduce((a, b) => a + b, 0)} here`];
    },
    add: (acc, k, r) => acc.push('here' in r ? `${k}: ${r.here[0]}` : `${k}: ${r.away}`),
    release: (acc) => acc.push('released'),
  };
}

const remote = (log: string[], answer: 'sum' | 'gone'): Remote<number[], string> => async (s) => {
  log.push(`away ${s.join(',')}`);
  return answer === 'gone' ? null : `sum ${s.reduce((a, b) => a + b, 0)} away`;
};

describe('computeShares', () => {
  it('starts the remotes, computes share 0, then folds the answers in share order', async () => {
    const log: string[] = [];
    const acc = await computeShares([[1, 2], [3], [4, 5]], [remote(log, 'sum'), remote(log, 'sum')], work(log));
    expect(log).toEqual(['away 3', 'away 4,5', 'here 1,2']);
    expect(acc).toEqual(['sum 3 here', '1: sum 3 away', '2: sum 9 away']);
  });

  it('computes the share of a gone worker here, and neither sends nor computes an empty share', async () => {
    const log: string[] = [];
    const acc = await computeShares([[1], [], [2, 3]], [remote(log, 'sum'), remote(log, 'gone')], work(log));
    expect(log).toEqual(['away 2,3', 'here 1', 'here 2,3']);
    expect(acc).toEqual(['sum 1 here', '2: sum 5 here']);
  });

  it('releases share 0 and fails when a remote fails, after share 0 is done', async () => {
    const log: string[] = [];
    const w = work(log);
    let acc: string[] | null = null;
    const here = w.here;
    w.here = async (s) => (acc = await here(s));
    const failing: Remote<number[], string> = async () => {
      throw new Error('worker crashed');
    };
    await expect(computeShares([[1], [2]], [failing], w)).rejects.toThrow('worker crashed');
    expect(acc).toEqual(['sum 1 here', 'released']);
  });

  it('gives up on a remote that does not answer in time: its signal aborts and its share is computed here', async () => {
    const log: string[] = [];
    let signal: AbortSignal | null = null;
    const hangs: Remote<number[], string> = (_s, sig) => {
      signal = sig;
      return new Promise(() => {});
    };
    let asked: number | null = null;
    const t0 = Date.now();
    const acc = await computeShares([[1], [2, 3], [4]], [hangs, remote(log, 'sum')], work(log), (localMs) => {
      asked = localMs;
      return 50;
    });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(45);
    expect(asked).toBeGreaterThanOrEqual(0);
    expect(signal!.aborted).toBe(true);
    expect((signal!.reason as Error).message).toBe("no answer within 0.1 s of this thread's share");
    // The remote that answered is still read after the one given up on.
    expect(acc).toEqual(['sum 1 here', '1: sum 5 here', '2: sum 4 away']);
  });

  it('refuses shares that do not match the remotes', async () => {
    await expect(computeShares([[1]], [remote([], 'sum')], work([]))).rejects.toThrow('computeShares: 1 shares for 1 remotes and this thread');
  });
});
