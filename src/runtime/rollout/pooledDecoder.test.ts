/**
 * The pool against the in-process decoder, with real worker threads and the tiny preset:
 * same logits, same episodes, contexts spread over workers, weight versions, device loss.
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { presetConfig } from '../../core/model/config';
import { BatchedDecoder } from '../../core/model/decode';
import { type GPTParams, disposeParams, initParams, paramsToArrays } from '../../core/model/params';
import { Rng } from '../../core/rng';
import { defaultRolloutConfig } from '../../core/runConfigTargets';
import { PolicyDecoder } from '../../core/rollout/policyDecoder';
import { type ContextDecoder, RolloutScheduler } from '../../core/rollout/scheduler';
import { arithmetic } from '../../core/tasks/arithmetic';
import { Tokenizer } from '../../core/tokenizer/tokenizer';
import { initBackend } from '../backend';
import { startNodePool } from '../node/pool';
import { PooledDecoder } from './pooledDecoder';
import type { RolloutPool } from './rolloutPool';
import { DEVICE_LOST } from './rolloutMessages';
import { RpcError } from '../transport/rpc';
import { packWeights } from '../transport/weights';

const config = presetConfig('tiny');
const tok = Tokenizer.builtin();
const encode = (t: string) => tok.encode(t);
let pool: RolloutPool;
let params: GPTParams;

async function broadcast(p: GPTParams, version: number) {
  await pool.broadcast({ version, model: { kind: 'toy', config }, payload: packWeights(await paramsToArrays(p), true) });
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

beforeAll(async () => {
  await initBackend('wasm');
  params = initParams(config, 11);
  pool = await startNodePool(2);
  await broadcast(params, 1);
});

afterAll(() => {
  pool?.terminate();
  if (params) disposeParams(params);
});

/** Opens contexts of different lengths in both decoders and compares every feed. */
async function compareFeeds(local: ContextDecoder, pooled: ContextDecoder) {
  const prompts = [[1, 5, 9], [2, 3, 4, 5, 6, 7, 8], [9], [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21], [30, 31, 32, 33, 34]];
  const a = prompts.map(() => local.open());
  const b = prompts.map(() => pooled.open());
  let worst = 0;
  worst = Math.max(worst, maxDiff(await local.feed(a, prompts), await pooled.feed(b, prompts)));
  for (let step = 0; step < 3; step++) {
    const next = prompts.map((_, i) => [(i * 7 + step * 3) % 60]);
    // Feed a subset in a shuffled order: the answer must follow the caller's order.
    const order = step === 1 ? [4, 0, 2] : [3, 1, 0, 4, 2];
    worst = Math.max(
      worst,
      maxDiff(
        await local.feed(
          order.map((i) => a[i]),
          order.map((i) => next[i]),
        ),
        await pooled.feed(
          order.map((i) => b[i]),
          order.map((i) => next[i]),
        ),
      ),
    );
  }
  return { worst, a, b };
}

describe('PooledDecoder over 2 worker threads', () => {
  it('gives the in-process logits for contexts of different lengths and spreads them', async () => {
    const local = new BatchedDecoder(params, config);
    const pooled = new PooledDecoder(pool, { kind: 'toy', config });
    const { worst, a, b } = await compareFeeds(local, pooled);
    expect(worst).toBeLessThan(1e-5);
    expect(pooled.load()).toEqual([3, 2]);
    expect(b.map((s) => pooled.workerOf(s))).toEqual([0, 1, 0, 1, 0]);
    for (const s of b) pooled.close(s);
    for (const s of a) local.close(s);
    expect(pooled.load()).toEqual([0, 0]);
    local.dispose();
  });

  it('matches the in-process decoder through a random mix of opens, feeds and closes', async () => {
    // What clones do to a decoder: contexts appear (prefill) and end while others keep going.
    const local = new BatchedDecoder(params, config);
    const pooled = new PooledDecoder(pool, { kind: 'toy', config });
    const rng = new Rng(3);
    const live: { a: number; b: number; length: number }[] = [];
    let worst = 0;
    let feeds = 0;
    for (let op = 0; op < 30; op++) {
      const r = rng.next();
      if (live.length < 2 || r < 0.3) {
        const n = 1 + rng.int(0, 2);
        const fresh = Array.from({ length: n }, () => ({ a: local.open(), b: pooled.open(), length: 1 + rng.int(0, 9) }));
        const prompts = fresh.map((c) => Array.from({ length: c.length }, () => rng.int(0, config.vocabSize - 1)));
        worst = Math.max(
          worst,
          maxDiff(
            await local.feed(
              fresh.map((c) => c.a),
              prompts,
            ),
            await pooled.feed(
              fresh.map((c) => c.b),
              prompts,
            ),
          ),
        );
        live.push(...fresh);
      } else if (r < 0.45) {
        const [gone] = live.splice(rng.int(0, live.length - 1), 1);
        local.close(gone.a);
        pooled.close(gone.b);
      } else {
        const some = live.filter((c) => c.length < 40 && rng.bool(0.8));
        if (some.length === 0) continue;
        const toks = some.map(() => [rng.int(0, config.vocabSize - 1)]);
        some.forEach((c) => c.length++);
        worst = Math.max(
          worst,
          maxDiff(
            await local.feed(
              some.map((c) => c.a),
              toks,
            ),
            await pooled.feed(
              some.map((c) => c.b),
              toks,
            ),
          ),
        );
      }
      feeds++;
    }
    expect(feeds).toBeGreaterThan(20);
    expect(worst).toBeLessThan(1e-5);
    // Least-loaded placement keeps the two workers within one context of each other.
    const [x, y] = pooled.load();
    expect(x + y).toBe(live.length);
    for (const c of live) pooled.close(c.b);
    local.dispose();
  });

  it('runs a batch of episodes to the same traces as the in-process decoder', async () => {
    const cfg = defaultRolloutConfig('arithmetic', { temperature: 1, rootMaxTokens: 40 });
    const run = async (decoder: ContextDecoder) => {
      const s = new RolloutScheduler(decoder, cfg, { policyVersion: 1, encode });
      const rng = new Rng(5);
      for (let i = 0; i < 8; i++) {
        const problem = arithmetic.generate(rng, arithmetic.defaultOptions, `p${i}`);
        for (let g = 0; g < 4; g++) s.addEpisode(arithmetic, problem, rng.fork());
      }
      return s.run();
    };
    const local = new PolicyDecoder({ config, params });
    const expected = await run(local);
    local.dispose();
    const pooled = new PooledDecoder(pool, { kind: 'toy', config });
    const got = await run(pooled);
    expect(got.map((t) => t.contexts.map((c) => c.tokens))).toEqual(expected.map((t) => t.contexts.map((c) => c.tokens)));
    const lp = (ts: typeof got) => ts.flatMap((t) => t.contexts.flatMap((c) => c.logprobs));
    const diffs = lp(got).map((v, i) => Math.abs(v - lp(expected)[i]));
    expect(Math.max(...diffs)).toBeLessThan(1e-4);
    expect(got.reduce((n, t) => n + t.tokens.total, 0)).toBeGreaterThan(60);
    expect(pooled.load()).toEqual([0, 0]);
  });

  it('a weight broadcast bumps the version and the logits follow the new weights', async () => {
    const other = initParams(config, 12);
    const pooled = new PooledDecoder(pool, { kind: 'toy', config });
    const before = await pooled.feed([pooled.open()], [[1, 2, 3]]);
    await broadcast(other, 2);
    expect(pool.version).toBe(2);
    const slot = pooled.open();
    const after = await pooled.feed([slot], [[1, 2, 3]]);
    const local = new BatchedDecoder(other, config);
    const want = await local.feed([local.open()], [[1, 2, 3]]);
    expect(maxDiff(after, want)).toBeLessThan(1e-5);
    expect(maxDiff(after, before)).toBeGreaterThan(1e-3);
    local.dispose();
    disposeParams(other);
    await pooled.reset();
    await broadcast(params, 3);
  });

  it('a worker that lost its device refuses work until the pool re-uploads its weights', async () => {
    const pooled = new PooledDecoder(pool, { kind: 'toy', config });
    const events: number[] = [];
    const off = pool.onBackendChange((i) => events.push(i));
    const r = await pool.request(1, { kind: 'loseDevice' });
    expect(r.backend.notes[0]).toMatch(/device lost \(simulated device loss\), fell back to wasm/);
    expect(events).toEqual([1]);
    expect(pool.healthy).toBe(false);
    const slots = [pooled.open(), pooled.open()];
    const err = await pooled.feed(slots, [[1], [2]]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcError);
    expect((err as RpcError).code).toBe(DEVICE_LOST);
    await pooled.reset();
    expect(await pool.repair()).toEqual(['rollout worker 1: weights re-uploaded (version 3)']);
    expect(pool.healthy).toBe(true);
    const s2 = [pooled.open(), pooled.open()];
    const got = await pooled.feed(s2, [
      [1, 2],
      [3, 4, 5],
    ]);
    const local = new BatchedDecoder(params, config);
    const want = await local.feed(
      [local.open(), local.open()],
      [
        [1, 2],
        [3, 4, 5],
      ],
    );
    expect(maxDiff(got, want)).toBeLessThan(1e-5);
    local.dispose();
    off();
    expect(tf.memory().numTensors).toBeGreaterThan(0);
  });
});
