/**
 * Decoders of every family (gpt2, llama, qwen2, qwen3) read from Hugging Face folders give
 * transformers' logits. test/python/hf_decoder_fixture.py makes tiny random checkpoints of each family with
 * transformers and save_pretrained (grouped-query attention in all three; llama3 rope scaling and
 * an untied head in llama; q/k/v biases and tied embeddings in qwen2; q/k norms and a head_dim
 * that is not hidden / heads in qwen3; an MLP width other than 4 × n_embd in gpt2), with transformers' own logits; our forward must match
 * them within 1e-4. Skipped, naming what is missing, without torch and transformers.
 */
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HfFolderError, readHfConfig, readHfWeights } from '../src/core/io/hfFolder';
import { encodeSafetensors } from '../src/core/io/safetensors';
import { DecoderCache, DecoderConfigError, decoderConfigFromHf, decoderLogits, decoderParams } from '../src/core/model/decoder';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { pythonWith } from './python/python';

const FIXTURE = fileURLToPath(new URL('./python/hf_decoder_fixture.py', import.meta.url));
const py = pythonWith('torch', 'transformers', 'safetensors');
let dir = '';

const folder = nodeFolderReader;

beforeAll(async () => {
  await initBackend('wasm');
  if (py.python === null) return;
  dir = await mkdtemp(join(tmpdir(), 'hf-decoder-'));
  const r = spawnSync(py.python, [FIXTURE, dir], { encoding: 'utf8', timeout: 240_000 });
  if (r.status !== 0) throw new Error(`hf_decoder_fixture.py failed: ${r.stderr || r.error?.message}`);
}, 300_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(py.python === null)(`Llama-family decoders against transformers${py.python === null ? ` (skipped: ${py.why})` : ''}`, () => {
  for (const family of ['gpt2', 'llama', 'qwen2', 'qwen3'] as const) {
    it(`${family}: logits, full and cached, equal transformers' within 1e-4`, async () => {
      const read = folder(join(dir, family));
      const config = decoderConfigFromHf(await readHfConfig(read));
      expect(config.family).toBe(family);
      if (family !== 'gpt2') expect(config.kvHeads).toBeLessThan(config.heads);
      const params = decoderParams(config, await readHfWeights(read));
      const ref = JSON.parse(await readFile(join(dir, family, 'reference_logits.json'), 'utf8')) as { tokens: number[][]; logits: number[][][] };
      const got = tf.tidy(() => decoderLogits(params, config, tf.tensor2d(ref.tokens, undefined, 'int32')).arraySync());
      let max = 0;
      ref.logits.forEach((row, b) => row.forEach((v, t) => v.forEach((x, i) => (max = Math.max(max, Math.abs(x - got[b][t][i]))))));
      expect(max).toBeLessThan(1e-4);
      // The logits are not trivially small: the check has something to compare.
      expect(Math.max(...ref.logits.flat(2).map(Math.abs))).toBeGreaterThan(0.05);
      // Cached decoding: a prefill of 5 tokens, then one at a time, gives the same logits and leaves no tensor behind.
      const before = tf.memory().numTensors;
      const cache = new DecoderCache(params, config);
      const pieces = [cache.feed(ref.tokens.map((r) => r.slice(0, 5)))];
      for (let t = 5; t < ref.tokens[0].length; t++) pieces.push(cache.feed(ref.tokens.map((r) => [r[t]])));
      expect(cache.length).toBe(ref.tokens[0].length);
      const cached = tf.tidy(() => tf.concat(pieces, 1).arraySync());
      pieces.forEach((p) => p.dispose());
      cache.dispose();
      expect(tf.memory().numTensors).toBe(before);
      let maxCached = 0;
      ref.logits.forEach((row, b) => row.forEach((v, t) => v.forEach((x, i) => (maxCached = Math.max(maxCached, Math.abs(x - cached[b][t][i]))))));
      expect(maxCached).toBeLessThan(1e-4);
      params.forEach((p) => p.dispose());
    });
  }

  it('reads the shards an index lists, and names what a broken folder lacks', async () => {
    const read = folder(join(dir, 'qwen3'));
    const whole = await readHfWeights(read);
    const names = [...whole.keys()].sort();
    const half = Math.floor(names.length / 2);
    const shardDir = await mkdtemp(join(tmpdir(), 'hf-shards-'));
    try {
      const shard = (part: string[]) => encodeSafetensors(part.map((n) => ({ name: n, shape: whole.get(n)!.shape, data: whole.get(n)!.data })));
      await writeFile(join(shardDir, 'model-00001-of-00002.safetensors'), shard(names.slice(0, half)));
      await writeFile(join(shardDir, 'model-00002-of-00002.safetensors'), shard(names.slice(half)));
      const weightMap = Object.fromEntries(names.map((n, i) => [n, i < half ? 'model-00001-of-00002.safetensors' : 'model-00002-of-00002.safetensors']));
      await writeFile(join(shardDir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }));
      await writeFile(join(shardDir, 'config.json'), await readFile(join(dir, 'qwen3', 'config.json')));
      const sharded = await readHfWeights(folder(shardDir));
      expect([...sharded.keys()].sort()).toEqual(names);
      for (const n of names) expect(sharded.get(n)!.data).toEqual(whole.get(n)!.data);
      // An index that names a tensor its shard lacks.
      await writeFile(
        join(shardDir, 'model.safetensors.index.json'),
        JSON.stringify({ weight_map: { ...weightMap, 'model.extra.weight': 'model-00002-of-00002.safetensors' } }),
      );
      await expect(readHfWeights(folder(shardDir))).rejects.toThrow(
        'model.safetensors.index.json names model.extra.weight, which model-00002-of-00002.safetensors lacks',
      );
    } finally {
      await rm(shardDir, { recursive: true, force: true });
    }
    await expect(readHfWeights(folder(join(dir, 'none')))).rejects.toThrow(HfFolderError);
    await expect(readHfConfig(folder(join(dir, 'none')))).rejects.toThrow('the folder has no config.json');
    // A config whose weights disagree: named by tensor and shape.
    const config = decoderConfigFromHf({ ...(JSON.parse(await readFile(join(dir, 'qwen3', 'config.json'), 'utf8')) as object), intermediate_size: 40 });
    expect(() => decoderParams(config, whole)).toThrow(/model\.layers\.0\.mlp\.gate_proj\.weight has shape \[48, 32\], the config needs \[40, 32\]/);
  });
});

describe('decoder config.json', () => {
  const base = {
    model_type: 'llama',
    vocab_size: 10,
    hidden_size: 8,
    intermediate_size: 16,
    num_hidden_layers: 1,
    num_attention_heads: 2,
    max_position_embeddings: 32,
  };
  it('reads both rope layouts and refuses what it cannot run the same way', () => {
    expect(decoderConfigFromHf({ ...base, rope_theta: 500000, rope_scaling: null }).ropeTheta).toBe(500000);
    expect(decoderConfigFromHf({ ...base, rope_parameters: { rope_theta: 1e6, rope_type: 'default' } }).ropeTheta).toBe(1e6);
    expect(decoderConfigFromHf({ ...base, rope_scaling: { type: 'linear', factor: 2 } }).rope).toEqual({ type: 'linear', factor: 2 });
    expect(decoderConfigFromHf({ ...base }).kvHeads).toBe(2);
    expect(() => decoderConfigFromHf({ ...base, model_type: 'gpt2' })).toThrow(DecoderConfigError);
    expect(() => decoderConfigFromHf({ ...base, rope_scaling: { rope_type: 'yarn', factor: 4 } })).toThrow('rope type "yarn" is not supported');
    expect(() => decoderConfigFromHf({ ...base, num_key_value_heads: 3 })).toThrow('num_attention_heads 2 is not a multiple of num_key_value_heads 3');
    expect(() => decoderConfigFromHf({ ...base, hidden_act: 'gelu' })).toThrow('hidden_act "gelu" is not silu');
    expect(() => decoderConfigFromHf({ ...base, vocab_size: 0 })).toThrow('vocab_size must be a positive integer (got 0)');
  });
});
