import * as tf from '@tensorflow/tfjs';
import { afterAll, describe, expect, it } from 'vitest';
import { CACHE_WRITE_KERNEL, cacheWrite, inPlaceCacheWriteAvailable, setInPlaceCacheWrite } from '../../core/model/cacheWrite';
import { setFusedDecodeLayer } from '../../core/model/decodeLayer';
import { BatchedDecoder } from '../../core/model/decode';
import { disposeParams, initParams } from '../../core/model/params';
import { PRESETS } from '../../core/model/config';
import { Rng } from '../../core/rng';
import { initBackend } from '../backend';

afterAll(() => setInPlaceCacheWrite(true));

/** The same write by tfjs's scatter (keys: [row, head, position, :]; values: [row, head, :, position]). */
function scattered(cache: tf.Tensor4D, update: tf.Tensor2D, slots: number[][], layout: 'keys' | 'valuesT'): tf.Tensor4D {
  const [, h, a, b] = cache.shape;
  const dh = layout === 'keys' ? b : a;
  return tf.tidy(() => {
    if (layout === 'keys') {
      const idx = slots.flatMap(([r, p]) => Array.from({ length: h }, (_, hh) => [r, hh, p]));
      return tf.tensorScatterUpdate(cache, tf.tensor2d(idx, [idx.length, 3], 'int32'), tf.reshape(update, [slots.length * h, dh])) as tf.Tensor4D;
    }
    const idx = slots.flatMap(([r, p]) => Array.from({ length: h * dh }, (_, k) => [r, Math.floor(k / dh), k % dh, p]));
    return tf.tensorScatterUpdate(cache, tf.tensor2d(idx, [idx.length, 4], 'int32'), tf.reshape(update, [slots.length * h * dh])) as tf.Tensor4D;
  });
}

describe.each(['cpu', 'wasm'] as const)('in-place cache write on %s', (backend) => {
  it("writes what the scatter writes, into the cache's own data, without a leak", async () => {
    await initBackend(backend);
    expect(inPlaceCacheWriteAvailable()).toBe(true);
    const rng = new Rng(3);
    const rnd = (n: number) => Float32Array.from({ length: n }, () => rng.next() * 2 - 1);
    const slots = [
      [2, 0],
      [0, 5],
      [3, 6],
      [2, 1],
    ];
    for (const layout of ['keys', 'valuesT'] as const) {
      const shape: [number, number, number, number] = layout === 'keys' ? [4, 2, 7, 3] : [4, 2, 3, 7];
      const cache = tf.tensor4d(rnd(4 * 2 * 7 * 3), shape);
      const update = tf.tensor2d(rnd(slots.length * 6), [slots.length, 6]);
      const want = scattered(cache, update, slots, layout);
      const wantValues = await want.data();
      const before = tf.memory().numTensors;
      const slotsT = tf.tensor2d(slots, [slots.length, 2], 'int32');
      const got = cacheWrite(cache, update, slotsT, layout);
      expect(Array.from(await got.data())).toEqual(Array.from(wantValues));
      // In place: the old handle reads the new contents (the decoder drops it at once).
      expect(Array.from(await cache.data())).toEqual(Array.from(wantValues));
      cache.dispose();
      expect(Array.from(await got.data())).toEqual(Array.from(wantValues)); // the data outlives the old handle
      tf.dispose([got, slotsT]);
      expect(tf.memory().numTensors).toBe(before - 1); // less the cache, nothing new left
      tf.dispose([update, want]);
    }
  });

  it('refuses a slot outside the cache, naming it', async () => {
    await initBackend(backend);
    const cache = tf.zeros([2, 1, 4, 3]) as tf.Tensor4D;
    const update = tf.zeros([1, 3]) as tf.Tensor2D;
    const slots = tf.tensor2d([[1, 4]], [1, 2], 'int32');
    expect(() => cacheWrite(cache, update, slots, 'keys')).toThrow(`${CACHE_WRITE_KERNEL}: slot 0 (row 1, position 4) is outside the cache [2, 1, 4, 3]`);
    tf.dispose([cache, update, slots]);
  });

  it('a decoder gives the same logits, bit for bit, with in-place writes and with the scatter', async () => {
    await initBackend(backend);
    const config = { ...PRESETS.tiny, nPositions: 32 };
    const params = initParams(config, 5);
    const run = async () => {
      const rng = new Rng(9);
      const dec = new BatchedDecoder(params, config);
      const seqs = [4, 1, 6].map((n) => Array.from({ length: n }, () => rng.int(0, config.vocabSize - 1)));
      const slots = seqs.map(() => dec.open());
      const out = [Array.from(await dec.feed(slots, seqs))];
      for (let step = 0; step < 3; step++)
        out.push(
          Array.from(
            await dec.feed(
              slots,
              slots.map(() => [rng.int(0, config.vocabSize - 1)]),
            ),
          ),
        );
      dec.dispose();
      return out;
    };
    // The composed layers in both (the fused decode layer writes in place with no scatter to compare).
    const fused = setFusedDecodeLayer(false);
    try {
      const inPlace = await run();
      setInPlaceCacheWrite(false);
      const scatter = await run();
      expect(inPlace).toEqual(scatter);
    } finally {
      setInPlaceCacheWrite(true);
      setFusedDecodeLayer(fused);
    }
    disposeParams(params);
  });
});
