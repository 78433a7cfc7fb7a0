import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import type { DecodedTensor } from '../io/safetensors';
import { Rng } from '../rng';
import { type Adapters, type DecoderConfig, type DecoderParams, decoderConfigFromHf, decoderForward, decoderParams, decoderTensorSpecs } from './decoder';
import { HfContextDecoder } from './hfContextDecoder';
import { Lora } from './lora';

const VOCAB = 61;
const MAX = 48;

/** Tiny configs of each family: grouped kv heads in qwen2 and llama (llama3 rope scaling), q/k norms in qwen3. */
const CONFIGS: Record<string, Record<string, unknown>> = {
  qwen2: {
    model_type: 'qwen2',
    vocab_size: VOCAB,
    hidden_size: 32,
    intermediate_size: 40,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    max_position_embeddings: MAX,
    tie_word_embeddings: true,
  },
  llama: {
    model_type: 'llama',
    vocab_size: VOCAB,
    hidden_size: 32,
    intermediate_size: 40,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 1,
    max_position_embeddings: MAX,
    rope_scaling: { rope_type: 'llama3', factor: 4, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 },
  },
  qwen3: {
    model_type: 'qwen3',
    vocab_size: VOCAB,
    hidden_size: 32,
    intermediate_size: 40,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 12,
    max_position_embeddings: MAX,
    tie_word_embeddings: true,
  },
  gpt2: { model_type: 'gpt2', vocab_size: VOCAB, n_embd: 32, n_layer: 2, n_head: 4, n_positions: MAX },
};

/** Random weights large enough that attention is far from uniform (a wrong mask or position changes the logits). */
function tinyModel(family: string, seed: number): { config: DecoderConfig; params: DecoderParams } {
  const config = decoderConfigFromHf(CONFIGS[family]);
  const rng = new Rng(seed);
  const tensors = new Map<string, DecodedTensor>(
    decoderTensorSpecs(config).map(({ name, shape }) => {
      const norm = /norm\.weight$|ln_[12f]\.weight$/.test(name);
      const std = name.endsWith('.bias') ? 0.1 : norm ? 0.1 : /wte|wpe|embed_tokens/.test(name) ? 1 : 0.35;
      const data = Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (norm ? 1 : 0) + std * rng.normal());
      return [name, { dtype: 'F32', shape, data }];
    }),
  );
  return { config, params: decoderParams(config, tensors) };
}

/** Logits after the last token of `seq`, from one uncached forward of the whole sequence. */
async function reference(m: { config: DecoderConfig; params: DecoderParams }, seq: readonly number[], adapters?: Adapters): Promise<Float32Array> {
  const last = tf.tidy(() => {
    const { logits } = decoderForward(m.params, m.config, tf.tensor2d([[...seq]], [1, seq.length], 'int32'), null, adapters);
    return tf.slice(logits, [0, seq.length - 1, 0], [1, 1, VOCAB]);
  });
  const row = (await last.data()) as Float32Array;
  last.dispose();
  return row;
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

const randomTokens = (rng: Rng, n: number) => Array.from({ length: n }, () => rng.int(0, VOCAB - 1));

/**
 * Feeds `tokens` to `slots`, appends them to each slot's sequence in `seqs`, and checks every
 * returned row against the full forward of that slot's sequence.
 */
async function feedAndCheck(
  m: { config: DecoderConfig; params: DecoderParams },
  dec: HfContextDecoder,
  seqs: Map<number, number[]>,
  slots: number[],
  tokens: number[][],
  adapters?: Adapters,
): Promise<number> {
  const out = await dec.feed(slots, tokens);
  expect(out.length).toBe(slots.length * VOCAB);
  let worst = 0;
  for (let i = 0; i < slots.length; i++) {
    const seq = seqs.get(slots[i]) ?? [];
    seq.push(...tokens[i]);
    seqs.set(slots[i], seq);
    expect(dec.length(slots[i])).toBe(seq.length);
    worst = Math.max(worst, maxAbsDiff(out.subarray(i * VOCAB, (i + 1) * VOCAB), await reference(m, seq, adapters)));
  }
  expect(worst).toBeLessThan(1e-4);
  return worst;
}

beforeAll(async () => {
  await initBackend('wasm');
});

describe('HfContextDecoder', () => {
  for (const family of ['qwen2', 'llama', 'qwen3', 'gpt2']) {
    it(`${family}: interleaved slots of different lengths give the full forward's logits`, async () => {
      const m = tinyModel(family, 7);
      const rng = new Rng(3);
      // The check can fail: dropping the first token (a wrong mask or position) moves the logits.
      const probe = randomTokens(rng, 9);
      expect(maxAbsDiff(await reference(m, probe), await reference(m, probe.slice(1)))).toBeGreaterThan(1e-2);

      const start = tf.memory().numTensors;
      const dec = new HfContextDecoder(m.params, m.config);
      const seqs = new Map<number, number[]>();
      const one = (slots: number[]) => slots.map(() => randomTokens(rng, 1));
      const [a, b, c] = [dec.open(), dec.open(), dec.open()];
      // Prefills of different lengths, one padded pass.
      await feedAndCheck(m, dec, seqs, [a, b, c], [randomTokens(rng, 5), randomTokens(rng, 11), randomTokens(rng, 2)]);
      for (let r = 0; r < 3; r++) await feedAndCheck(m, dec, seqs, [a, b, c], one([a, b, c]));
      // The same slots in another order: no repack.
      const repacks = dec.repackCount;
      await feedAndCheck(m, dec, seqs, [c, a, b], one([c, a, b]));
      expect(dec.repackCount).toBe(repacks);
      // The longest slot closes (the batch is trimmed); a new slot is prefilled beside the stepping ones.
      dec.close(b);
      seqs.delete(b);
      const d = dec.open();
      await feedAndCheck(m, dec, seqs, [a, d, c], [...one([a]), randomTokens(rng, 14), ...one([c])]);
      for (let r = 0; r < 2; r++) await feedAndCheck(m, dec, seqs, [a, c, d], one([a, c, d]));
      // An injection into a slot that holds tokens, the others stepping.
      await feedAndCheck(m, dec, seqs, [c, a, d], [randomTokens(rng, 4), ...one([a, d])]);
      // An empty slot fed a single token joins the batch; the injected slot rejoins it.
      const e = dec.open();
      for (let r = 0; r < 3; r++) await feedAndCheck(m, dec, seqs, [d, a, c, e], one([d, a, c, e]));
      // A slot left waiting (not fed) for two steps, then back.
      for (let r = 0; r < 2; r++) await feedAndCheck(m, dec, seqs, [a, e], one([a, e]));
      await feedAndCheck(m, dec, seqs, [a, c, e, d], one([a, c, e, d]));
      // Slot ids are reused: a closed slot's id reopened starts empty.
      dec.close(a);
      seqs.delete(a);
      expect(dec.open()).toBe(a);
      expect(dec.length(a)).toBe(0);
      await feedAndCheck(m, dec, seqs, [a, c], [randomTokens(rng, 3), ...one([c])]);
      await feedAndCheck(m, dec, seqs, [a, c, d, e], one([a, c, d, e]));
      // One slot stepping alone (a batch of one unpadded row), then an injection into it.
      for (const slot of [a, c, e]) dec.close(slot);
      for (let r = 0; r < 2; r++) await feedAndCheck(m, dec, seqs, [d], one([d]));
      await feedAndCheck(m, dec, seqs, [d], [randomTokens(rng, 3)]);
      await feedAndCheck(m, dec, seqs, [d], one([d]));
      dec.dispose();
      expect(tf.memory().numTensors).toBe(start);
      m.params.forEach((t) => t.dispose());
    });
  }

  for (const family of ['qwen2', 'gpt2']) {
    it(`${family}: prompts that begin alike are read from one shared head, to the full forward's logits`, async () => {
      const m = tinyModel(family, 9);
      const rng = new Rng(5);
      const start = tf.memory().numTensors;
      const dec = new HfContextDecoder(m.params, m.config);
      const seqs = new Map<number, number[]>();
      const head = randomTokens(rng, 12);
      const slots = [dec.open(), dec.open(), dec.open(), dec.open()];
      // A shared head with rests of different lengths, and two identical prompts (a GRPO group's).
      const same = [...head, ...randomTokens(rng, 3)];
      await feedAndCheck(m, dec, seqs, slots, [[...head, ...randomTokens(rng, 6)], same, [...same], [...head, ...randomTokens(rng, 1)]]);
      for (let r = 0; r < 3; r++)
        await feedAndCheck(
          m,
          dec,
          seqs,
          slots,
          slots.map(() => randomTokens(rng, 1)),
        );
      // Fresh prompts beside stepping slots: the new ones share their own head.
      const [e, f] = [dec.open(), dec.open()];
      const other = randomTokens(rng, 10);
      await feedAndCheck(m, dec, seqs, [...slots, e, f], [...slots.map(() => randomTokens(rng, 1)), [...other, 4, 5], [...other, 6]]);
      await feedAndCheck(
        m,
        dec,
        seqs,
        [...slots, e, f],
        [...slots, e, f].map(() => randomTokens(rng, 1)),
      );
      // A later prompt alone that begins with a head read before: read from it, to the same logits.
      const g = dec.open();
      await feedAndCheck(m, dec, seqs, [g], [[...head, ...randomTokens(rng, 2)]]);
      // The weights change (an update: new data under a name): the kept heads are not read again.
      const name = [...m.params.keys()].find((k) => k.includes('mlp') || k.includes('c_fc')) as string;
      const old = m.params.get(name) as tf.Tensor;
      m.params.set(name, tf.mul(old, 1.5));
      old.dispose();
      const h = dec.open();
      await feedAndCheck(m, dec, seqs, [h], [[...head, ...randomTokens(rng, 2)]]);
      dec.dispose();
      expect(tf.memory().numTensors).toBe(start);
      m.params.forEach((t) => t.dispose());
    });
  }

  it('reaches maxPositions exactly, in the batch and alone', async () => {
    const m = tinyModel('qwen2', 8);
    const rng = new Rng(4);
    const dec = new HfContextDecoder(m.params, m.config);
    const seqs = new Map<number, number[]>();
    const [a, b] = [dec.open(), dec.open()];
    await feedAndCheck(m, dec, seqs, [a, b], [randomTokens(rng, MAX - 3), randomTokens(rng, 2)]);
    for (let r = 0; r < 3; r++) await feedAndCheck(m, dec, seqs, [a, b], [randomTokens(rng, 1), randomTokens(rng, 1)]);
    expect(dec.length(a)).toBe(MAX);
    await expect(dec.feed([a, b], [[1], [1]])).rejects.toThrow(/would hold 49 tokens, more than max_position_embeddings \(48\)/);
    await feedAndCheck(m, dec, seqs, [b], [randomTokens(rng, MAX - 5)]);
    expect(dec.length(b)).toBe(MAX);
    dec.dispose();
    m.params.forEach((t) => t.dispose());
  });

  for (const family of ['qwen2', 'gpt2']) {
    it(`${family}: rows stepping beside a dead row reach maxPositions (the width is cut when the next column would not fit)`, async () => {
      const m = tinyModel(family, 12);
      const rng = new Rng(8);
      const dec = new HfContextDecoder(m.params, m.config);
      const seqs = new Map<number, number[]>();
      const [a, ...rest] = [dec.open(), dec.open(), dec.open(), dec.open(), dec.open()];
      await feedAndCheck(m, dec, seqs, [a, ...rest], [randomTokens(rng, 36), ...rest.map(() => randomTokens(rng, 28))]);
      for (let r = 0; r < 4; r++)
        await feedAndCheck(
          m,
          dec,
          seqs,
          [a, ...rest],
          [a, ...rest].map(() => randomTokens(rng, 1)),
        );
      // One dead row of five and 8 of 40 columns unneeded: within the slack, the batch is kept.
      dec.close(a);
      const repacks = dec.repackCount;
      await feedAndCheck(
        m,
        dec,
        seqs,
        rest,
        rest.map(() => randomTokens(rng, 1)),
      );
      expect(dec.repackCount).toBe(repacks);
      while (dec.length(rest[0]) < MAX)
        await feedAndCheck(
          m,
          dec,
          seqs,
          rest,
          rest.map(() => randomTokens(rng, 1)),
        );
      expect(dec.repackCount).toBe(repacks + 1);
      await expect(
        dec.feed(
          rest,
          rest.map(() => [1]),
        ),
      ).rejects.toThrow(/max_position_embeddings/);
      dec.dispose();
      m.params.forEach((t) => t.dispose());
    });
  }

  it('rejects bad feeds with clear messages and changes nothing', async () => {
    const m = tinyModel('llama', 9);
    const rng = new Rng(5);
    const dec = new HfContextDecoder(m.params, m.config);
    const seqs = new Map<number, number[]>();
    const [s, t] = [dec.open(), dec.open()];
    await feedAndCheck(
      m,
      dec,
      seqs,
      [s, t],
      [
        [1, 2, 3],
        [4, 5],
      ],
    );
    await feedAndCheck(m, dec, seqs, [s, t], [[6], [7]]);
    await expect(dec.feed([s, 5], [[1], [1]])).rejects.toThrow(/slot 5 is not open/);
    await expect(dec.feed([s, s], [[1], [2]])).rejects.toThrow(/named twice/);
    await expect(dec.feed([s, t], [[1], []])).rejects.toThrow(/slot 1 is empty/);
    await expect(dec.feed([s, t], [[1], [VOCAB]])).rejects.toThrow(`token ${VOCAB} for slot 1 is not an integer in [0, ${VOCAB - 1}]`);
    await expect(dec.feed([s], [[-1]])).rejects.toThrow(/not an integer/);
    await expect(dec.feed([s], [[1.5]])).rejects.toThrow(/not an integer/);
    await expect(dec.feed([s], [[1], [2]])).rejects.toThrow(/2 token lists/);
    await expect(dec.feed([t, s], [[1], new Array<number>(MAX).fill(1)])).rejects.toThrow(/max_position_embeddings/);
    expect([dec.length(s), dec.length(t)]).toEqual([4, 3]);
    expect(() => dec.close(7)).toThrow(/slot 7 is not open/);
    expect(() => dec.length(7)).toThrow(/slot 7 is not open/);
    // Nothing changed: the batch steps on as before.
    await feedAndCheck(m, dec, seqs, [s, t], [randomTokens(rng, 1), randomTokens(rng, 1)]);
    expect(await dec.feed([], [])).toEqual(new Float32Array(0));
    dec.dispose();
    expect(() => dec.open()).toThrow(/dispose/);
    m.params.forEach((p) => p.dispose());
  });

  it('holds a flat tensor count across steps once warm, and repacks only when the stepping slots change', async () => {
    const m = tinyModel('qwen2', 10);
    const rng = new Rng(6);
    const dec = new HfContextDecoder(m.params, m.config);
    const slots = [dec.open(), dec.open(), dec.open(), dec.open()];
    await dec.feed(
      slots,
      slots.map((_, i) => randomTokens(rng, 2 + 3 * i)),
    );
    await dec.feed(
      slots,
      slots.map(() => randomTokens(rng, 1)),
    );
    const warm = tf.memory().numTensors;
    const repacks = dec.repackCount;
    for (let r = 0; r < 20; r++) {
      await dec.feed(
        slots,
        slots.map(() => randomTokens(rng, 1)),
      );
      expect(tf.memory().numTensors).toBe(warm);
    }
    expect(dec.repackCount).toBe(repacks);
    // A closed slot's row steps on dead (no repack); a new slot joining changes the batch.
    dec.close(slots[1]);
    await dec.feed([slots[0], slots[2], slots[3]], [[1], [2], [3]]);
    expect(dec.repackCount).toBe(repacks);
    const fresh = dec.open();
    await dec.feed([fresh], [[4, 5]]);
    await dec.feed([slots[0], slots[2], slots[3], fresh], [[1], [2], [3], [4]]);
    expect(dec.repackCount).toBe(repacks + 1);
    dec.dispose();
    m.params.forEach((p) => p.dispose());
  });

  it('decodes the adapted model, reading the adapters at every feed', async () => {
    const m = tinyModel('qwen2', 11);
    const rng = new Rng(7);
    const lora = Lora.init(m.config, { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] }, 3);
    const setB = (seed: number) => {
      const r = new Rng(seed);
      lora.params.forEach(
        (v, name) =>
          name.endsWith('lora_B') &&
          v.assign(
            tf.tensor2d(
              Float32Array.from({ length: v.size }, () => 0.5 * r.normal()),
              v.shape as [number, number],
            ),
          ),
      );
    };
    setB(1);
    const dec = new HfContextDecoder(m.params, m.config, lora);
    const seqs = new Map<number, number[]>();
    const [a, b] = [dec.open(), dec.open()];
    await feedAndCheck(m, dec, seqs, [a, b], [randomTokens(rng, 4), randomTokens(rng, 6)], lora);
    const out = await dec.feed([a], [[5]]);
    seqs.get(a)!.push(5);
    // The adapter matters: the base model's logits differ.
    expect(maxAbsDiff(out, await reference(m, seqs.get(a)!))).toBeGreaterThan(1e-2);
    // After an update, a reopened slot decodes the new adapters.
    setB(2);
    dec.close(a);
    seqs.delete(a);
    const c = dec.open();
    await feedAndCheck(m, dec, seqs, [c], [randomTokens(rng, 5)], lora);
    dec.dispose();
    lora.dispose();
    m.params.forEach((p) => p.dispose());
  });
});
