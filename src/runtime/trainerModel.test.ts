import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../core/io/checkpoint';
import { ZERO_COUNTERS } from '../core/io/provenance';
import { initBackend } from './backend';
import { TrainerModel } from './trainerModel';

beforeAll(async () => {
  await initBackend('cpu');
});

describe('trainer model optimizers', () => {
  it('keep their moments across steps and take the settings of each call', async () => {
    const model = TrainerModel.random('tiny', 0);
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
    model.rebuild(await model.weights());
    const fresh = model.grpoOptimizer(1e-3, 0, 1);
    expect(fresh).not.toBe(first);
    expect(fresh.step).toBe(0);
    grads.forEach((g) => g.dispose());
    model.dispose();
  });
});

describe('a resumed model', () => {
  it('trains on the saved weights at their counters, measures KL against its origin and resets to it', async () => {
    const origin = TrainerModel.random('tiny', 1);
    const originFiles = (await origin.exportFiles({})).files;
    const trained = TrainerModel.random('tiny', 2); // stands for the origin after some training
    const current = await trained.exportFiles({});
    trained.dispose();
    origin.dispose();
    const counters = { policyVersion: 9, grpoSteps: 7, sftSteps: 2 };
    const model = TrainerModel.resumed(decodeCheckpoint(originFiles), ZERO_COUNTERS, decodeCheckpoint(current.files), counters, 'checkpoints/x/');
    expect(model.report()).toMatchObject({ policyVersion: 9, source: 'checkpoints/x/' });
    expect(model.counters()).toEqual(counters);
    const wte = 'transformer.wte.weight';
    const values = async (p: Map<string, tf.Variable>) => Array.from(await (p.get(wte) as tf.Variable).data());
    expect(await values(model.policy.params)).toEqual(Array.from(decodeCheckpoint(current.files).tensors.get(wte) as Float32Array));
    expect(await values(model.reference)).toEqual(Array.from(decodeCheckpoint(originFiles).tensors.get(wte) as Float32Array));
    // The export of the origin carries the origin's counters; that of the weights, theirs.
    expect((await model.exportFiles({}, 'origin')).counters).toEqual(ZERO_COUNTERS);
    expect((await model.exportFiles({})).counters).toEqual(counters);
    const reset = model.fresh();
    expect(reset.counters()).toEqual(ZERO_COUNTERS);
    expect(await values(reset.policy.params)).toEqual(await values(model.reference));
    reset.dispose();
    model.dispose();
  });

  it('an import with provenance resumes at its counters, and Reset goes back to them; another shape is refused', async () => {
    const tiny = TrainerModel.random('tiny', 1);
    const files = (await tiny.exportFiles({})).files;
    tiny.dispose();
    const counters = { policyVersion: 5, grpoSteps: 5, sftSteps: 0 };
    const model = TrainerModel.fromCheckpoint(decodeCheckpoint(files), 'run.tar', counters);
    model.version++;
    model.grpoSteps++;
    const reset = model.fresh();
    expect(reset.counters()).toEqual(counters);
    reset.dispose();
    model.dispose();
    const small = TrainerModel.random('small', 1);
    const other = (await small.exportFiles({})).files;
    small.dispose();
    expect(() => TrainerModel.resumed(decodeCheckpoint(files), ZERO_COUNTERS, decodeCheckpoint(other), counters, 'x')).toThrow(/^loadFiles: the origin weights are of another shape than the current ones \(nLayer/);
  });

  it('reports what trained its checkpoint (a CLI train run: GRPO), through Reset; a random init or an unrecorded one: null', async () => {
    const tiny = TrainerModel.random('tiny', 1);
    expect(tiny.report().trainedBy).toBeNull();
    const byTrain = decodeCheckpoint((await tiny.exportFiles({ kind: 'train', lr: 2e-5 })).files);
    const bySft = decodeCheckpoint((await tiny.exportFiles({ kind: 'sft' })).files);
    const page = decodeCheckpoint((await tiny.exportFiles({ playground: {} })).files);
    tiny.dispose();
    const grpo = TrainerModel.fromCheckpoint(byTrain, 'checkpoints/selfcest-arith/');
    expect(grpo.report().trainedBy).toBe('grpo');
    const reset = grpo.fresh();
    expect(reset.report().trainedBy).toBe('grpo');
    const sft = TrainerModel.fromCheckpoint(bySft, 'x');
    const unknown = TrainerModel.fromCheckpoint(page, 'y');
    expect([sft.report().trainedBy, unknown.report().trainedBy]).toEqual(['sft', null]);
    for (const m of [grpo, reset, sft, unknown]) m.dispose();
  });
});
