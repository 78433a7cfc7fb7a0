/**
 * GPT-2 as a family of the decoder interface (src/core/model/decoder.ts): the playground's own
 * model, its weights as they are (GPT2LMHeadModel's names, Conv1D [in, out]) read through the
 * config it exports, gives the toy forward's logits, full and cached; left-padded rows (learned,
 * absolute positions counted per row) decode as each row alone; LoRA adapts its Conv1D layers and
 * merges into them as PEFT does (fan_in_fan_out). transformers' own GPT-2 is checked in
 * test/hf-decoder.test.ts.
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromHfConfig, toHfConfig } from '../src/core/io/hfConfig';
import { readHfConfig, readHfWeights } from '../src/core/io/hfFolder';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { PRESETS } from '../src/core/model/config';
import { DecoderCache, argmaxToken, decoderConfigFromHf, decoderLogits, decoderParams, decoderTensorSpecs } from '../src/core/model/decoder';
import { forwardLogits } from '../src/core/model/gpt';
import { Lora, attentionTargets, linearModules, peftAdapterConfig } from '../src/core/model/lora';
import { type GPTParams, disposeParams, initParams, paramsFromArrays, paramsToArrays } from '../src/core/model/params';
import { Rng } from '../src/core/rng';
import { initBackend } from '../src/runtime/backend';

const toy = { ...PRESETS.tiny, nPositions: 48 };
const config = decoderConfigFromHf(JSON.parse(JSON.stringify(toHfConfig(toy))));
let params: GPTParams;

beforeAll(async () => {
  await initBackend('wasm');
  // Weights scaled up (not the LayerNorms) so attention is far from uniform and positions matter.
  const base = initParams(toy, 7);
  const arrays = await paramsToArrays(base);
  disposeParams(base);
  for (const [name, v] of arrays) if (!name.includes('.ln_')) for (let i = 0; i < v.length; i++) v[i] *= 4;
  params = paramsFromArrays(toy, arrays);
});

afterAll(() => disposeParams(params));

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
};

describe('GPT-2 through the decoder interface', () => {
  it('reads the config the playground exports, and needs exactly its weights', () => {
    expect(config).toMatchObject({
      family: 'gpt2',
      layers: toy.nLayer,
      heads: toy.nHead,
      kvHeads: toy.nHead,
      intermediateSize: 4 * toy.nEmbd,
      tieEmbeddings: true,
    });
    expect(
      decoderTensorSpecs(config)
        .map((s) => s.name)
        .sort(),
    ).toEqual([...params.keys()].sort());
    expect(() => decoderConfigFromHf({ ...toHfConfig(toy), activation_function: 'relu' })).toThrow('activation_function "relu" is not gelu_new');
    expect(() => decoderConfigFromHf({ ...toHfConfig(toy), scale_attn_by_inverse_layer_idx: true })).toThrow(
      'scale_attn_by_inverse_layer_idx true is not supported',
    );
  });

  it("gives the toy forward's logits, full and cached", async () => {
    const rng = new Rng(3);
    const ids = Array.from({ length: 2 }, () => Array.from({ length: 12 }, () => rng.int(0, toy.vocabSize - 1)));
    const theirs = tf.tidy(() => forwardLogits(params, toy, tf.tensor2d(ids, undefined, 'int32')));
    const ours = decoderLogits(params, config, tf.tensor2d(ids, undefined, 'int32'));
    const want = (await theirs.data()) as Float32Array;
    expect(Math.max(...want.map(Math.abs))).toBeGreaterThan(1);
    expect(maxAbsDiff((await ours.data()) as Float32Array, want)).toBeLessThan(1e-4);
    const cache = new DecoderCache(params, config);
    const pieces = [cache.feed(ids.map((r) => r.slice(0, 5)))];
    for (let t = 5; t < 12; t++) pieces.push(cache.feed(ids.map((r) => [r[t]])));
    const cached = tf.concat(pieces, 1);
    expect(maxAbsDiff((await cached.data()) as Float32Array, want)).toBeLessThan(1e-4);
    tf.dispose([theirs, ours, cached, ...pieces]);
    cache.dispose();
  });

  it("reads the playground's shipped checkpoint folder as a GPT-2, to the toy forward's logits on its weights", async () => {
    const read = nodeFolderReader('public/checkpoints/warmstart-tiny');
    const raw = await readHfConfig(read);
    const shipped = decoderConfigFromHf(raw);
    const weights = decoderParams(shipped, await readHfWeights(read));
    const ids = tf.tensor2d([[0, 3, 7, 11, 2, 5, 9, 1]], undefined, 'int32');
    const ours = decoderLogits(weights, shipped, ids);
    const theirs = tf.tidy(() => forwardLogits(weights as GPTParams, fromHfConfig(raw), ids));
    expect(maxAbsDiff((await ours.data()) as Float32Array, (await theirs.data()) as Float32Array)).toBeLessThan(1e-4);
    tf.dispose([ids, ours, theirs]);
    weights.forEach((t) => t.dispose());
  });

  it('decodes left-padded rows (learned positions counted per row) as each row alone', async () => {
    const rng = new Rng(4);
    const prompts = [3, 9, 6].map((n) => Array.from({ length: n }, () => rng.int(0, toy.vocabSize - 1)));
    const together = await new DecoderCache(params, config).generatePadded(
      prompts,
      [8, 8, 8],
      new Set(),
      prompts.map(() => argmaxToken),
    );
    for (const [r, p] of prompts.entries()) {
      const alone = new DecoderCache(params, config);
      expect((await alone.greedy(p, 8, new Set())).ids).toEqual(together.ids[r]);
      alone.dispose();
    }
  });

  it('adapts its Conv1D layers with LoRA and merges (B·A)ᵀ into them, as PEFT with fan_in_fan_out', async () => {
    expect(attentionTargets(config)).toEqual(['c_attn']);
    expect(linearModules(config).get('transformer.h.0.attn.c_attn')).toEqual([3 * toy.nEmbd, toy.nEmbd]);
    expect(peftAdapterConfig({ r: 2, alpha: 4, targetModules: ['c_attn'] }, config, null).fan_in_fan_out).toBe(true);
    // c_proj names the attention's and the MLP's output projections alike (PEFT's suffix match).
    const lora = Lora.init(config, { r: 2, alpha: 4, targetModules: ['c_attn', 'c_proj'] }, 1);
    expect(lora.params.size).toBe(2 * 3 * toy.nLayer);
    lora.params.forEach((v, k) => k.endsWith('lora_B') && v.assign(tf.randomNormal(v.shape, 0, 0.3, 'float32', 5)));
    const ids = tf.tensor2d([[1, 5, 9, 2, 7, 3]], undefined, 'int32');
    const adapted = tf.tidy(() => decoderLogits(params, config, ids).arraySync());
    const withAdapters = tf.tidy(() => {
      const cache = new DecoderCache(params, config, lora);
      const out = cache.feed([[1, 5, 9, 2, 7, 3]]).arraySync();
      cache.dispose();
      return out;
    });
    const merged = await lora.merged(params);
    const mergedParams = paramsFromArrays(toy, merged);
    const viaMerge = tf.tidy(() => decoderLogits(mergedParams, config, ids).dataSync());
    expect(maxAbsDiff(viaMerge, withAdapters.flat(2))).toBeLessThan(1e-4);
    expect(maxAbsDiff(viaMerge, adapted.flat(2))).toBeGreaterThan(1e-2);
    disposeParams(mergedParams);
    lora.dispose();
    ids.dispose();
  });
});
