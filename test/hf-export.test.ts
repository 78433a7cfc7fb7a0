/**
 * The Hugging Face export gives the same logits outside this codebase.
 *
 * A seeded tiny model is exported to a temporary directory; test/python/gpt2_reference.py (an
 * independent numpy implementation of transformers' GPT2LMHeadModel forward pass that parses
 * the directory itself) computes logits for a few token sequences, and they must equal our
 * forwardLogits within 1e-4. Requires python3 with numpy: CI machines have them, and a missing
 * interpreter fails the test rather than skipping it.
 */
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readCheckpointDir, writeCheckpointDir } from '../src/cli/checkpointDir';
import { makeSelfcestMeta, type Checkpoint } from '../src/core/io';
import { PRESETS, type ModelConfig } from '../src/core/model/config';
import { forwardLogits } from '../src/core/model/gpt';
import { disposeParams, initParams, paramsFromArrays, paramsToArrays } from '../src/core/model/params';
import { Rng } from '../src/core/rng';
import { buildTokenizerJson } from '../src/core/tokenizer/tokenizerJson';
import { VOCAB_SIZE } from '../src/core/tokenizer/vocab';
import { initBackend } from '../src/runtime/backend';

const REFERENCE = fileURLToPath(new URL('./python/gpt2_reference.py', import.meta.url));
const TOLERANCE = 1e-4;

function requirePythonNumpy(): void {
  const probe = spawnSync('python3', ['-c', 'import numpy'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) {
    throw new Error(
      'test/hf-export.test.ts needs python3 with numpy to run the independent GPT-2 reference ' +
        `(python3 -c "import numpy" failed: ${probe.error?.message ?? probe.stderr.trim()}). ` +
        'Install them (e.g. apt-get install python3 python3-numpy, or pip install numpy).',
    );
  }
}

/** Logits [batch][position][vocab] from the numpy reference. */
function referenceLogits(dir: string, sequences: number[][]): number[][][] {
  const run = spawnSync('python3', [REFERENCE, dir], {
    input: JSON.stringify(sequences),
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (run.status !== 0) throw new Error(`gpt2_reference.py failed (${run.status}): ${run.stderr}`);
  return (JSON.parse(run.stdout) as { logits: number[][][] }).logits;
}

/** Initial GPT-2 weights have LN gain 1 and zero biases: perturb every tensor so each is tested. */
function perturbed(arrays: Map<string, Float32Array>, seed: number): Map<string, Float32Array> {
  const rng = new Rng(seed);
  const out = new Map<string, Float32Array>();
  for (const [name, a] of arrays)
    out.set(
      name,
      a.map((x) => x + 0.15 * rng.normal()),
    );
  return out;
}

async function ourLogits(ckpt: Checkpoint, sequences: number[][]): Promise<number[][][]> {
  const params = paramsFromArrays(ckpt.config, ckpt.tensors);
  try {
    const out: number[][][] = [];
    for (const seq of sequences) {
      const logits = tf.tidy(() => forwardLogits(params, ckpt.config, tf.tensor2d([seq], [1, seq.length], 'int32')));
      out.push(((await logits.array()) as number[][][])[0]);
      logits.dispose();
    }
    return out;
  } finally {
    disposeParams(params);
  }
}

function maxAbsDiff(a: number[][][], b: number[][][]): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  a.forEach((seq, s) => {
    expect(seq.length).toBe(b[s].length);
    seq.forEach((row, t) => {
      expect(row.length).toBe(b[s][t].length);
      row.forEach((x, v) => {
        worst = Math.max(worst, Math.abs(x - b[s][t][v]));
      });
    });
  });
  return worst;
}

function randomSequence(rng: Rng, length: number): number[] {
  return Array.from({ length }, () => rng.int(0, VOCAB_SIZE - 1));
}

const CONFIGS: [string, ModelConfig][] = [
  ['a custom 3-layer model', { nLayer: 3, nEmbd: 24, nHead: 3, nPositions: 20, vocabSize: VOCAB_SIZE, layerNormEps: 1e-5 }],
  ['the tiny preset', PRESETS.tiny],
];

describe.each(['wasm', 'cpu'] as const)('HF GPT-2 export matches the numpy reference (%s backend)', (backend) => {
  let root: string;
  beforeAll(async () => {
    requirePythonNumpy();
    await initBackend(backend);
    root = await mkdtemp(join(tmpdir(), 'selfcest-hf-'));
  });
  afterAll(async () => {
    if (root !== undefined) await rm(root, { recursive: true, force: true });
  });

  it.each(CONFIGS)('%s', async (_label, config) => {
    const init = initParams(config, 42);
    const arrays = perturbed(await paramsToArrays(init), 43);
    disposeParams(init);

    const ckpt: Checkpoint = {
      config,
      tensors: arrays,
      tokenizer: buildTokenizerJson(),
      selfcest: makeSelfcestMeta({ notes: 'hf-export test' }),
    };
    const dir = join(root, `${backend}-${config.nLayer}x${config.nEmbd}`);
    await writeCheckpointDir(dir, ckpt);

    const rng = new Rng(7);
    const sequences = [
      [1],
      randomSequence(rng, 5),
      randomSequence(rng, 11),
      // A full context: every position embedding is used.
      randomSequence(rng, Math.min(config.nPositions, 64)),
      Array.from({ length: Math.min(config.nPositions, 20) }, (_, i) => (i * 7) % VOCAB_SIZE),
    ];
    const theirs = referenceLogits(dir, sequences);
    // Through the checkpoint directory, so the weights we run are the ones on disk.
    const loaded = await readCheckpointDir(dir);
    const ours = await ourLogits(loaded, sequences);

    const diff = maxAbsDiff(ours, theirs);
    expect(diff).toBeLessThan(TOLERANCE);
    // The comparison is not vacuous: logits vary over the vocabulary and between positions.
    const last = theirs[3];
    expect(Math.max(...last[0]) - Math.min(...last[0])).toBeGreaterThan(0.5);
    expect(maxAbsDiff([[last[0]]], [[last[last.length - 1]]])).toBeGreaterThan(0.1);
    // A second pass leaks nothing (the first one warmed gpt.ts's per-length causal-mask cache).
    const before = tf.memory().numTensors;
    expect(await ourLogits(loaded, sequences)).toEqual(ours);
    expect(tf.memory().numTensors).toBe(before);
  });
});
