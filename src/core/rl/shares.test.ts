import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { type GradItem, readGradItem, sumGradItems } from './grads';
import { type Claims, type QueueRemote, claimer, computeQueue } from './shares';
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

describe('computeQueue', () => {
  /** Item i's result is its square, labelled with where it was computed. */
  const here = (log: number[]) => ({
    here: async (i: number) => {
      log.push(i);
      await new Promise((r) => setTimeout(r, 2));
      return i * i;
    },
    release: (r: number) => log.push(-r - 1),
  });
  /** A remote that claims like a worker: once its message has arrived, one item at a time, a tick each. */
  const worker = (taken: number[], stopAfter = Infinity, answer: 'results' | 'gone' = 'results'): QueueRemote<string> => async (claims) => {
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
  const plan = { order: [3, 0, 4, 1, 2], shares: [[0, 3], [1, 2, 4]] };

  it('lets each thread take the next item from a shared order: every item once, results by index', async () => {
    const mine: number[] = [];
    const taken: number[] = [];
    const r = await computeQueue(plan, [worker(taken)], here(mine), { shared: true });
    expect([...mine, ...taken].sort()).toEqual([0, 1, 2, 3, 4]);
    expect(mine[0]).toBe(3); // this thread takes the first (costliest) item before any message is read
    expect(taken.length).toBeGreaterThan(0);
    r.forEach((x, i) => expect(x).toEqual(mine.includes(i) ? { here: i * i } : { away: `${i * i} away` }));
  });

  it('deals the fixed shares where memory is not shared', async () => {
    const mine: number[] = [];
    const taken: number[] = [];
    const r = await computeQueue(plan, [worker(taken)], here(mine), { shared: false });
    expect(mine).toEqual([0, 3]);
    expect(taken).toEqual([1, 2, 4]);
    expect(r.map((x) => ('here' in x ? 'here' : 'away'))).toEqual(['here', 'away', 'away', 'here', 'away']);
  });

  it('computes here what a gone worker had taken', async () => {
    const mine: number[] = [];
    const taken: number[] = [];
    const r = await computeQueue(plan, [worker(taken, 1, 'gone')], here(mine), { shared: true });
    expect(taken.length).toBe(1);
    expect(mine.sort()).toEqual([0, 1, 2, 3, 4]);
    expect(r.every((x) => 'here' in x)).toBe(true);
  });

  it('gives up on a worker that does not answer in time and computes its items here', async () => {
    let signal: AbortSignal | null = null;
    const hangs: QueueRemote<string> = (claims, sig) => {
      signal = sig;
      claimer(claims)(); // takes an item, then never answers
      return new Promise(() => {});
    };
    const mine: number[] = [];
    const r = await computeQueue(plan, [hangs], here(mine), { shared: true, patience: () => 30 });
    expect(signal!.aborted).toBe(true);
    expect((signal!.reason as Error).message).toBe("no answer within 0.0 s of this thread's items");
    expect(r.map((x) => ('here' in x ? x.here : x.away))).toEqual([0, 1, 4, 9, 16]);
  });

  it('fails when a worker fails or answers for an item it cannot have, releasing what was computed here', async () => {
    const mine: number[] = [];
    const failing: QueueRemote<string> = async () => {
      throw new Error('worker crashed');
    };
    await expect(computeQueue(plan, [failing], here(mine), { shared: false })).rejects.toThrow('worker crashed');
    expect(mine).toEqual([0, 3, -1, -10]);
    const liar: QueueRemote<string> = async () => new Map([[7, 'x']]);
    await expect(computeQueue(plan, [liar], here([]), { shared: true })).rejects.toThrow('computeQueue: remote 0 answered item 7 of 5');
    const twice: QueueRemote<string> = async (claims: Claims) => new Map([['fixed' in claims ? 0 : 0, 'x']]);
    await expect(computeQueue(plan, [twice], here([]), { shared: false })).rejects.toThrow('computeQueue: remote 0 answered item 0, which another thread computed');
    await expect(computeQueue(plan, [], here([]))).rejects.toThrow('computeQueue: 2 shares for 0 remotes and this thread');
  });
});

describe('sumGradItems', () => {
  it('adds items in index order to the same bits whichever were computed here or away', async () => {
    const params = new Map([['w', tf.variable(tf.zeros([3, 5]), true, 'sum-test-w')]]);
    const values = Array.from({ length: 5 }, (_, i) => Array.from({ length: 15 }, (_, j) => Math.sin(i * 31 + j * 7) * 10 ** ((j % 7) - 3)));
    const item = (i: number): GradItem => ({ grads: new Map([['w', tf.tensor2d(values[i], [3, 5])]]), scalars: tf.tensor1d([values[i][0], i]) });
    const sum = async (away: (i: number) => boolean) => {
      const items = await Promise.all(values.map(async (_, i) => (away(i) ? { away: await readGradItem(item(i)) } : { here: item(i) })));
      const r = await sumGradItems(items, params, 2);
      const bits = new Uint32Array(((await r.grads.get('w')!.data()) as Float32Array).slice().buffer);
      r.grads.forEach((t) => t.dispose());
      return { bits: [...bits], scalars: r.scalars };
    };
    const before = tf.memory().numTensors;
    const all = await sum(() => false);
    expect(await sum((i) => i % 2 === 1)).toEqual(all);
    expect(await sum(() => true)).toEqual(all);
    expect(all.scalars[1]).toBe(0 + 1 + 2 + 3 + 4);
    expect(tf.memory().numTensors).toBe(before);
    await expect(sumGradItems([{ away: { grads: new Map([['v', new Float32Array(15)]]), scalars: [0, 0] } }], params, 2)).rejects.toThrow('gradient worker: a gradient for v, which the policy does not have');
    await expect(sumGradItems([{ away: { grads: new Map([['w', new Float32Array(4)]]), scalars: [0, 0] } }], params, 2)).rejects.toThrow('gradient worker: 4 values for w, which has 15');
    await expect(sumGradItems([{ here: item(0) }], params, 3)).rejects.toThrow('gradients: an item with 2 scalars, 3 expected');
    expect(tf.memory().numTensors).toBe(before);
    params.get('w')!.dispose();
  });
});
