/** Data-parallel GRPO: updates shared with a gradient worker thread give the update of one thread, also when the worker dies or hangs. */
import { toyPolicyModel, toyScorer } from '../src/core/policyModel';
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { presetConfig } from '../src/core/model/config';
import { cachedCausalMasks } from '../src/core/model/gpt';
import { cloneParams, initParams, paramsToArrays } from '../src/core/model/params';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import type { RemotePolicyGradients } from '../src/core/rl/ppoLoss';
import { type GrpoConfig, type RewardFn, type StepMetrics, grpoStep } from '../src/core/rl/grpoStep';
import { arithmetic } from '../src/core/tasks/arithmetic';
import { Tokenizer } from '../src/core/tokenizer/tokenizer';
import { tokenId } from '../src/core/tokenizer/vocab';
import { initBackend } from '../src/runtime/backend';
import type { Endpoint, WorkerHandle } from '../src/runtime/transport/endpoint';
import type { NodeWorkerHandle } from '../src/runtime/node/nodeEndpoint';
import { GradPool } from '../src/runtime/gradient/gradPool';
import { GRAD_WORKER_ENTRY, startNodeGradPool } from '../src/runtime/node/gradWorkers';
import { startNodeWorker } from '../src/runtime/node/startWorker';
import { defaultGrpoConfig } from '../src/core/runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();

const tok = Tokenizer.builtin();
const encode = (t: string) => tok.encode(t);
const config = presetConfig('tiny');

beforeAll(async () => {
  await initBackend('wasm');
});

// A random init scores 0 on the task: reward the digits among the root's own tokens instead.
const DIGITS = new Set([...'0123456789'].map(tokenId));
const digits: RewardFn = (trace) => {
  const root = trace.contexts[0];
  const n = root.tokens.filter((t, p) => root.writers[p] === 'g' && DIGITS.has(t)).length;
  return { reward: n, score: n, rootPenalty: 0, clonePenalty: 0, callPenalty: 0, budgetPenalty: 0 };
};

// Three prompts, one per mini-batch: up to three updates, each after a weight sync; KL on.
const cfg: GrpoConfig = {
  ...TABLE_GRPO,
  task: 'arithmetic',
  steps: 1,
  seed: 5,
  batch: 3,
  miniBatch: 1,
  lr: 3e-3,
  microTokens: 128,
  group: 8,
  rollout: { ...TABLE_GRPO.rollout, rootMaxTokens: 12 },
  advantage: { ...TABLE_GRPO.advantage, gating: false },
  loss: { ...TABLE_GRPO.loss, beta: 0.01 },
};

let workerItems = 0;

async function oneStep(pool: GradPool | null, withStartCopy = false): Promise<{ metrics: StepMetrics; weights: Map<string, Float32Array> }> {
  const params = initParams(config, 5);
  const reference = cloneParams(params, { trainable: false });
  const optimizer = new AdamW(params, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: cfg.lr });
  const shared = pool?.share({ kind: 'toy', config }, withStartCopy ? await paramsToArrays(params) : undefined);
  // Counts the micro-batches the workers computed.
  const gradients = shared && {
    ...shared,
    remotes: shared.remotes.map((r): RemotePolicyGradients => async (...a) => {
      const m = await r(...a);
      workerItems += m?.size ?? 0;
      return m;
    }),
  };
  const { metrics } = await grpoStep(
    {
      model: toyPolicyModel({ config, params }, encode),
      reference: reference === null ? null : toyScorer(reference, config),
      optimizer,
      task: arithmetic,
      encode,
      rewardFn: digits,
      ...(gradients ? { gradients } : {}),
    },
    cfg,
    0,
  );
  const weights = await paramsToArrays(params);
  optimizer.dispose();
  params.forEach((p) => p.dispose());
  reference.forEach((p) => p.dispose());
  return { metrics, weights };
}

/** A step that fell back to this thread is the single-thread step: updates, loss and weights. */
function expectSameStep(got: Awaited<ReturnType<typeof oneStep>>, single: Awaited<ReturnType<typeof oneStep>>): void {
  expect(got.metrics.updates).toBe(single.metrics.updates);
  expect(got.metrics.loss).toBeCloseTo(single.metrics.loss, 5);
  let maxDiff = 0;
  for (const [name, a] of single.weights) {
    const b = got.weights.get(name)!;
    for (let i = 0; i < a.length; i++) maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
  }
  expect(maxDiff).toBeLessThan(1e-4);
}

/** Two steps with the same weights and metrics, bit for bit (the wall times aside). */
function sameBits(a: Awaited<ReturnType<typeof oneStep>>, b: Awaited<ReturnType<typeof oneStep>>): boolean {
  const timeless = (m: StepMetrics) => ({ ...m, rolloutTokensPerSec: 0, wallSec: 0 });
  expect(timeless(a.metrics)).toEqual(timeless(b.metrics));
  expect(a.weights).toEqual(b.weights);
  return true;
}

describe('data-parallel GRPO', () => {
  it("a step's first sync sends the host copy it starts from instead of reading the weights back; the step is the same bits", async () => {
    const pool = await startNodeGradPool(1, 'wasm');
    const syncs: boolean[] = [];
    const sync = pool.sync.bind(pool);
    pool.sync = (params, model, hostCopy) => (syncs.push(hostCopy !== undefined), sync(params, model, hostCopy));
    try {
      const read = await oneStep(pool);
      const readSyncs = syncs.splice(0);
      const reused = await oneStep(pool, true);
      expect(sameBits(reused, read)).toBe(true);
      // One sync per update; with the copy the first of them reads nothing back.
      expect(readSyncs).toEqual(readSyncs.map(() => false));
      expect(syncs).toEqual([true, ...readSyncs.slice(1)]);
      expect(syncs.length).toBe(read.metrics.updates);
    } finally {
      pool.terminate();
    }
  });

  it('a step shared with a gradient worker gives the losses, diagnostics and weights of one thread', async () => {
    const single = await oneStep(null);
    const pool = await startNodeGradPool(1, 'wasm');
    // Live tensors but the cached causal masks (the shares' micro-batches have other lengths).
    const live = () => tf.memory().numTensors - cachedCausalMasks();
    const before = live();
    let parallel: Awaited<ReturnType<typeof oneStep>>;
    workerItems = 0;
    try {
      parallel = await oneStep(pool);
    } finally {
      pool.terminate();
    }
    expect(workerItems).toBeGreaterThan(0); // the worker did take micro-batches from the queue
    expect(live()).toBe(before);
    expect(single.metrics.updates).toBeGreaterThanOrEqual(2); // a group whose rewards are all equal trains nothing
    expect(parallel.metrics.updates).toBe(single.metrics.updates);
    expect(single.metrics.trainedTokens).toBeGreaterThan(0);
    expect(parallel.metrics.trainedTokens).toBe(single.metrics.trainedTokens);
    expect(parallel.metrics.meanReward).toBe(single.metrics.meanReward);
    for (const k of ['loss', 'kl', 'approxKl', 'entropy', 'clipFraction', 'gradNorm'] as const) expect(parallel.metrics[k]).toBeCloseTo(single.metrics[k], 5);
    let maxDiff = 0;
    let moved = 0;
    const init = await paramsToArrays(initParams(config, 5));
    for (const [name, a] of single.weights) {
      const b = parallel.weights.get(name)!;
      const w0 = init.get(name)!;
      for (let i = 0; i < a.length; i++) {
        maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
        moved = Math.max(moved, Math.abs(a[i] - w0[i]));
      }
    }
    expect(moved).toBeGreaterThan(1e-3); // the updates did move the weights
    expect(maxDiff).toBeLessThan(1e-4); // Adam turns summation-order noise in tiny gradients into a few % of one lr step
  });

  it('a gradient worker that dies: its micro-batches are computed here, the step is the same bits, and repair restarts it', async () => {
    const single = await oneStep(null);
    const handles: NodeWorkerHandle[] = [];
    const pool = await GradPool.start((i) => (handles[i] = startNodeWorker(GRAD_WORKER_ENTRY, `grad-${i}`)), 1, { backend: 'wasm' });
    try {
      const exited = new Promise<void>((resolve) => handles[0].onExit(() => resolve()));
      void handles[0].thread.terminate(); // the thread ends under the pool, as a crash would
      await exited;
      expect(pool.healthy).toBe(false);
      const alone = await oneStep(pool);
      expectSameStep(alone, single);
      expect((await pool.repair()).join()).toMatch(/gradient worker 0 restarted \(worker exited with code 1\)/);
      expect(pool.healthy).toBe(true);
      const again = await oneStep(pool);
      expect(again.metrics.loss).toBeCloseTo(single.metrics.loss, 5);
      // The micro-batches are added in their order whoever computed them: the same bits.
      expect(sameBits(alone, again)).toBe(true);
    } finally {
      pool.terminate();
    }
  });

  it('a gradient worker that hangs: the trainer gives up on it in time, computes its micro-batches, and repair restarts it', async () => {
    const single = await oneStep(null);
    // A real worker thread whose answers to its gradient requests are lost on the way back, as
    // when its readback never completes; everything else it answers (start, weights) arrives.
    const lost = new Set<number>(); // ids of the first thread's requests (each client numbers its own)
    const handles: NodeWorkerHandle[] = [];
    let spawned = 0;
    const spawn = (i: number): WorkerHandle => {
      const first = spawned++ === 0; // the thread repair starts answers everything
      const h = (handles[i] = startNodeWorker(GRAD_WORKER_ENTRY, `grad-${i}`));
      const endpoint: Endpoint = {
        postMessage: (m, transfer) => {
          const req = m as { type?: string; id?: number; request?: { kind?: string } };
          if (first && req.request?.kind === 'policyGrads') lost.add(req.id as number);
          h.endpoint.postMessage(m, transfer);
        },
        onMessage: (listener) => h.endpoint.onMessage((d) => !(first && lost.has((d as { id?: number }).id ?? -1)) && listener(d)),
      };
      return { endpoint, onExit: (l) => h.onExit(l), terminate: () => h.terminate() };
    };
    const pool = await GradPool.start(spawn, 1, { backend: 'wasm', patience: (ms) => 3000 + 2 * ms });
    try {
      // The thread's own exit (the pool's terminate is deliberate, so the handle reports no crash).
      const exited = new Promise<void>((resolve) => handles[0].thread.once('exit', () => resolve()));
      const alone = await oneStep(pool);
      expect(lost.size).toBe(1); // one request went unanswered; the worker was asked nothing more
      await exited; // its thread was ended
      expect(pool.healthy).toBe(false);
      expectSameStep(alone, single);
      expect((await pool.repair()).join()).toMatch(/gradient worker 0 restarted \(no answer within [\d.]+ s of this thread's items \(policyGrads\)\)/);
      const again = await oneStep(pool); // the new thread answers
      expect(again.metrics.loss).toBeCloseTo(single.metrics.loss, 5);
      expect(pool.healthy).toBe(true);
      expect(sameBits(alone, again)).toBe(true);
    } finally {
      pool.terminate();
    }
  });
});
