import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../core/io/checkpoint';
import { initBackend } from '../../runtime/backend';
import { ToyModel } from '../../runtime/engine/trainerModel';
import { IMPORT_HELP, checkpointFilesOf, weightsTar, type PickedFile } from './checkpointTar';
import { tarArchive } from './tar';

const SHIPPED = 'public/checkpoints/warmstart-tiny';
const shipped: PickedFile[] = readdirSync(SHIPPED)
  .sort()
  .map((name) => ({ name, bytes: new Uint8Array(readFileSync(join(SHIPPED, name))) }));
const shippedMap = () => new Map(shipped.map((f) => [f.name, f.bytes]));
const text = (s: string) => new TextEncoder().encode(s);
/** What a CLI run folder holds beside the checkpoint: run files (set aside for runFolder.ts) and others. */
const runExtras = [
  { name: 'metrics.jsonl', bytes: text('{"step":1}\n') },
  { name: 'traces.jsonl', bytes: text('{}\n') },
  { name: 'state.json', bytes: text('{"step":1}') },
  { name: 'optimizer.safetensors', bytes: text('moments') },
  { name: 'train.log', bytes: text('step 1') },
];
const runOrigins = (pick: ReturnType<typeof checkpointFilesOf>) => Object.fromEntries([...pick.run].map(([name, f]) => [name, f.origin]));

beforeAll(async () => {
  await initBackend('cpu');
});

describe('checkpoint .tar', () => {
  it('the export path (engine files → .tar) imports back and decodes to the same weights', async () => {
    const original = decodeCheckpoint(shippedMap());
    const model = ToyModel.fromCheckpoint(original, SHIPPED);
    let files: Map<string, Uint8Array>;
    try {
      ({ files } = await model.exportFiles({ playground: { preset: 'tiny' } })); // what the engine's exportWeights sends
    } finally {
      model.dispose();
    }
    const { filename, bytes } = weightsTar('tiny', 7, Object.fromEntries(files));
    expect(filename).toBe('selfcest-tiny-v7.tar');

    // The user picks the .tar alone.
    const pick = checkpointFilesOf([{ name: filename, bytes }]);
    expect([...pick.files.keys()].sort()).toEqual([...files.keys()].sort());
    expect(pick.origins.get('model.safetensors')).toBe('selfcest-tiny-v7.tar: selfcest-tiny-v7/model.safetensors');
    expect(pick.ignored).toEqual([]);
    // A download saved without its extension is still read as the tar it is (by its ustar magic).
    const renamed = checkpointFilesOf([{ name: 'download-1234', bytes }]);
    expect([...renamed.files.keys()].sort()).toEqual([...files.keys()].sort());
    const back = decodeCheckpoint(pick.files);
    expect(back.config).toEqual(original.config);
    expect(back.tensors.size).toBe(original.tensors.size);
    for (const [name, values] of original.tensors) expect(back.tensors.get(name), name).toEqual(values);
  });

  it('keeps the checkpoint files of a run folder tar, sets its run files aside and names the others as ignored', () => {
    const tar = tarArchive('run', [...shipped, ...runExtras], 0);
    const pick = checkpointFilesOf([{ name: 'run.tar', bytes: tar }]);
    expect([...pick.files.keys()].sort()).toEqual(['config.json', 'model.safetensors', 'selfcest.json', 'tokenizer.json', 'tokenizer_config.json']);
    expect(runOrigins(pick)).toEqual({
      'metrics.jsonl': 'run.tar: run/metrics.jsonl',
      'traces.jsonl': 'run.tar: run/traces.jsonl',
      'state.json': 'run.tar: run/state.json',
    });
    expect(new TextDecoder().decode(pick.run.get('metrics.jsonl')?.bytes)).toBe('{"step":1}\n');
    expect(pick.ignored).toEqual(['run.tar: run/optimizer.safetensors', 'run.tar: run/train.log']);
    for (const f of shipped) expect(Array.from(pick.files.get(f.name) ?? []), f.name).toEqual(Array.from(f.bytes));
    expect(() => decodeCheckpoint(pick.files)).not.toThrow();
  });

  it('takes loose files as they are, and names the ones that are not part of a checkpoint', () => {
    const pick = checkpointFilesOf([...shipped, ...runExtras]);
    expect([...pick.files.keys()]).toEqual(shipped.map((f) => f.name));
    expect(runOrigins(pick)).toEqual({ 'metrics.jsonl': 'metrics.jsonl', 'traces.jsonl': 'traces.jsonl', 'state.json': 'state.json' });
    expect(pick.ignored).toEqual(['optimizer.safetensors', 'train.log']);
    expect(decodeCheckpoint(pick.files).config).toEqual(decodeCheckpoint(shippedMap()).config);
  });

  it('refuses a file given twice, a compressed tar and a damaged tar, naming the file', () => {
    const twoFolders = [...tarArchive('a', shipped, 0).subarray(0, -1024), ...tarArchive('b', shipped, 0)];
    expect(() => checkpointFilesOf([{ name: 'two.tar', bytes: Uint8Array.from(twoFolders) }])).toThrow(
      'config.json is given twice (two.tar: a/config.json and two.tar: b/config.json); pick the files of one checkpoint',
    );
    const tar = tarArchive('ckpt', shipped, 0);
    expect(() => checkpointFilesOf([{ name: 'ckpt.tar', bytes: tar }, shipped[0]])).toThrow(
      /^config\.json is given twice \(ckpt\.tar: ckpt\/config\.json and config\.json\)/,
    );
    // A whole run directory's tar: the committed save's run files and their copies at the top are one file; different ones are refused.
    const save = [...shipped, runExtras[0]].map((f) => ({ ...f, name: `save-000001/${f.name}` }));
    const whole = checkpointFilesOf([{ name: 'dir.tar', bytes: tarArchive('dir', [...save, runExtras[0]], 0) }]);
    expect(runOrigins(whole)).toEqual({ 'metrics.jsonl': 'dir.tar: dir/save-000001/metrics.jsonl' });
    const later = { name: 'metrics.jsonl', bytes: text('{"step":1}\n{"step":2}\n') };
    expect(() => checkpointFilesOf([{ name: 'dir.tar', bytes: tarArchive('dir', [...save, later], 0) }])).toThrow(
      'metrics.jsonl is given twice with different contents (dir.tar: dir/save-000001/metrics.jsonl and dir.tar: dir/metrics.jsonl); pick the files of one run',
    );
    expect(() => checkpointFilesOf([{ name: 'ckpt.tar.gz', bytes: Uint8Array.of(0x1f, 0x8b, 8, 0) }])).toThrow(/^ckpt\.tar\.gz is a compressed tar/);
    expect(() => checkpointFilesOf([{ name: 'ckpt.tar', bytes: tar.slice(0, 5000) }])).toThrow(
      /^ckpt\.tar: tar: truncated: ckpt\/model\.safetensors .* \(size beyond end\)$/,
    );
  });

  it('the help names exactly the files decodeCheckpoint requires, and the optional ones', () => {
    expect(IMPORT_HELP).toBe(
      "The exported .tar, a CLI run folder's files (or its .tar), or the loose files. Required: model.safetensors, config.json, tokenizer.json, selfcest.json. " +
        'Optional: tokenizer_config.json, provenance.json (the history of the weights; the model resumes at its policy version); ' +
        "metrics.jsonl and traces.jsonl (the run's curves and rollouts, with run.json or state.json for its group size). " +
        "Or a Hugging Face model folder's files (config.json, model.safetensors, tokenizer.json, tokenizer_config.json with a chat template), or its export's .tar. Other files are ignored.",
    );
    for (const name of ['model.safetensors', 'config.json', 'tokenizer.json', 'selfcest.json']) {
      const files = shippedMap();
      files.delete(name);
      expect(() => decodeCheckpoint(files), name).toThrow(`missing file ${name}`);
    }
    const withoutOptional = shippedMap();
    withoutOptional.delete('tokenizer_config.json');
    expect(decodeCheckpoint(withoutOptional).tokenizerConfig).toBeUndefined();
  });
});
