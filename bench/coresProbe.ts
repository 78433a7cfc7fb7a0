/**
 * Worker entry for `bench cores`: on a message { kind, ms } it runs one kind of work for about
 * ms milliseconds and answers { kind, rate } (units of that work a second). Kinds:
 *   matmul-l2    the project's wasm matMul kernel, [256,128]·[128,256] (operands fit in L2)
 *   matmul-train the same kernel at a training step's shape, [2048,128]·[128,512]
 *   stream       a sum over 64 MB of floats (main-memory bandwidth)
 *   scalar       a dependent float loop on registers (one core's scalar pipeline, no memory)
 */
import * as tf from '@tensorflow/tfjs';
import { parentPort } from 'node:worker_threads';
import { initBackend } from '../src/runtime/backend';

type Kind = 'matmul-l2' | 'matmul-train' | 'stream' | 'scalar';

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

port.on('message', async (msg: { kind: Kind; ms: number }) => {
  ready ??= initBackend('wasm');
  await ready;
  const { kind, ms } = msg;
  const rate = kind === 'matmul-l2' ? matmulRate(256, 128, 256, ms) : kind === 'matmul-train' ? matmulRate(2048, 128, 512, ms) : kind === 'stream' ? streamRate(ms) : scalarRate(ms);
  port.postMessage({ kind, rate });
});
