import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { Rng } from '../rng';
import { type ModelConfig, PRESETS } from './config';
import { BatchedDecoder } from './decode';
import { forwardLogits } from './gpt';
import { type GPTParams, initParams, paramsFromArrays, paramsToArrays } from './params';

const config: ModelConfig = { ...PRESETS.tiny, nPositions: 96 };
const V = config.vocabSize;
let params: GPTParams;

/** Random init scaled up so attention is far from uniform and a wrong mask changes the logits. */
async function sharpParams(seed: number): Promise<GPTParams> {
  const base = initParams(config, seed);
  const arrays = await paramsToArrays(base);
  base.forEach((v) => v.dispose());
  for (const [name, values] of arrays) if (!name.includes('.ln_')) for (let i = 0; i < values.length; i++) values[i] *= 4;
  return paramsFromArrays(config, arrays);
}

/** Logits after the last token of `seq`, from the training forward over the whole sequence. */
async function reference(p: GPTParams, seq: readonly number[]): Promise<Float32Array> {
  const logits = tf.tidy(() => {
    const all = forwardLogits(p, config, tf.tensor2d([seq as number[]], [1, seq.length], 'int32'));
    return tf.slice(all, [0, seq.length - 1, 0], [1, 1, V]);
  });
  const row = (await logits.data()) as Float32Array;
  logits.dispose();
  return row;
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

async function expectMatches(p: GPTParams, out: Float32Array, seqs: readonly (readonly number[])[]): Promise<void> {
  expect(out.length).toBe(seqs.length * V);
  for (let i = 0; i < seqs.length; i++) {
    const ref = await reference(p, seqs[i]);
    expect(maxAbsDiff(out.subarray(i * V, (i + 1) * V), ref)).toBeLessThan(1e-4);
  }
}

function tokens(rng: Rng, n: number): number[] {
  return Array.from({ length: n }, () => rng.int(0, V - 1));
}

beforeAll(async () => {
  await initBackend('wasm');
  params = await sharpParams(11);
});

describe('BatchedDecoder', () => {
  it('prefill then single steps equal the full forward, for rows of different lengths', async () => {
    const rng = new Rng(1);
    const dec = new BatchedDecoder(params, config);
    const seqs = [3, 9, 1, 14].map((n) => tokens(rng, n));
    const slots = seqs.map(() => dec.open());
    await expectMatches(params, await dec.feed(slots, seqs), seqs);
    for (let step = 0; step < 4; step++) {
      const next = slots.map(() => tokens(rng, 1));
      next.forEach((t, i) => seqs[i].push(...t));
      await expectMatches(params, await dec.feed(slots, next), seqs);
    }
    expect(slots.map((s) => dec.length(s))).toEqual(seqs.map((s) => s.length));
    dec.dispose();
  });

  it('mixed feeds: a prefill, a multi-token append and single steps in one call', async () => {
    const rng = new Rng(2);
    const dec = new BatchedDecoder(params, config);
    const seqs = [5, 2, 7].map((n) => tokens(rng, n));
    const slots = seqs.map(() => dec.open());
    await dec.feed(slots, seqs);
    // A new context prefills while the others step, and one context gets an injected block.
    const fresh = tokens(rng, 6);
    const injected = tokens(rng, 4);
    const newSlot = dec.open();
    const feedSlots = [slots[0], newSlot, slots[1], slots[2]];
    const lists = [tokens(rng, 1), fresh, injected, tokens(rng, 1)];
    seqs[0].push(...lists[0]);
    seqs[1].push(...injected);
    seqs[2].push(...lists[3]);
    const out = await dec.feed(feedSlots, lists);
    await expectMatches(params, out, [seqs[0], fresh, seqs[1], seqs[2]]);
    // Slots not named stay untouched: stepping only one of them later still matches.
    const last = tokens(rng, 1);
    fresh.push(...last);
    await expectMatches(params, await dec.feed([newSlot], [last]), [fresh]);
    expect(dec.length(slots[0])).toBe(seqs[0].length);
    dec.dispose();
  });

  it('batched feeding equals feeding one context at a time', async () => {
    const rng = new Rng(3);
    const prompts = [4, 11, 2].map((n) => tokens(rng, n));
    const steps = Array.from({ length: 3 }, () => prompts.map(() => tokens(rng, 1)));

    const batched = new BatchedDecoder(params, config);
    const bSlots = prompts.map(() => batched.open());
    const batchedOut = [await batched.feed(bSlots, prompts)];
    for (const s of steps) batchedOut.push(await batched.feed(bSlots, s));

    const single = new BatchedDecoder(params, config, { capacity: 1 });
    for (let i = 0; i < prompts.length; i++) {
      const slot = single.open();
      const outs = [await single.feed([slot], [prompts[i]])];
      for (const s of steps) outs.push(await single.feed([slot], [s[i]]));
      outs.forEach((o, k) => expect(maxAbsDiff(o, batchedOut[k].subarray(i * V, (i + 1) * V))).toBeLessThan(1e-5));
      single.close(slot);
    }
    batched.dispose();
    single.dispose();
  });

  it('splits a prefill too large for one pass into several, with the logits of the full forward', async () => {
    // 120 prompts of 60–90 tokens: over 8,192 positions, so the feed runs several prefill passes.
    const rng = new Rng(9);
    const prompts = Array.from({ length: 120 }, () => tokens(rng, rng.int(60, 90)));
    const d = new BatchedDecoder(params, config);
    const slots = prompts.map(() => d.open());
    const out = await d.feed(slots, prompts);
    for (const i of [0, 1, 57, 118, 119]) expect(maxAbsDiff(out.subarray(i * V, (i + 1) * V), await reference(params, prompts[i]))).toBeLessThan(1e-4);
    // Single steps after it read every row's cache.
    const next = prompts.map(() => tokens(rng, 1));
    const stepped = await d.feed(slots, next);
    for (const i of [3, 64, 119])
      expect(maxAbsDiff(stepped.subarray(i * V, (i + 1) * V), await reference(params, [...prompts[i], ...next[i]]))).toBeLessThan(1e-4);
    d.dispose();
  });

  it('reuses closed slots without leaking their old context', async () => {
    const rng = new Rng(4);
    const dec = new BatchedDecoder(params, config, { capacity: 2 });
    const seqs = [12, 3, 6].map((n) => tokens(rng, n)); // 3 slots: capacity grows from 2
    const slots = seqs.map(() => dec.open());
    await dec.feed(slots, seqs);
    dec.close(slots[0]);
    expect(dec.liveSlots()).toEqual([slots[1], slots[2]]);
    const again = dec.open();
    expect(again).toBe(slots[0]);
    expect(dec.length(again)).toBe(0);
    const fresh = tokens(rng, 2);
    const step = tokens(rng, 1);
    seqs[1].push(...step);
    await expectMatches(params, await dec.feed([again, slots[1]], [fresh, step]), [fresh, seqs[1]]);
    for (let k = 0; k < 3; k++) {
      const t = tokens(rng, 1);
      fresh.push(...t);
      await expectMatches(params, await dec.feed([again], [t]), [fresh]);
    }
    dec.dispose();
  });

  it('stays correct when few of many live slots step (row selection) and after compaction', async () => {
    const rng = new Rng(5);
    const dec = new BatchedDecoder(params, config, { capacity: 4 });
    const seqs = Array.from({ length: 20 }, (_, i) => tokens(rng, 1 + (i % 7)));
    const slots = seqs.map(() => dec.open());
    await dec.feed(slots, seqs);
    // One row stepping among 20 live ones, then a 2-row prefill-style append.
    let t = tokens(rng, 1);
    seqs[13].push(...t);
    await expectMatches(params, await dec.feed([slots[13]], [t]), [seqs[13]]);
    const a = tokens(rng, 3);
    const b = tokens(rng, 5);
    seqs[2].push(...a);
    seqs[17].push(...b);
    await expectMatches(params, await dec.feed([slots[17], slots[2]], [b, a]), [seqs[17], seqs[2]]);
    // Close most slots: the cache compacts and the survivors keep their contexts.
    for (let i = 0; i < 20; i++) if (i % 6 !== 1) dec.close(slots[i]);
    const alive = [1, 7, 13, 19];
    expect(dec.liveSlots()).toEqual(alive.map((i) => slots[i]));
    const next = alive.map(() => tokens(rng, 1));
    alive.forEach((i, k) => seqs[i].push(...next[k]));
    await expectMatches(
      params,
      await dec.feed(
        alive.map((i) => slots[i]),
        next,
      ),
      alive.map((i) => seqs[i]),
    );
    t = tokens(rng, 2);
    seqs[7].push(...t);
    await expectMatches(params, await dec.feed([slots[7]], [t]), [seqs[7]]);
    dec.dispose();
  });

  it('shrinks rows and width after long or many contexts close, and grows again', async () => {
    const rng = new Rng(7);
    const dec = new BatchedDecoder(params, config, { capacity: 2 });
    const seqs = [tokens(rng, 70), tokens(rng, 4), tokens(rng, 9)];
    const slots = seqs.map(() => dec.open());
    await dec.feed(slots, seqs);
    // Slots opened after the last feed (never fed) and then mostly closed again.
    const extra = Array.from({ length: 9 }, () => dec.open());
    for (const s of extra.slice(1)) dec.close(s);
    dec.close(slots[0]); // the long context goes: the width can shrink
    const fresh = tokens(rng, 3);
    seqs[0] = fresh;
    const steps = [tokens(rng, 1), tokens(rng, 1)];
    seqs[1].push(...steps[0]);
    seqs[2].push(...steps[1]);
    const out = await dec.feed([slots[2], extra[0], slots[1]], [steps[1], fresh, steps[0]]);
    await expectMatches(params, out, [seqs[2], fresh, seqs[1]]);
    const long = tokens(rng, 50);
    fresh.push(...long);
    await expectMatches(params, await dec.feed([extra[0]], [long]), [fresh]);
    dec.dispose();
  });

  it('grows the cache width past its first chunk and reaches nPositions exactly', async () => {
    const rng = new Rng(6);
    const dec = new BatchedDecoder(params, config);
    const long = tokens(rng, 40);
    const short = tokens(rng, 3);
    const [s1, s2] = [dec.open(), dec.open()];
    await expectMatches(params, await dec.feed([s1, s2], [long, short]), [long, short]);
    const rest = tokens(rng, config.nPositions - long.length - 1);
    long.push(...rest);
    await dec.feed([s1], [rest]);
    const last = tokens(rng, 1);
    long.push(...last);
    await expectMatches(params, await dec.feed([s1], [last]), [long]);
    expect(dec.length(s1)).toBe(config.nPositions);
    await expect(dec.feed([s1], [[1]])).rejects.toThrow(/nPositions/);
    dec.dispose();
  });

  it('rejects bad feeds with clear messages and changes nothing', async () => {
    const dec = new BatchedDecoder(params, config);
    const s = dec.open();
    await dec.feed([s], [[1, 2, 3]]);
    await expect(dec.feed([s + 1], [[1]])).rejects.toThrow(/slot 1 is not open/);
    await expect(dec.feed([s, s], [[1], [2]])).rejects.toThrow(/named twice/);
    await expect(dec.feed([s], [[]])).rejects.toThrow(/empty/);
    await expect(dec.feed([s], [[V]])).rejects.toThrow(/token 73|not an integer/);
    await expect(dec.feed([s], [[1], [2]])).rejects.toThrow(/2 token lists/);
    await expect(dec.feed([s], [Array.from({ length: config.nPositions }, () => 1)])).rejects.toThrow(/nPositions/);
    expect(dec.length(s)).toBe(3);
    expect(() => dec.close(7)).toThrow(/not open/);
    dec.dispose();
    expect(() => dec.open()).toThrow(/dispose/);
  });

  it('reads the weights at call time', async () => {
    const p = await sharpParams(21);
    const other = await sharpParams(22);
    const dec = new BatchedDecoder(p, config);
    const seq = [5, 9, 30, 2];
    const s = dec.open();
    await dec.feed([s], [seq]);
    dec.close(s);
    for (const [name, v] of p) v.assign(other.get(name) as tf.Variable);
    const s2 = dec.open();
    await expectMatches(other, await dec.feed([s2], [seq]), [seq]);
    dec.dispose();
    for (const q of [p, other]) q.forEach((v) => v.dispose());
  });

  it('holds the tensor count steady across feeds once warm, and dispose frees everything', async () => {
    const before = tf.memory().numTensors;
    const dec = new BatchedDecoder(params, config);
    const slots = [dec.open(), dec.open(), dec.open()];
    await dec.feed(slots, [[1, 2], [3], [4, 5, 6]]);
    await dec.feed(slots, [[7], [8], [9]]);
    const warm = tf.memory().numTensors;
    await dec.feed(slots, [[7], [8], [9]]);
    expect(tf.memory().numTensors).toBe(warm);
    await dec.feed(slots, [[1], [2, 3, 4], [5]]);
    expect(tf.memory().numTensors).toBe(warm);
    dec.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});
