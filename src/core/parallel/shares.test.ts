import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { GradFold, type GradItem, readGradItem, releaseGradItem } from './grads';
import { type QueueRemote, type QueueWork, type Remote, type ShareWork, claimer, computeQueue, computeShares } from './shares';

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

const remote =
  (log: string[], answer: 'sum' | 'gone'): Remote<number[], string> =>
  async (s) => {
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

describe('computeQueue', () => {
  /** Item i's result is its square; `folds` logs what was folded, in order, and where it came from. */
  const work = (mine: number[], folds: string[] = []): QueueWork<number, string> => ({
    here: async (i: number) => {
      mine.push(i);
      await new Promise((r) => setTimeout(r, 2));
      return i * i;
    },
    fold: (i, r) => folds.push(`${i}: ${'here' in r ? `${r.here} here` : r.away}`),
    release: (r: number) => mine.push(-r - 1),
  });
  /** A remote that claims like a worker: once its message has arrived, one item at a time, a tick each. */
  const worker =
    (taken: number[], stopAfter = Infinity, answer: 'results' | 'gone' = 'results'): QueueRemote<string> =>
    async (claims) => {
      await new Promise((r) => setTimeout(r, 1));
      const out = new Map<number, string>();
      const next = claimer(claims);
      for (let i = next(); i >= 0 && out.size < stopAfter; i = next()) {
        taken.push(i);
        await new Promise((r) => setTimeout(r, 3));
        out.set(i, `${i * i} away`);
      }
      return answer === 'gone' ? null : out;
    };
  const plan = {
    order: [3, 0, 4, 1, 2],
    shares: [
      [0, 3],
      [1, 2, 4],
    ],
  };

  it('lets each thread take the next item from a shared order, and folds every item once, in index order', async () => {
    const mine: number[] = [];
    const taken: number[] = [];
    const folds: string[] = [];
    await computeQueue(plan, [worker(taken)], work(mine, folds), { shared: true });
    expect([...mine, ...taken].sort()).toEqual([0, 1, 2, 3, 4]);
    expect(mine[0]).toBe(3); // this thread takes the first (costliest) item before any message is read
    expect(taken.length).toBeGreaterThan(0);
    expect(folds).toEqual([0, 1, 2, 3, 4].map((i) => `${i}: ${i * i} ${mine.includes(i) ? 'here' : 'away'}`));
  });

  it('alone, folds each item as soon as it is done', async () => {
    const mine: number[] = [];
    const folds: string[] = [];
    const w = work(mine, folds);
    const here = w.here;
    w.here = async (i) => {
      expect(folds.length).toBe(i); // every item before this one is already folded
      return here(i);
    };
    await computeQueue({ order: [2, 0, 1], shares: [[0, 1, 2]] }, [], w);
    expect(folds).toEqual(['0: 0 here', '1: 1 here', '2: 4 here']);
  });

  it('deals the fixed shares where memory is not shared', async () => {
    const mine: number[] = [];
    const taken: number[] = [];
    const folds: string[] = [];
    await computeQueue(plan, [worker(taken)], work(mine, folds), { shared: false });
    expect(mine).toEqual([0, 3]);
    expect(taken).toEqual([1, 2, 4]);
    expect(folds).toEqual(['0: 0 here', '1: 1 away', '2: 4 away', '3: 9 here', '4: 16 away']);
  });

  it('computes here what a gone worker had taken', async () => {
    const mine: number[] = [];
    const taken: number[] = [];
    const folds: string[] = [];
    await computeQueue(plan, [worker(taken, 1, 'gone')], work(mine, folds), { shared: true });
    expect(taken.length).toBe(1);
    expect(mine.sort()).toEqual([0, 1, 2, 3, 4]);
    expect(folds).toEqual(['0: 0 here', '1: 1 here', '2: 4 here', '3: 9 here', '4: 16 here']);
  });

  it('gives up on a worker that does not answer in time and computes its items here', async () => {
    let signal: AbortSignal | null = null;
    const hangs: QueueRemote<string> = (claims, sig) => {
      signal = sig;
      claimer(claims)(); // takes an item, then never answers
      return new Promise(() => {});
    };
    const folds: string[] = [];
    await computeQueue(plan, [hangs], work([], folds), { shared: true, patience: () => 30 });
    expect(signal!.aborted).toBe(true);
    expect((signal!.reason as Error).message).toBe("no answer within 0.0 s of this thread's items");
    expect(folds).toEqual(['0: 0 here', '1: 1 here', '2: 4 here', '3: 9 here', '4: 16 here']);
  });

  it('fails when a worker fails or answers for an item it cannot have, releasing what was not folded and giving up on the rest', async () => {
    const mine: number[] = [];
    const failing: QueueRemote<string> = async () => {
      throw new Error('worker crashed');
    };
    // Item 0 was folded at once; item 3 waits for the worker's items 1 and 2, and is released.
    await expect(computeQueue(plan, [failing], work(mine), { shared: false })).rejects.toThrow('worker crashed');
    expect(mine).toEqual([0, 3, -10]);
    const liar: QueueRemote<string> = async () => new Map([[7, 'x']]);
    await expect(computeQueue(plan, [liar], work([]), { shared: true })).rejects.toThrow(
      'computeQueue: remote 0 answered item 7, which it was not given (5 items)',
    );
    const notGiven: QueueRemote<string> = async () => new Map([[3, 'x']]);
    await expect(computeQueue(plan, [notGiven], work([]), { shared: false })).rejects.toThrow(
      'computeQueue: remote 0 answered item 3, which it was not given (5 items)',
    );
    let signal: AbortSignal | null = null;
    const slow: QueueRemote<string> = (_c, sig) => {
      signal = sig;
      return new Promise(() => {});
    };
    // This thread takes every item before the remote's message arrives: an answer for one is a second computation.
    const twice: QueueRemote<string> = async () => new Map([[1, 'x']]);
    await expect(computeQueue({ order: [0, 1], shares: [[0], [1]] }, [twice], work([]), { shared: true })).rejects.toThrow(
      'computeQueue: remote 0 answered item 1, which another thread also computed',
    );
    await expect(
      computeQueue(
        { order: [0, 1], shares: [[0], [1]] },
        [slow],
        { ...work([]), here: async () => Promise.reject(new Error('out of memory')) },
        { shared: false },
      ),
    ).rejects.toThrow('out of memory');
    expect(signal!.aborted).toBe(true); // the worker still at it is given up on
    await expect(computeQueue(plan, [], work([]))).rejects.toThrow('computeQueue: 2 shares for 0 remotes and this thread');
  });
});

describe('GradFold', () => {
  it('adds items in index order to the same bits whichever were computed here or away', async () => {
    const params = new Map([['w', tf.variable(tf.zeros([3, 5]), true, 'fold-test-w')]]);
    const values = Array.from({ length: 5 }, (_, i) => Array.from({ length: 15 }, (_, j) => Math.sin(i * 31 + j * 7) * 10 ** ((j % 7) - 3)));
    const item = (i: number): GradItem => ({ grads: new Map([['w', tf.tensor2d(values[i], [3, 5])]]), scalars: tf.tensor1d([values[i][0], i]) });
    const sum = async (away: (i: number) => boolean) => {
      const fold = new GradFold(params, 2);
      for (let i = 0; i < values.length; i++) fold.add(away(i) ? { away: await readGradItem(item(i)) } : { here: item(i) });
      const scalars = await fold.finish();
      const bits = new Uint32Array(((await fold.grads.get('w')!.data()) as Float32Array).slice().buffer);
      fold.release();
      return { bits: [...bits], scalars };
    };
    const before = tf.memory().numTensors;
    const all = await sum(() => false);
    expect(await sum((i) => i % 2 === 1)).toEqual(all);
    expect(await sum(() => true)).toEqual(all);
    expect(all.scalars[1]).toBe(0 + 1 + 2 + 3 + 4);
    expect(tf.memory().numTensors).toBe(before);
    const fold = new GradFold(params, 2);
    expect(() => fold.add({ away: { grads: new Map([['v', new Float32Array(15)]]), scalars: [0, 0] } })).toThrow(
      'gradient worker: a gradient for v, which the policy does not have',
    );
    expect(() => fold.add({ away: { grads: new Map([['w', new Float32Array(4)]]), scalars: [0, 0] } })).toThrow(
      'gradient worker: 4 values for w, which has 15',
    );
    expect(() => fold.add({ away: { grads: new Map(), scalars: [0] } })).toThrow('gradient worker: an item with 1 scalars, 2 expected');
    const odd = item(0);
    expect(() => new GradFold(params, 3).add({ here: odd })).toThrow('gradients: an item with 2 scalars, 3 expected');
    releaseGradItem(odd); // an item that did not fit stays the caller's
    fold.release();
    expect(tf.memory().numTensors).toBe(before);
    params.get('w')!.dispose();
  });
});
