import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { paramSpecs, type ModelConfig } from '../model/config';
import { disposeParams, paramsFromArrays } from '../model/params';
import { Rng } from '../rng';
import { buildTokenizerJson } from '../tokenizer/tokenizerJson';
import { VOCAB_SIZE } from '../tokenizer/vocab';
import { type Checkpoint, CheckpointError, decodeCheckpoint, encodeCheckpoint, makeSelfcestMeta } from './checkpoint';
import { probeCheckpoint, probeLogits, probeTokens } from './checkpointProbe';

beforeAll(async () => {
  await initBackend('wasm');
});

const config: ModelConfig = { nLayer: 2, nEmbd: 8, nHead: 2, nPositions: 16, vocabSize: VOCAB_SIZE, layerNormEps: 1e-5 };

function checkpoint(scale = 1, c: ModelConfig = config): Checkpoint {
  const rng = new Rng(3);
  const tensors = new Map<string, Float32Array>();
  for (const s of paramSpecs(c)) {
    const n = s.shape.reduce((a, b) => a * b, 1);
    const ln = s.name.includes('.ln_') && s.name.endsWith('.weight');
    tensors.set(
      s.name,
      Float32Array.from({ length: n }, () => (ln ? 1 : rng.normal() * 0.02) * scale),
    );
  }
  return { config: c, tensors, tokenizer: buildTokenizerJson(), selfcest: makeSelfcestMeta({ preset: 'test' }) };
}

/** The probe's error, or undefined when it passed. */
async function probeError(ckpt: Checkpoint): Promise<Error | undefined> {
  try {
    await probeCheckpoint(ckpt);
    return undefined;
  } catch (e) {
    return e as Error;
  }
}

describe('probeTokens', () => {
  it('fills the context and holds every token id', () => {
    const rows = probeTokens(config);
    expect(rows.every((r) => r.length === 16)).toBe(true);
    expect(rows).toHaveLength(Math.ceil(VOCAB_SIZE / 16));
    const ids = new Set(rows.flat());
    expect(ids.size).toBe(VOCAB_SIZE);
    expect(Math.max(...ids)).toBe(VOCAB_SIZE - 1);
    // A context longer than the vocabulary: one row, cycling through the ids.
    const [row, ...more] = probeTokens({ ...config, nPositions: 256 });
    expect(more).toEqual([]);
    expect(row).toHaveLength(256);
    expect(row.slice(VOCAB_SIZE - 1, VOCAB_SIZE + 2)).toEqual([VOCAB_SIZE - 1, 0, 1]);
  });
});

describe('probeCheckpoint', () => {
  it('passes a trained-size checkpoint and frees what it made', async () => {
    expect(await probeError(checkpoint())).toBeUndefined();
    // Counted from the second probe: the first one caches its causal mask (gpt.ts).
    const before = tf.memory().numTensors;
    expect(await probeError(checkpoint())).toBeUndefined();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('rejects finite weights × 1e30 that decodeCheckpoint accepts, naming the file and the cause', async () => {
    const huge = decodeCheckpoint(encodeCheckpoint(checkpoint(1e30)));
    expect([...huge.tensors.values()].every((t) => t.every(Number.isFinite))).toBe(true);
    const before = tf.memory().numTensors;
    const err = await probeError(huge);
    expect(tf.memory().numTensors).toBe(before);
    expect(err).toBeInstanceOf(CheckpointError);
    expect(err?.message).toMatch(
      /^checkpoint: model.safetensors: the model's logits are not finite \((NaN|-?Infinity) at position \d+ of probe row \d+, token \d+\): the weights are too large for float32 arithmetic \(largest \|value\| [\d.]+e\+\d+, in transformer\.[\w.]+\)$/,
    );
  });

  it('catches a single oversized tensor (the final LayerNorm gain overflows after normalising)', async () => {
    const ckpt = checkpoint();
    (ckpt.tensors.get('transformer.ln_f.weight') as Float32Array).fill(3e38);
    const err = await probeError(ckpt);
    expect(err?.message).toMatch(/logits are not finite .*\(largest \|value\| 3\.00e\+38, in transformer\.ln_f\.weight\)$/);
    // A gain of 1e30 stays finite in float32 (|h| ≈ 1e30, logits ≈ 1e30): the probe does not over-reject.
    (ckpt.tensors.get('transformer.ln_f.weight') as Float32Array).fill(1e30);
    expect(await probeError(ckpt)).toBeUndefined();
  });

  it("catches one oversized position row past the vocabulary's length (the probe fills the context)", async () => {
    const long = { ...config, nPositions: VOCAB_SIZE + 23 };
    const ckpt = checkpoint(1, long);
    const wpe = ckpt.tensors.get('transformer.wpe.weight') as Float32Array;
    const last = long.nPositions - 1;
    wpe.fill(3e38, last * long.nEmbd, (last + 1) * long.nEmbd);
    const err = await probeError(ckpt);
    expect(err?.message).toMatch(
      /^checkpoint: model.safetensors: the model's logits are not finite \(NaN at position \d+ of probe row 0, token \d+\).*in transformer\.wpe\.weight\)$/,
    );
  });

  it("probeLogits leaves the caller's variables in place", async () => {
    const params = paramsFromArrays(config, checkpoint(1e30).tensors, { trainable: false });
    const before = tf.memory().numTensors;
    await expect(probeLogits(params, config)).rejects.toThrow(/logits are not finite/);
    expect(tf.memory().numTensors).toBe(before);
    expect(params.size).toBe(paramSpecs(config).length);
    disposeParams(params);
  });
});
