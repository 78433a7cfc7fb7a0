import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
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
