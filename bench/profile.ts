/**
 * Where a step's time goes (`npm run bench -- profile [--backend wasm|webgpu] [--preset small]
 * [--rows 64 --seq 64] [--decode-rows 32 --decode-context 64]`): tf.profile around one training
 * step (sftStep on rows × seq tokens: forward, backward, AdamW) and one KV-cached decode step
 * (decode-rows contexts of decode-context tokens, one new token each), each after warm-up steps.
 * Per phase: each kernel's calls, total kernel time and share of the profiled wall time, and the
 * sum of kernel time against the wall (the rest is JS, tfjs bookkeeping, uploads and readbacks).
 *
 * What tfjs measures: on wasm and cpu a kernel runs synchronously and its time is the host time
 * of the call. On webgpu the time comes from GPU timestamp queries, and is reported as 0 when the
 * adapter lacks `timestamp-query` (SwiftShader, for one); the GPU programs of each kernel (the
 * dispatches) are counted either way. Profiling on webgpu submits every program on its own, so
 * its profiled wall is longer than the plain one printed next to it.
 * Kernels run inside a customGrad op (tf.fused.matMul, gpt.ts's linear and LayerNorm) are listed once each;
 * the op's wrapper entry, which would count them twice, is left out of the sums and counted apart.
 */
import * as tf from '@tensorflow/tfjs';
import { parseFlags } from '../src/cli/args';
import { disposeParams, initParams } from '../src/core/model/params';
import { Rng } from '../src/core/rng';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import { defaultSftConfig } from '../src/core/runConfigTargets';
import { bucketByLength } from '../src/core/parallel/sequences';
import type { ModelConfig } from '../src/core/model/config';
import type { BackendName } from '../src/runtime/backend';
import { fastBatchMatMulActive, setFastBatchMatMul } from '../src/runtime/wasmKernels/batchMatMul';
import { BENCH_PRESET_NAMES, benchPreset, decodeStep, median, prefilledDecoder, printTable, timeMs, trainStep, trainingSequences } from './workloads';

const FLAGS = {
  preset: { type: 'string', default: 'small', choices: BENCH_PRESET_NAMES, help: 'model shape' },
  rows: { type: 'int', default: 64, min: 1, max: 4096, help: 'training rows' },
  seq: { type: 'int', default: 64, min: 1, max: 8192, help: 'training tokens per row' },
  'micro-tokens': { type: 'int', default: defaultSftConfig().microTokens, min: 1, max: 1 << 20, help: 'largest padded micro-batch (as sft)' },
  'decode-rows': { type: 'int', default: 32, min: 1, max: 4096, help: 'contexts stepping together' },
  'decode-context': { type: 'int', default: 64, min: 1, max: 8192, help: 'tokens already in each context' },
  repeats: { type: 'int', default: 3, min: 1, max: 100, help: 'unprofiled steps timed for the plain wall time (median)' },
} as const;

interface KernelTotal {
  calls: number;
  /** GPU programs run (webgpu only). */
  dispatches: number;
  ms: number;
}

interface PhaseProfile {
  kernels: Map<string, KernelTotal>;
  /** customGrad wrapper entries (not kernels; their kernels are in `kernels`). */
  scopes: number;
  wallMs: number;
  /** Entries whose time tfjs could not give. */
  untimed: number;
}

/** Programs named in a webgpu kernel's extraInfo ("Program: ms, Program: ms"); 0 elsewhere. */
function dispatchesOf(extraInfo: unknown): number {
  // tf.profile has awaited it by now, though its type still says it may be a promise.
  return typeof extraInfo === 'string' ? extraInfo.split(', ').filter((s) => s.includes(':')).length : 0;
}

/** tf.profile returns the engine's one profile object, overwritten by the next call: read it at once. */
async function profilePhase(step: () => Promise<unknown>): Promise<PhaseProfile> {
  let wallMs = 0;
  const info = await tf.profile(async () => {
    wallMs = await timeMs(step);
  });
  const backend = tf.getBackend();
  const kernels = new Map<string, KernelTotal>();
  let scopes = 0;
  let untimed = 0;
  for (const k of info.kernels) {
    if (tf.getKernel(k.name, backend) === undefined) {
      scopes++;
      continue;
    }
    const ms = typeof k.kernelTimeMs === 'number' ? k.kernelTimeMs : NaN;
    if (!Number.isFinite(ms)) untimed++;
    const e = kernels.get(k.name) ?? { calls: 0, dispatches: 0, ms: 0 };
    kernels.set(k.name, { calls: e.calls + 1, dispatches: e.dispatches + dispatchesOf(k.extraInfo), ms: e.ms + (Number.isFinite(ms) ? ms : 0) });
  }
  return { kernels, scopes, wallMs, untimed };
}

function printPhase(title: string, p: PhaseProfile, plainMs: number, gpu: boolean): void {
  const pct = (ms: number) => `${((100 * ms) / p.wallMs).toFixed(1)}%`;
  const sorted = [...p.kernels.entries()].sort((a, b) => b[1].ms - a[1].ms || b[1].calls - a[1].calls);
  const total = sorted.reduce((n, [, k]) => n + k.ms, 0);
  const calls = sorted.reduce((n, [, k]) => n + k.calls, 0);
  const dispatches = sorted.reduce((n, [, k]) => n + k.dispatches, 0);
  console.log(`\n${title}`);
  console.log(`  wall: ${plainMs.toFixed(1)} ms plain (median), ${p.wallMs.toFixed(1)} ms profiled`);
  const header = gpu ? ['kernel', 'calls', 'dispatches', 'ms', 'share of wall'] : ['kernel', 'calls', 'ms', 'share of wall'];
  printTable(
    header,
    sorted.map(([name, k]) => [name, String(k.calls), ...(gpu ? [String(k.dispatches)] : []), k.ms.toFixed(2), pct(k.ms)]),
  );
  console.log(
    `  ${calls} kernel calls${gpu ? `, ${dispatches} GPU dispatches` : ''}; ${p.scopes} customGrad wrapper entries (fused matMul, linear, LayerNorm) left out, their kernels are listed`,
  );
  console.log(
    `  kernel time ${total.toFixed(1)} ms = ${pct(total)} of the profiled wall; the rest, ${(p.wallMs - total).toFixed(1)} ms: JS, tfjs bookkeeping, uploads, readbacks${gpu ? ', GPU waits' : ''}`,
  );
  if (p.untimed > 0) console.log(`  ${p.untimed} kernel calls came without a time (counted as 0 ms)`);
}

/** Rough model FLOPs of a training step: 3× the forward's matMuls (projections, MLP, one-hot embedding, LM head, attention). */
function trainingFlops(c: ModelConfig, rows: number, seq: number): number {
  const d = c.nEmbd;
  const perToken = 2 * (12 * c.nLayer * d * d + 2 * c.vocabSize * d) + 4 * c.nLayer * seq * d;
  return 3 * rows * seq * perToken;
}

/** GFLOP/s of one plain [n, k]·[k, m] matMul (the MLP's shape), the rate a step could reach. */
async function matMulRate(n: number, k: number, m: number): Promise<number> {
  const a = tf.randomNormal([n, k]) as tf.Tensor2D;
  const b = tf.randomNormal([k, m]) as tf.Tensor2D;
  const once = async () => {
    const c = tf.matMul(a, b);
    await c.data();
    c.dispose();
  };
  await once();
  const reps = 5;
  const ms = await timeMs(async () => {
    for (let i = 0; i < reps; i++) await once();
  });
  tf.dispose([a, b]);
  return (2 * n * k * m * reps) / (ms / 1000) / 1e9;
}

export async function runProfileBench(args: string[], backend: BackendName): Promise<void> {
  const f = parseFlags(args, FLAGS);
  const preset = benchPreset(f.preset);
  const config = preset.config;
  if (f.seq > config.nPositions) throw new Error(`--seq must be at most the preset's context, ${config.nPositions} (got ${f.seq})`);
  if (f['decode-context'] >= config.nPositions)
    throw new Error(`--decode-context must be below the preset's context, ${config.nPositions} (got ${f['decode-context']})`);
  const gpu = backend === 'webgpu';
  console.log(`profile bench: ${preset.label}; backend ${backend}; random init`);
  if (gpu) {
    const timestamps = (tf.backend() as unknown as { supportTimestampQuery?: boolean }).supportTimestampQuery === true;
    console.log(
      timestamps
        ? 'webgpu: timestamp-query available, kernel times are GPU times'
        : 'webgpu: no timestamp-query on this adapter: tfjs reports 0 ms per kernel; calls and dispatches are right, the wall time is the measure',
    );
  }

  const params = initParams(config, 0);
  const opt = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
  const rng = new Rng(1);

  // Training: same shapes every step, so one warm-up step compiles every kernel.
  const seqs = trainingSequences(f.rows, f.seq, config.vocabSize, rng);
  const micro = bucketByLength(seqs, f['micro-tokens']);
  const train = () => trainStep(params, config, opt, seqs, f['micro-tokens']);
  await train();
  const plainTrain = [];
  for (let i = 0; i < f.repeats; i++) plainTrain.push(await timeMs(train));
  const trainProfile = await profilePhase(train);
  const tokens = f.rows * f.seq;
  const trainMs = median(plainTrain);
  printPhase(
    `training step: ${f.rows} rows × ${f.seq} tokens = ${tokens} tokens in ${micro.length} micro-batch(es) of ≤ ${f['micro-tokens']}, AdamW; ${((tokens / trainMs) * 1000).toFixed(0)} tokens/s plain`,
    trainProfile,
    trainMs,
    gpu,
  );
  const gflops = trainingFlops(config, f.rows, f.seq) / (trainMs / 1000) / 1e9;
  const microBatchTokens = micro[0].rows * micro[0].length;
  // The best plain matMul here: the project's kernel or tfjs's own (XNNPACK, its packed
  // weights cached between the calls), whichever is faster in this run.
  const rates = [await matMulRate(microBatchTokens, config.nEmbd, 4 * config.nEmbd)];
  if (fastBatchMatMulActive()) {
    setFastBatchMatMul(false);
    try {
      rates.push(await matMulRate(microBatchTokens, config.nEmbd, 4 * config.nEmbd));
    } finally {
      setFastBatchMatMul(true);
    }
  }
  const peak = Math.max(...rates);
  const g = (x: number) => x.toPrecision(3);
  const which = rates.length === 2 ? ` (project's kernel ${g(rates[0])}, tfjs's XNNPACK ${g(rates[1])})` : '';
  console.log(
    `  ≈ ${g(gflops)} GFLOP/s of model FLOPs; one plain [${microBatchTokens}, ${config.nEmbd}]·[${config.nEmbd}, ${4 * config.nEmbd}] matMul here: ${g(peak)} GFLOP/s${which}; ratio ${(gflops / peak).toFixed(2)}`,
  );
  if (fastBatchMatMulActive()) {
    // The same step with tfjs's own kernels for every product, interleaved with the project's
    // kernel so that both see the same load. (The model's backward uses transposed products,
    // which only the project's kernel makes fast: this is what the kernel is worth to it.)
    const ours: number[] = [];
    const theirs: number[] = [];
    try {
      setFastBatchMatMul(false);
      await train(); // tfjs's own kernels warm up (XNNPACK's operators) untimed
      for (let i = 0; i < f.repeats; i++) {
        setFastBatchMatMul(false);
        theirs.push(await timeMs(train));
        setFastBatchMatMul(true);
        ours.push(await timeMs(train));
      }
    } finally {
      setFastBatchMatMul(true);
    }
    const [a, b] = [median(ours), median(theirs)];
    console.log(
      `  project's matMul kernel: ${a.toFixed(0)} ms a step against ${b.toFixed(0)} ms with tfjs's own kernels for the same graph (interleaved, median of ${f.repeats}): ${(b / a).toFixed(2)}× faster`,
    );
  }
  opt.dispose();

  // Decode: warm-up and timed steps run at about the context that is profiled (the cache
  // width grows in chunks of 32, and each width has its own kernels).
  const warmups = 2;
  const prefill = Math.max(1, f['decode-context'] - warmups - f.repeats);
  const { decoder, slots } = await prefilledDecoder(params, config, f['decode-rows'], prefill, rng);
  for (let i = 0; i < warmups; i++) await decodeStep(decoder, slots, rng);
  const plainDecode = [];
  for (let i = 0; i < f.repeats; i++) plainDecode.push(await timeMs(() => decodeStep(decoder, slots, rng)));
  const context = decoder.length(slots[0]);
  const decodeProfile = await profilePhase(() => decodeStep(decoder, slots, rng));
  const decodeMs = median(plainDecode);
  printPhase(
    `decode step: ${f['decode-rows']} rows holding ${context} tokens each, one new token each; ${((f['decode-rows'] / decodeMs) * 1000).toFixed(0)} tokens/s plain`,
    decodeProfile,
    decodeMs,
    gpu,
  );
  decoder.dispose();
  disposeParams(params);
}
