/** Data-parallel SFT: a gradient worker thread computes the same update as one thread. */
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { presetConfig } from '../src/core/model/config';
import { initParams, paramsToArrays } from '../src/core/model/params';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import { type RemoteGradients, sftSequences, sftStep } from '../src/core/sft/sft';
import { arithmetic } from '../src/core/tasks/arithmetic';
import { Tokenizer } from '../src/core/tokenizer/tokenizer';
import { initBackend } from '../src/runtime/backend';
import type { GradPool } from '../src/runtime/gradient/gradPool';
import { startNodeGradPool } from '../src/runtime/node/gradWorkers';
import { defaultSftConfig } from '../src/core/runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_SFT = defaultSftConfig();

const tok = Tokenizer.builtin();
const config = presetConfig('tiny');

beforeAll(async () => {
  await initBackend('wasm');
});

describe('data-parallel SFT', () => {
  it('two threads give the same losses and weights as one (within float summation order), and the same bits however the micro-batches were spread', async () => {
    const cfg = { ...TABLE_SFT, task: 'arithmetic', steps: 3, seed: 9, batchTokens: 1024 };
    let taken = 0; // micro-batches the worker computed
    const run = async (workers: GradPool | null, remotes?: RemoteGradients[]) => {
      const params = initParams(config, 9);
      const opt = new AdamW(params, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: 3e-3 });
      const losses: number[] = [];
      for (let s = 0; s < 3; s++) {
        if (workers) await workers.sync(params, config);
        const seqs = sftSequences(arithmetic, arithmetic.defaultOptions, cfg, s, (t) => tok.encode(t));
        const counted = workers?.sftRemotes().map((r): RemoteGradients => async (...a) => {
          const m = await r(...a);
          taken += m?.size ?? 0;
          return m;
        });
        losses.push((await sftStep(params, config, opt, seqs, 3e-3, 256, remotes ?? counted ?? [])).loss);
      }
      const weights = await paramsToArrays(params);
      opt.dispose();
      params.forEach((p) => p.dispose());
      return { losses, weights };
    };
    const single = await run(null);
    const workers = await startNodeGradPool(1, 'wasm');
    await run(workers); // the shares pad to other lengths than one thread: their cached masks come first
    const before = tf.memory().numTensors;
    taken = 0;
    const parallel = await run(workers);
    expect(taken).toBeGreaterThan(0); // the worker did take micro-batches from the queue
    // Where memory cannot be shared (a page without cross-origin isolation) the threads get fixed shares.
    const g = globalThis as { crossOriginIsolated?: boolean };
    g.crossOriginIsolated = false;
    const fixed = await run(workers).finally(() => delete g.crossOriginIsolated);
    workers.terminate();
    expect(tf.memory().numTensors).toBe(before);
    // The same micro-batches computed all here (a worker that is gone), spread by a shared queue,
    // or dealt in fixed shares: the same bits, since the gradients are added in micro-batch order.
    const alone = await run(null, [async () => null]);
    expect(parallel).toEqual(alone);
    expect(fixed).toEqual(alone);
    parallel.losses.forEach((l, i) => expect(l).toBeCloseTo(single.losses[i], 5));
    let maxDiff = 0;
    for (const [name, a] of single.weights) {
      const b = parallel.weights.get(name)!;
      for (let i = 0; i < a.length; i++) maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
    }
    expect(maxDiff).toBeLessThan(1e-4);
  });
});
