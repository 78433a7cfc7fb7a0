/**
 * Worker entry for `bench cores`: on a message { kind, ms } it runs one kind of work for about
 * ms milliseconds and answers { kind, rate } (units of that work a second). Kinds:
 *   matmul-l2    the project's wasm matMul kernel, [256,128]·[128,256] (operands fit in L2)
 *   matmul-train the same kernel at a training step's shape, [2048,128]·[128,512]
 *   stream       a sum over 64 MB of floats (main-memory bandwidth)
 *   scalar       a dependent float loop on registers (one core's scalar pipeline, no memory)
 *   train-item   the gradients of one training micro-batch of `small` (16 rows × 64 tokens,
 *                `sftItem`, what a data-parallel step's threads compute), in tokens
 */
import * as tf from '@tensorflow/tfjs';
import { parentPort } from 'node:worker_threads';
import { presetConfig } from '../src/core/model/config';
import { initParams } from '../src/core/model/params';
import { Rng } from '../src/core/rng';
import { releaseGradItem } from '../src/core/parallel/grads';
import { padBatch } from '../src/core/parallel/sequences';
import { sftItem } from '../src/core/sft/sft';
import { initBackend } from '../src/runtime/backend';
import { trainingSequences } from './workloads';

type Kind = 'matmul-l2' | 'matmul-train' | 'stream' | 'scalar' | 'train-item';

const port = parentPort;
if (port === null) throw new Error('bench/coresProbe.ts runs as a worker thread');

let ready: Promise<unknown> | null = null;
const big = new Float32Array(16 * 1024 * 1024).fill(1);

function matmulRate(m: number, k: number, n: number, ms: number): number {
  const a = tf.randomNormal([m, k]);
  const b = tf.randomNormal([k, n]);
  let count = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    // wasm runs a kernel synchronously: no readback needed (nor wanted: it would copy C out).
    tf.matMul(a, b).dispose();
    count++;
  }
  const s = (performance.now() - t0) / 1000;
  tf.dispose([a, b]);
  return (count * 2 * m * k * n) / s / 1e9; // GFLOP/s
}

function streamRate(ms: number): number {
  let bytes = 0;
  let sink = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    let s = 0;
    for (let i = 0; i < big.length; i++) s += big[i];
    sink += s;
    bytes += big.length * 4;
  }
  if (sink < 0) console.log(sink);
  return bytes / ((performance.now() - t0) / 1000) / 1e9; // GB/s
}

function scalarRate(ms: number): number {
  let x = 1.0001;
  let ops = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    for (let i = 0; i < 1_000_000; i++) x = x * 1.0000001 + 1e-9;
    ops += 1_000_000;
  }
  if (x < 0) console.log(x);
  return ops / ((performance.now() - t0) / 1000) / 1e9; // G iterations/s
}

/** Training micro-batches of `small` a second, as tokens: forward and backward, no optimizer. */
function trainItemRate(ms: number): number {
  const config = presetConfig('small');
  const params = initParams(config, 0);
  const seqs = trainingSequences(16, 64, config.vocabSize, new Rng(7));
  const batch = padBatch(
    seqs,
    seqs.map((_, i) => i),
  );
  let tokens = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    releaseGradItem(sftItem(params, config, batch, 16 * 64));
    tokens += batch.rows * batch.length;
  }
  const s = (performance.now() - t0) / 1000;
  params.forEach((p) => p.dispose());
  return tokens / s / 1000; // thousand tokens/s
}

port.on('message', async (msg: { kind: Kind; ms: number }) => {
  ready ??= initBackend('wasm');
  await ready;
  const { kind, ms } = msg;
  const rates: Record<Kind, () => number> = {
    'matmul-l2': () => matmulRate(256, 128, 256, ms),
    'matmul-train': () => matmulRate(2048, 128, 512, ms),
    stream: () => streamRate(ms),
    scalar: () => scalarRate(ms),
    'train-item': () => trainItemRate(ms),
  };
  const rate = rates[kind]();
  port.postMessage({ kind, rate });
});
