import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../core/io/checkpoint';
import { ZERO_COUNTERS } from '../../core/io/provenance';
import { initBackend } from '../backend';
import { ToyModel } from './trainerModel';

beforeAll(async () => {
  await initBackend('cpu');
});

describe('trainer model optimizers', () => {
  it('keep their moments across steps and take the settings of each call', async () => {
    const model = ToyModel.random('tiny', 0);
    const first = model.grpoOptimizer(1e-3, 0, 1);
    const grads = new Map([...model.policy.params].map(([name, p]) => [name, tf.onesLike(p)]));
    await first.apply(grads);
    // Changed weight decay and clip apply to the same optimizer: step and moments stay.
    const again = model.grpoOptimizer(2e-3, 0.1, 0.5);
    expect(again).toBe(first);
    expect(again.step).toBe(1);
    expect(again.cfg).toMatchObject({ lr: 2e-3, weightDecay: 0.1, gradClip: 0.5 });
    expect(model.sftOptimizer(3e-3, 0.01, 1)).not.toBe(first);
    expect(model.sftOptimizer(3e-3, 0.02, 2).cfg).toMatchObject({ lr: 3e-3, weightDecay: 0.02, gradClip: 2 });
    // After a rebuild (a lost device) the moments restart, with the settings of the next call.
    await model.rebuild(await model.weights());
    const fresh = model.grpoOptimizer(1e-3, 0, 1);
    expect(fresh).not.toBe(first);
    expect(fresh.step).toBe(0);
    grads.forEach((g) => g.dispose());
    model.dispose();
  });
});

describe('a resumed model', () => {
  it('trains on the saved weights at their counters, measures KL against its origin and resets to it', async () => {
    const origin = ToyModel.random('tiny', 1);
    const originFiles = (await origin.exportFiles({})).files;
    const trained = ToyModel.random('tiny', 2); // stands for the origin after some training
    const current = await trained.exportFiles({});
    trained.dispose();
    origin.dispose();
    const counters = { policyVersion: 9, grpoSteps: 7, sftSteps: 2 };
    const model = ToyModel.resumed(decodeCheckpoint(originFiles), ZERO_COUNTERS, decodeCheckpoint(current.files), counters, 'checkpoints/x/');
    expect(model.report()).toMatchObject({ policyVersion: 9, source: 'checkpoints/x/' });
    expect(model.counters()).toEqual(counters);
    const wte = 'transformer.wte.weight';
    const values = async (p: Map<string, tf.Variable>) => Array.from(await (p.get(wte) as tf.Variable).data());
    expect(await values(model.policy.params)).toEqual(Array.from(decodeCheckpoint(current.files).tensors.get(wte) as Float32Array));
    expect(await values(model.reference)).toEqual(Array.from(decodeCheckpoint(originFiles).tensors.get(wte) as Float32Array));
    // The export of the origin carries the origin's counters; that of the weights, theirs.
    expect((await model.exportFiles({}, 'origin')).counters).toEqual(ZERO_COUNTERS);
    expect((await model.exportFiles({})).counters).toEqual(counters);
    const reset = await model.fresh();
    expect(reset.counters()).toEqual(ZERO_COUNTERS);
    expect(await values(reset.policy.params)).toEqual(await values(model.reference));
    reset.dispose();
    model.dispose();
  });

  it('an import with provenance resumes at its counters, and Reset goes back to them; another shape is refused', async () => {
    const tiny = ToyModel.random('tiny', 1);
    const files = (await tiny.exportFiles({})).files;
    tiny.dispose();
    const counters = { policyVersion: 5, grpoSteps: 5, sftSteps: 0 };
    const model = ToyModel.fromCheckpoint(decodeCheckpoint(files), 'run.tar', counters);
    model.version++;
    model.grpoSteps++;
    const reset = await model.fresh();
    expect(reset.counters()).toEqual(counters);
    reset.dispose();
    model.dispose();
    const small = ToyModel.random('small', 1);
    const other = (await small.exportFiles({})).files;
    small.dispose();
    expect(() => ToyModel.resumed(decodeCheckpoint(files), ZERO_COUNTERS, decodeCheckpoint(other), counters, 'x')).toThrow(
      /^loadFiles: the origin weights are of another shape than the current ones \(nLayer/,
    );
  });

  it('reports what trained its checkpoint (a CLI train run: GRPO), through Reset; a random init or an unrecorded one: null', async () => {
    const tiny = ToyModel.random('tiny', 1);
    expect(tiny.report().trainedBy).toBeNull();
    const byTrain = decodeCheckpoint((await tiny.exportFiles({ kind: 'train', lr: 2e-5 })).files);
    const bySft = decodeCheckpoint((await tiny.exportFiles({ kind: 'sft' })).files);
    const page = decodeCheckpoint((await tiny.exportFiles({ playground: {} })).files);
    tiny.dispose();
    const grpo = ToyModel.fromCheckpoint(byTrain, 'checkpoints/selfcest-arith/');
    expect(grpo.report().trainedBy).toBe('grpo');
    const reset = await grpo.fresh();
    expect(reset.report().trainedBy).toBe('grpo');
    const sft = ToyModel.fromCheckpoint(bySft, 'x');
    const unknown = ToyModel.fromCheckpoint(page, 'y');
    expect([sft.report().trainedBy, unknown.report().trainedBy]).toEqual(['sft', null]);
    for (const m of [grpo, reset, sft, unknown]) m.dispose();
  });
});

describe('optimizer moments saved with the weights', () => {
  const grad = (model: ToyModel, v: number) => new Map([...model.policy.params].map(([name, p]) => [name, tf.fill(p.shape, v)]));
  const wte = async (model: ToyModel) => Array.from(await (model.policy.params.get('transformer.wte.weight') as tf.Variable).data());

  it('go with an export on request, and a resumed model then takes exactly the update the saved one would', async () => {
    const model = ToyModel.random('tiny', 4);
    const g1 = grad(model, 0.3);
    await model.grpoOptimizer(1e-2, 0, 1).apply(g1);
    await model.sftOptimizer(1e-2, 0, 1).apply(g1);
    await model.sftOptimizer(1e-2, 0, 1).apply(g1);
    const origin = (await model.exportFiles({}, 'origin')).files;
    expect([...(await model.exportFiles({})).files.keys()]).not.toContain('optimizer-grpo.safetensors');
    const { files, counters } = await model.exportFiles({}, 'current', { optimizer: true });
    expect([...files.keys()]).toEqual(expect.arrayContaining(['optimizer-grpo.safetensors', 'optimizer-sft.safetensors']));
    // The origin's export never carries moments (they belong to the current weights).
    expect([...(await model.exportFiles({}, 'origin', { optimizer: true })).files.keys()]).not.toContain('optimizer-grpo.safetensors');
    const resumed = ToyModel.resumed(decodeCheckpoint(origin), ZERO_COUNTERS, decodeCheckpoint(files), counters, 'session');
    resumed.loadOptimizers(files);
    expect(resumed.optimizerSteps()).toEqual({ grpo: 1, sft: 2 });
    // The same next gradient: the same weights (a restart from zero moments would differ).
    const g2 = grad(model, -0.7);
    await model.grpoOptimizer(1e-2, 0, 1).apply(g2);
    await resumed.grpoOptimizer(1e-2, 0, 1).apply(grad(resumed, -0.7));
    expect(await wte(resumed)).toEqual(await wte(model));
    const cold = ToyModel.resumed(decodeCheckpoint(origin), ZERO_COUNTERS, decodeCheckpoint(files), counters, 'no moments');
    await cold.grpoOptimizer(1e-2, 0, 1).apply(grad(cold, -0.7));
    expect(await wte(cold)).not.toEqual(await wte(model));
    for (const m of [model, resumed, cold]) m.dispose();
    [...g1.values(), ...g2.values()].forEach((t) => t.dispose());
  });

  it('a damaged or mismatched optimizer file is refused, naming it, and leaves the optimizers as they were', async () => {
    const model = ToyModel.random('tiny', 5);
    await model.grpoOptimizer(1e-2, 0, 1).apply(grad(model, 0.1));
    const { files } = await model.exportFiles({}, 'current', { optimizer: true });
    const target = ToyModel.random('tiny', 6);
    const truncated = new Map([['optimizer-grpo.safetensors', (files.get('optimizer-grpo.safetensors') as Uint8Array).slice(0, 40)]]);
    expect(() => target.loadOptimizers(truncated)).toThrow(/^optimizer-grpo\.safetensors: /);
    const small = ToyModel.random('small', 1);
    await small.sftOptimizer(1e-2, 0, 1).apply(grad(small, 0.1));
    const other = (await small.exportFiles({}, 'current', { optimizer: true })).files;
    expect(() => target.loadOptimizers(other)).toThrow(/^optimizer-sft\.safetensors: moment tensor m\.\S+ has \d+ values, expected \d+/);
    expect(target.optimizerSteps()).toEqual({ grpo: null, sft: null });
    for (const m of [model, target, small]) m.dispose();
  });
});
