/**
 * The WebGPU kernels in Node (Dawn from the npm `webgpu` package; SwiftShader where there is no
 * GPU): the cached decode equals the full forward, and logits, policy gradients and their global
 * norm equal wasm's. Tiny model, few tokens: a software adapter is slow.
 * Skipped, with the reason printed, where no adapter can be created; SELFCEST_REQUIRE_WEBGPU=1
 * turns the skip into a failure (CI on a machine known to have one).
 */
import { toyScorer } from '../src/core/policyModel';
import * as tf from '@tensorflow/tfjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { initBackend } from '../src/runtime/backend';
import { installNodeWebgpu } from '../src/runtime/node/nodeWebgpu';
import { type ModelConfig, PRESETS } from '../src/core/model/config';
import { BatchedDecoder } from '../src/core/model/decode';
import { forwardLogits, targetLogProbs } from '../src/core/model/gpt';
import { type GPTParams, disposeParams, initParams, paramsFromArrays, paramsToArrays } from '../src/core/model/params';
import { type PolicyLossConfig, type RlSequence, aggregationWeights, packRl, policyGradients } from '../src/core/rl/ppoLoss';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import { addAll } from '../src/core/parallel/grads';
import { Rng } from '../src/core/rng';
import { decodeCheckpoint } from '../src/core/io/checkpoint';
import { ZERO_COUNTERS } from '../src/core/io/provenance';
import { ToyModel } from '../src/runtime/engine/trainerModel';
import { fusedAdamWAvailable, setFusedAdamW } from '../src/core/optim/adamwStep';
import { defaultGrpoConfig } from '../src/core/runConfigTargets';
import { widenBits } from '../src/core/io/safetensors';
import { type WeightStorage, decoderParamBytes, decoderParams } from '../src/core/model/decoder';
import { packHalves, widenHalf, widenHalfRows } from '../src/core/model/halfWeights';
import { Lora } from '../src/core/model/lora';
import { TINY as HALF_TINY, loraScores, randomHalfTensors } from './halfDecoder';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();

const noGpu = await installNodeWebgpu().then(
  () => null,
  (e: unknown) => (e instanceof Error ? e.message : String(e)),
);
if (noGpu !== null) {
  if (process.env.SELFCEST_REQUIRE_WEBGPU === '1') throw new Error(`SELFCEST_REQUIRE_WEBGPU=1 but ${noGpu}`);
  console.warn(`webgpu-node tests skipped: ${noGpu}`);
}

const config: ModelConfig = { ...PRESETS.tiny, nPositions: 32 };
const V = config.vocabSize;
type Backend = 'wasm' | 'webgpu';

/** Seeded weights scaled up (not the LayerNorms) so that attention is far from uniform. */
let weights: Map<string, Float32Array> | null = null;
async function sharpWeights(): Promise<Map<string, Float32Array>> {
  if (weights) return weights;
  await initBackend('wasm');
  const base = initParams(config, 5);
  weights = await paramsToArrays(base);
  disposeParams(base);
  for (const [name, values] of weights) if (!name.includes('.ln_')) for (let i = 0; i < values.length; i++) values[i] *= 4;
  return weights;
}

/** WebGPU validation errors (an invalid kernel reads back zeros instead of throwing). */
const gpuErrors: string[] = [];
interface ErrorEventTarget {
  addEventListener(type: 'uncapturederror', listener: (ev: { error: { message: string } }) => void): void;
}
let watched: ErrorEventTarget | null = null;

/** Collects the active webgpu device's validation errors into gpuErrors. */
function watchErrors(): void {
  const device = (tf.backend() as unknown as { device: ErrorEventTarget }).device;
  if (device !== watched) device.addEventListener('uncapturederror', (ev) => gpuErrors.push(ev.error.message.split('\n')[0]));
  watched = device;
}

/** Runs `f` on a backend with the shared weights as fresh variables there. */
async function on<T>(backend: Backend, f: (p: GPTParams) => Promise<T>): Promise<T> {
  const arrays = await sharpWeights();
  await initBackend(backend);
  if (backend === 'webgpu') watchErrors();
  const params = paramsFromArrays(config, arrays);
  try {
    return await f(params);
  } finally {
    disposeParams(params);
  }
}

function tokens(rng: Rng, n: number): number[] {
  return Array.from({ length: n }, () => rng.int(0, V - 1));
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

function maxAbs(a: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]));
  return m;
}

/** Logits after the last token of each sequence, from the training forward. */
async function lastLogits(p: GPTParams, seqs: readonly number[][]): Promise<Float32Array> {
  const out = new Float32Array(seqs.length * V);
  for (let i = 0; i < seqs.length; i++) {
    const s = seqs[i];
    const t = tf.tidy(() => tf.slice(forwardLogits(p, config, tf.tensor2d([s], [1, s.length], 'int32')), [0, s.length - 1, 0], [1, 1, V]));
    out.set(await t.data(), i * V);
    t.dispose();
  }
  return out;
}

/** RL sequences with behaviour and reference log-probs away from the policy's, so ratios, clips and KL all act. */
async function rlSequences(): Promise<RlSequence[]> {
  const rng = new Rng(9);
  return on('wasm', async (p) => {
    const seqs: RlSequence[] = [];
    for (const [len, adv] of [
      [7, 1.1],
      [12, -0.8],
      [9, 0.5],
    ] as const) {
      const toks = tokens(rng, len);
      const lp = tf.tidy(() =>
        targetLogProbs(p, config, tf.tensor2d([toks.slice(0, -1)], [1, len - 1], 'int32'), tf.tensor2d([toks.slice(1)], [1, len - 1], 'int32')),
      );
      const cur = Array.from(await lp.data());
      lp.dispose();
      const actions = cur.map((_, t) => (t >= 2 ? 1 : 0));
      const shift = (sd: number) => cur.map((v, t) => (actions[t] ? v + sd * rng.normal() : 0));
      seqs.push({ tokens: toks, actions, oldLogprobs: shift(0.3), refLogprobs: shift(0.3), advantage: adv, weight: 1 });
    }
    return seqs;
  });
}

const LOSS: PolicyLossConfig = { ...TABLE_GRPO.loss, beta: 0.05, dualClip: 3 };

/** The GRPO update's gradients (flat, by parameter), their norm read back here, and AdamW's norm. */
async function policyUpdate(backend: Backend, seqs: RlSequence[]) {
  return on(backend, async (p) => {
    const batches = packRl(seqs, aggregationWeights(seqs, LOSS.aggregation), 24); // 2 micro-batches
    const r = await policyGradients(toyScorer(p, config), batches, LOSS);
    const grads = new Map<string, Float32Array>();
    for (const [name, g] of r.grads) grads.set(name, (await g.data()) as Float32Array);
    const opt = new AdamW(p, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
    const { gradNorm } = await opt.apply(r.grads);
    opt.dispose();
    r.grads.forEach((g) => g.dispose());
    let sq = 0;
    for (const g of grads.values()) for (const x of g) sq += x * x;
    return { loss: r.loss, kl: r.kl, grads, readNorm: Math.sqrt(sq), gradNorm };
  });
}

afterEach(() => {
  expect(gpuErrors.splice(0)).toEqual([]);
});

afterAll(async () => {
  await initBackend('wasm');
});

describe.skipIf(noGpu !== null)('WebGPU in Node (tiny preset)', () => {
  it('the KV-cached decode equals the full forward on webgpu', async () => {
    await on('webgpu', async (p) => {
      expect(tf.getBackend()).toBe('webgpu');
      const rng = new Rng(1);
      const seqs = [3, 8].map((n) => tokens(rng, n));
      const dec = new BatchedDecoder(p, config, { capacity: 2 });
      const slots = seqs.map(() => dec.open());
      try {
        let out = await dec.feed(slots, seqs);
        expect(maxAbsDiff(out, await lastLogits(p, seqs))).toBeLessThan(1e-3);
        for (let step = 0; step < 2; step++) {
          const next = slots.map(() => tokens(rng, 1));
          next.forEach((t, i) => seqs[i].push(...t));
          out = await dec.feed(slots, next);
          expect(maxAbsDiff(out, await lastLogits(p, seqs))).toBeLessThan(1e-3);
        }
      } finally {
        dec.dispose();
      }
    });
  });

  it('forward logits on webgpu equal wasm', async () => {
    const rng = new Rng(2);
    const batch = [tokens(rng, 10), tokens(rng, 10)];
    const logits = (backend: Backend) =>
      on(backend, async (p) => {
        const t = tf.tidy(() => forwardLogits(p, config, tf.tensor2d(batch, [2, 10], 'int32')));
        const v = await t.data();
        t.dispose();
        return v;
      });
    const wasm = await logits('wasm');
    const gpu = await logits('webgpu');
    const scale = maxAbs(wasm);
    expect(scale).toBeGreaterThan(1); // sharp weights: a wrong kernel cannot hide in tiny logits
    expect(maxAbsDiff(gpu, wasm)).toBeLessThan(1e-4 * scale + 1e-4);
  });

  it('GRPO gradients and their global norm (what clipping reads) on webgpu equal wasm', async () => {
    const seqs = await rlSequences();
    const wasm = await policyUpdate('wasm', seqs);
    const gpu = await policyUpdate('webgpu', seqs);
    // Again, with the causal masks cached: nothing left behind, and the same numbers.
    const before = tf.memory().numTensors;
    const again = await policyUpdate('webgpu', seqs);
    expect(tf.memory().numTensors).toBe(before);
    expect(again.gradNorm).toBe(gpu.gradNorm);
    expect(gpu.loss).toBeCloseTo(wasm.loss, 4);
    expect(gpu.kl).toBeCloseTo(wasm.kl, 4);
    expect([...gpu.grads.keys()]).toEqual([...wasm.grads.keys()]);
    expect(gpu.grads.size).toBeGreaterThan(8); // more tensors than one WebGPU shader may bind
    for (const [name, g] of wasm.grads) {
      const scale = maxAbs(g);
      expect(maxAbsDiff(gpu.grads.get(name)!, g), name).toBeLessThan(1e-3 * scale + 1e-6);
    }
    expect(wasm.readNorm).toBeGreaterThan(0.01);
    expect(wasm.gradNorm).toBeCloseTo(wasm.readNorm, 4);
    expect(gpu.gradNorm).toBeCloseTo(gpu.readNorm, 4);
    expect(Math.abs(gpu.gradNorm - wasm.gradNorm) / wasm.gradNorm).toBeLessThan(1e-3);
  });

  it('sums of more tensors than a shader may bind (the SFT loss parts, the squared norms) are right on webgpu', async () => {
    // A real SFT step with 8+ micro-batches takes ~1.5 s each on SwiftShader: check the sum it uses.
    await initBackend('webgpu');
    const scalars = Array.from({ length: 20 }, (_, i) => tf.scalar(i + 1));
    const rows = Array.from({ length: 9 }, (_, i) => tf.tensor1d([i, -2 * i, 0.5]));
    const before = tf.memory().numTensors;
    const [a, b] = [addAll(scalars), addAll(rows)];
    expect(Array.from(await a.data())).toEqual([210]);
    expect(Array.from(await b.data())).toEqual([36, -72, 4.5]);
    tf.dispose([a, b]);
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([...scalars, ...rows]);
  });

  it('a session saved on webgpu (weights and both optimizers’ moments) resumes on webgpu and on wasm with the same next update', async () => {
    // What the page's session save reads back from the GPU, and what a reload puts back.
    const grad = (model: ToyModel, v: number) => new Map([...model.policy.params].map(([name, p]) => [name, tf.fill(p.shape, v)]));
    const wte = async (model: ToyModel) => Array.from(await (model.policy.params.get('transformer.wte.weight') as tf.Variable).data());
    const step = async (model: ToyModel, v: number) => {
      const g = grad(model, v);
      await model.grpoOptimizer(1e-2, 0, 1).apply(g);
      [...g.values()].forEach((t) => t.dispose());
    };
    await initBackend('webgpu');
    const model = ToyModel.random('tiny', 4);
    await step(model, 0.3);
    const g = grad(model, 0.2);
    await model.sftOptimizer(1e-2, 0, 1).apply(g);
    [...g.values()].forEach((t) => t.dispose());
    const origin = (await model.exportFiles({}, 'origin')).files;
    const { files, counters } = await model.exportFiles({}, 'current', { optimizer: true });
    await step(model, -0.7);
    const want = await wte(model);
    model.dispose();
    for (const backend of ['webgpu', 'wasm'] as const) {
      await initBackend(backend);
      const resumed = ToyModel.resumed(decodeCheckpoint(origin), ZERO_COUNTERS, decodeCheckpoint(files), counters, 'session');
      resumed.loadOptimizers(files);
      expect(resumed.optimizerSteps(), backend).toEqual({ grpo: 1, sft: 1 });
      await step(resumed, -0.7);
      expect(maxAbsDiff(await wte(resumed), want), backend).toBeLessThan(1e-5);
      resumed.dispose();
    }
    expect(gpuErrors).toEqual([]);
  });

  it('the fused AdamW kernel on webgpu gives the update the composed ops give on wasm', async () => {
    const arrays = await sharpWeights();
    const rng = new Rng(3);
    const grads = new Map([...arrays].map(([name, a]) => [name, Float32Array.from(a, () => rng.normal())]));
    const after = async (backend: Backend, fused: boolean) => {
      await initBackend(backend);
      const was = setFusedAdamW(fused);
      try {
        if (fused) expect(fusedAdamWAvailable()).toBe(true);
        const params = paramsFromArrays(config, arrays);
        const opt = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-2, weightDecay: 0.1, gradClip: 1 });
        for (let s = 0; s < 2; s++) {
          const g = new Map([...params].map(([name, p]) => [name, tf.tensor(grads.get(name) as Float32Array, p.shape)]));
          await opt.apply(g);
          g.forEach((t) => t.dispose());
        }
        const out = await paramsToArrays(params);
        opt.dispose();
        disposeParams(params);
        return out;
      } finally {
        setFusedAdamW(was);
      }
    };
    const gpu = await after('webgpu', true);
    const wasm = await after('wasm', false);
    for (const [name, w] of wasm) expect(maxAbsDiff(gpu.get(name) as Float32Array, w), name).toBeLessThan(1e-5);
    expect(gpuErrors).toEqual([]);
  });

  it('16-bit weights held 16-bit on webgpu: every pattern widens exactly, and the decoder gives wasm float32 logits and LoRA gradients', async () => {
    await initBackend('webgpu');
    watchErrors();
    const all = Uint16Array.from({ length: 65536 }, (_, i) => i);
    for (const [format, dtype] of [
      ['f16', 'F16'],
      ['bf16', 'BF16'],
    ] as const) {
      const packed = tf.tensor1d(packHalves(all), 'int32');
      const wide = widenHalf(packed, format);
      const got = (await wide.data()) as Float32Array;
      tf.dispose([packed, wide]);
      const want = widenBits(dtype, all);
      const wrong = [...want.keys()].filter((i) => !(Object.is(got[i], want[i]) || (Number.isNaN(got[i]) && Number.isNaN(want[i]))));
      expect(wrong.slice(0, 5).map((i) => `0x${i.toString(16)}: ${got[i]} not ${want[i]}`)).toEqual([]);
    }
    // Rows of a packed table (an embedding lookup) on the GPU: every pattern of the rows picked
    // exact (WebGPU's own gather would carry the packed pairs through f32 and round them).
    const table = tf.tensor2d(packHalves(all), [1024, 32], 'int32');
    const picked = tf.tensor1d([5, 1023, 0, 5], 'int32');
    const rows = widenHalfRows(table, picked, 'bf16');
    const got = (await rows.data()) as Float32Array;
    // A row id outside the table reads as zeros here (cpu and wasm throw).
    const outside = tf.tensor1d([-1, 1024], 'int32');
    const none = widenHalfRows(table, outside, 'bf16');
    expect(Array.from(await none.data()).every((v) => v === 0)).toBe(true);
    tf.dispose([table, picked, rows, outside, none]);
    const want = widenBits('BF16', all);
    const same = (a: number, b: number) => Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));
    [5, 1023, 0, 5].forEach((id, r) => {
      const bad = Array.from({ length: 64 }, (_, i) => i).filter((i) => !same(got[64 * r + i], want[64 * id + i]));
      expect(bad, `row ${id}`).toEqual([]);
    });
    const rng = new Rng(4);
    const ids = Array.from({ length: 2 }, () => Array.from({ length: 6 }, () => rng.int(0, HALF_TINY.vocabSize - 1)));
    const run = async (backend: Backend, storage: WeightStorage) => {
      await initBackend(backend);
      const params = decoderParams(HALF_TINY, randomHalfTensors(HALF_TINY, 'BF16', 6), storage);
      const lora = Lora.init(HALF_TINY, { r: 2, alpha: 4, targetModules: ['q_proj', 'up_proj'] }, 2);
      try {
        const values = await loraScores(params, HALF_TINY, lora, ids);
        return { ...values, held: decoderParamBytes(params) };
      } finally {
        lora.dispose();
        params.forEach((t) => t.dispose());
      }
    };
    const wasm = await run('wasm', 'float32');
    const gpu = await run('webgpu', 'half');
    expect(gpu.held.halfTensors).toBeGreaterThan(0);
    expect(gpu.held.bytes).toBeLessThan(wasm.held.bytes * 0.55);
    expect(maxAbs(wasm.logits)).toBeGreaterThan(0.5);
    expect(maxAbsDiff(gpu.logits, wasm.logits)).toBeLessThan(1e-4 * maxAbs(wasm.logits) + 1e-4);
    gpu.grads.forEach((g, i) => expect(maxAbsDiff(g, wasm.grads[i])).toBeLessThan(1e-4 * maxAbs(wasm.grads[i]) + 1e-5));
    expect(gpuErrors).toEqual([]);
  });
});
