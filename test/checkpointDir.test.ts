// Tests src/cli/checkpointDir.ts (the Node side of this folder's checkpoint format).
import { mkdtemp, readdir, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readCheckpointDir, writeCheckpointDir } from '../src/cli/checkpointDir';
import { paramSpecs, type ModelConfig } from '../src/core/model/config';
import { Rng } from '../src/core/rng';
import { buildTokenizerJson } from '../src/core/tokenizer/tokenizerJson';
import { VOCAB_SIZE } from '../src/core/tokenizer/vocab';
import { makeSelfcestMeta, type Checkpoint } from '../src/core/io/checkpoint';

const config: ModelConfig = { nLayer: 1, nEmbd: 8, nHead: 2, nPositions: 8, vocabSize: VOCAB_SIZE, layerNormEps: 1e-5 };

function checkpoint(seed: number): Checkpoint {
  const rng = new Rng(seed);
  const tensors = new Map<string, Float32Array>();
  for (const s of paramSpecs(config)) {
    tensors.set(
      s.name,
      Float32Array.from({ length: s.shape.reduce((a, b) => a * b, 1) }, () => rng.normal()),
    );
  }
  return { config, tensors, tokenizer: buildTokenizerJson(), selfcest: makeSelfcestMeta({ step: seed }) };
}

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'selfcest-ckpt-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('writeCheckpointDir / readCheckpointDir', () => {
  it('round-trips a checkpoint through a directory, creating it, leaving no temp files', async () => {
    const dir = join(root, 'nested', 'ckpt');
    const ckpt = checkpoint(1);
    await writeCheckpointDir(dir, ckpt);
    expect((await readdir(dir)).sort()).toEqual(['config.json', 'model.safetensors', 'selfcest.json', 'tokenizer.json']);

    const back = await readCheckpointDir(dir);
    expect(back.config).toEqual(config);
    expect(back.selfcest).toEqual(ckpt.selfcest);
    expect(back.tokenizer).toEqual(ckpt.tokenizer);
    for (const [name, data] of ckpt.tensors) expect(back.tensors.get(name)).toEqual(data);
  });

  it('overwrites an existing checkpoint in place', async () => {
    await writeCheckpointDir(root, checkpoint(1));
    await writeCheckpointDir(root, checkpoint(2));
    const back = await readCheckpointDir(root);
    expect(back.selfcest.step).toBe(2);
    expect(back.tensors.get('transformer.wte.weight')).toEqual(checkpoint(2).tensors.get('transformer.wte.weight'));
    expect((await readdir(root)).length).toBe(4);
  });

  it('writes nothing when the checkpoint is invalid', async () => {
    const bad = checkpoint(1);
    (bad.tensors.get('transformer.ln_f.bias') as Float32Array)[0] = NaN;
    const dir = join(root, 'bad');
    await expect(writeCheckpointDir(dir, bad)).rejects.toThrow(/tensor transformer.ln_f.bias contains NaN/);
    await expect(readdir(dir)).rejects.toThrow(/ENOENT/);
  });

  it('names a missing directory', async () => {
    const dir = join(root, 'nope');
    await expect(readCheckpointDir(dir)).rejects.toThrow(`checkpoint directory ${dir} does not exist`);
  });

  it('names a path that is a file, not a directory', async () => {
    const file = join(root, 'file');
    await writeFile(file, 'x');
    await expect(readCheckpointDir(file)).rejects.toThrow(`checkpoint path ${file} is not a directory`);
  });

  it('names the directory and the missing file', async () => {
    await writeCheckpointDir(root, checkpoint(1));
    await unlink(join(root, 'tokenizer.json'));
    await expect(readCheckpointDir(root)).rejects.toThrow(`${root}: checkpoint: missing file tokenizer.json`);
  });
});
