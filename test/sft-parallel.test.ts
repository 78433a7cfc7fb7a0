/** Data-parallel SFT: a gradient worker thread computes the same update as one thread, for the toy and for a Hugging Face model. */
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
import { defaultSftConfig, taskMixOf } from '../src/core/runConfigTargets';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { decoderConfigFromHf } from '../src/core/model/decoder';
import { INIT_DEFAULT_SIZES, initHfFolder } from '../src/core/model/hfInit';
import { fullPolicy, hfScorer } from '../src/core/policyModel';
import { runConfigDefaults } from '../src/core/runConfig';
import { scorerLearner, sftStepOf } from '../src/core/sft/sft';
import { textSftSequences } from '../src/core/sft/textSft';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { writeHfFolder } from '../src/runtime/node/folderWriter';

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
        if (workers) await workers.sync(params, { kind: 'toy', config });
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

describe('data-parallel SFT of a Hugging Face model (every weight trained)', () => {
  it("a worker rebuilds the model from its weights: the same bits as the micro-batches computed here, the same loss as one thread's queue", async () => {
    const parts = initHfFolder('qwen2', { ...INIT_DEFAULT_SIZES, layers: 2, hiddenSize: 32, heads: 2, kvHeads: 1, intermediateSize: 48, maxPositions: 512 }, 4);
    const hfConfig = decoderConfigFromHf(parts.config);
    const dir = await mkdtemp(join(tmpdir(), 'sft-parallel-hf-'));
    await writeHfFolder(dir, parts);
    const { model } = await loadHfTextModel(nodeFolderReader(dir), 'float32');
    const cfg = { ...TABLE_SFT, task: 'arithmetic', steps: 2, seed: 5, batchTokens: 1024 };
    const mix = taskMixOf(runConfigDefaults('sft'));
    let taken = 0;
    const run = async (workers: GradPool | null, remotes?: RemoteGradients[]) => {
      const policy = fullPolicy({ ...model, params: new Map([...model.params].map(([k, t]) => [k, t.clone()])) });
      const learner = scorerLearner(hfScorer(policy.model, policy.trainable));
      const opt = new AdamW(policy.trainable, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: 3e-3 });
      const losses: number[] = [];
      for (let s = 0; s < 2; s++) {
        if (workers) await workers.sync(policy.trainable, { kind: 'hf', config: hfConfig });
        const seqs = textSftSequences(mix, cfg, s, model.tokenizer, { rootMaxTokens: 256, cloneBudget: 64 }, 512);
        const counted = workers?.sftRemotes().map((r): RemoteGradients => async (...a) => {
          const m = await r(...a);
          taken += m?.size ?? 0;
          return m;
        });
        losses.push((await sftStepOf(learner, opt, seqs, 3e-3, 256, remotes ?? counted ?? [])).loss);
      }
      const weights = await paramsToArrays(policy.trainable);
      opt.dispose();
      policy.trainable.forEach((p) => p.dispose());
      policy.reference.forEach((p) => p.dispose());
      return { losses, weights };
    };
    const workers = await startNodeGradPool(1, 'wasm');
    taken = 0;
    const parallel = await run(workers);
    workers.terminate();
    expect(taken).toBeGreaterThan(0);
    const alone = await run(null, [async () => null]);
    expect(parallel).toEqual(alone);
    const single = await run(null);
    parallel.losses.forEach((l, i) => expect(l).toBeCloseTo(single.losses[i], 5));
    model.params.forEach((t) => t.dispose());
    await rm(dir, { recursive: true, force: true });
  }, 120_000);
});
