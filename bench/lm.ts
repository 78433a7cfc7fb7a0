/**
 * A 135M-parameter Llama (SmolLM2-135M's shape: 30 layers, width 576, 9 heads over 3 key/value
 * heads, vocabulary 49,152, tied embeddings; random weights) on this project's decoder against
 * PyTorch on the CPU, same shape, in one run (`npm run bench -- lm [--backend …]`):
 *
 *   decode    cached greedy decoding, batch 1: NEW tokens after a PROMPT-token prefill (tokens/s);
 *             and ROWS continuations of the prompt decoded together (a GRPO group's first turns)
 *   train     a LoRA step (rank 8 on q/k/v/o; the base frozen): forward and backward of the mean
 *             next-token cross-entropy over 1 × TRAIN tokens (tokens/s)
 *   memory    peak bytes the backend held in each (tf.profile), and the process's peak resident set
 *   16-bit    the weights as bfloat16 held 16-bit: their bytes, and decoding with each matrix widened where read
 *
 * PyTorch (bench/lm_torch.py, in $SELFCEST_PYTHON or python3 with torch, transformers and peft)
 * runs the same work on one thread, then on every core; the ratios are printed against both.
 */
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { parseFlags } from '../src/cli/args';
import {
  DecoderCache,
  type DecoderParams,
  argmaxToken,
  decoderConfigFromHf,
  decoderForward,
  decoderParamBytes,
  decoderTensorSpecs,
} from '../src/core/model/decoder';
import { packedHalfTensor } from '../src/core/model/halfWeights';
import { Lora } from '../src/core/model/lora';
import { Rng } from '../src/core/rng';
import type { BackendName } from '../src/runtime/backend';
import { median } from './workloads';

/** SmolLM2-135M's config.json fields that set the computation. */
export const SMOLLM2_135M = {
  model_type: 'llama',
  vocab_size: 49152,
  hidden_size: 576,
  intermediate_size: 1536,
  num_hidden_layers: 30,
  num_attention_heads: 9,
  num_key_value_heads: 3,
  max_position_embeddings: 8192,
  rms_norm_eps: 1e-5,
  rope_theta: 100000,
  tie_word_embeddings: true,
  hidden_act: 'silu',
};

const FLAGS = {
  prompt: { type: 'int', default: 32, min: 1, max: 4096, help: 'prompt tokens before decoding' },
  new: { type: 'int', default: 16, min: 1, max: 4096, help: 'tokens decoded (timed)' },
  train: { type: 'int', default: 128, min: 2, max: 4096, help: 'tokens of the training sequence' },
  rank: { type: 'int', default: 8, min: 1, max: 256, help: 'LoRA rank' },
  rows: { type: 'int', default: 8, min: 2, max: 64, help: "rows of the batched decode (a GRPO group's first turns)" },
} as const;

const TORCH = fileURLToPath(new URL('./lm_torch.py', import.meta.url));

function torchRun(args: string[]): { decodeTokensPerSec: number; trainTokensPerSec: number; peakMB: number } | string {
  for (const python of [process.env.SELFCEST_PYTHON, 'python3'].filter((p): p is string => !!p)) {
    const r = spawnSync(python, [TORCH, ...args], { encoding: 'utf8', timeout: 3_600_000, maxBuffer: 1 << 24 });
    if (r.status === 0) return JSON.parse(r.stdout.trim().split('\n').at(-1) as string);
    if (python === 'python3') return `PyTorch side failed: ${(r.stderr || r.error?.message || '').trim().split('\n').at(-1)}`;
  }
  return 'no Python with torch, transformers and peft';
}

export async function runLmBench(args: string[], backend: BackendName): Promise<void> {
  const f = parseFlags(args, FLAGS);
  const config = decoderConfigFromHf(SMOLLM2_135M);
  const rng = new Rng(0);
  // Random weights at the scale of the model's init (normal, std 0.02; norms at 1).
  const params = new Map<string, tf.Tensor>();
  let count = 0;
  for (const { name, shape } of decoderTensorSpecs(config)) {
    params.set(name, name.endsWith('norm.weight') ? tf.ones(shape) : tf.randomNormal(shape, 0, 0.02, 'float32', rng.int(0, 1 << 30)));
    count += shape.reduce((a, b) => a * b, 1);
  }
  console.log(`llama ${(count / 1e6).toFixed(1)}M parameters (SmolLM2-135M's shape), random weights; ${backend}, ${cpus().length} cores`);
  const prompt = Array.from({ length: f.prompt }, () => rng.int(0, config.vocabSize - 1));

  // Decode: prefill, then NEW tokens one at a time (timed), best-of median over three runs after a warm-up.
  const decodeOnce = async (weights: DecoderParams = params) => {
    const cache = new DecoderCache(weights, config);
    const first = cache.feed([prompt]);
    first.dispose();
    const t0 = performance.now();
    await cache.greedy([prompt[prompt.length - 1]], f.new, new Set());
    const sec = (performance.now() - t0) / 1000;
    cache.dispose();
    return f.new / sec;
  };
  await decodeOnce();
  const decodeRates: number[] = [];
  let decodePeak = 0;
  for (let i = 0; i < 3; i++) {
    let rate = 0;
    const prof = await tf.profile(async () => {
      rate = await decodeOnce();
    });
    decodeRates.push(rate);
    decodePeak = Math.max(decodePeak, prof.peakBytes);
  }

  // The same weights as bfloat16 held 16-bit (halfWeights.ts): what they take, and decoding with each matrix widened where read.
  const half: DecoderParams = new Map();
  for (const [name, t] of params) {
    if (t.rank !== 2) half.set(name, t);
    else {
      const v = (await t.data()) as Float32Array;
      half.set(
        name,
        packedHalfTensor(
          Uint16Array.from(new Uint32Array(v.buffer, v.byteOffset, v.length), (w) => w >>> 16),
          t.shape,
          'bf16',
        ),
      );
    }
  }
  await decodeOnce(half);
  const halfRates: number[] = [];
  for (let i = 0; i < 3; i++) halfRates.push(await decodeOnce(half));
  const [fullBytes, halfBytes] = [decoderParamBytes(params).bytes, decoderParamBytes(half).bytes];
  half.forEach((t, name) => t !== params.get(name) && t.dispose());

  // A group's first turns: ROWS continuations of the prompt decoded together (the prompt read once).
  const groupOnce = async () => {
    const t0 = performance.now();
    const { rowCaches } = await new DecoderCache(params, config).generateRows(
      prompt,
      f.new,
      new Set(),
      Array.from({ length: f.rows }, () => argmaxToken),
    );
    const sec = (performance.now() - t0) / 1000;
    rowCaches.forEach((c) => c.dispose());
    return (f.rows * f.new) / sec;
  };
  await groupOnce();
  const groupRates: number[] = [];
  for (let i = 0; i < 3; i++) groupRates.push(await groupOnce());

  // Training: a LoRA step's forward and backward over 1 × TRAIN tokens.
  const lora = Lora.init(config, { r: f.rank, alpha: 2 * f.rank, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] }, 0);
  const tokens = Array.from({ length: f.train }, () => rng.int(0, config.vocabSize - 1));
  const vars = [...lora.params.values()];
  const stepOnce = () => {
    const t0 = performance.now();
    const { value, grads } = tf.variableGrads(() => {
      const logits = decoderForward(params, config, tf.tensor2d([tokens.slice(0, -1)], undefined, 'int32'), null, lora).logits;
      const logp = tf.logSoftmax(tf.reshape(logits, [f.train - 1, config.vocabSize]));
      return tf.neg(tf.mean(tf.sum(tf.mul(logp, tf.oneHot(tf.tensor1d(tokens.slice(1), 'int32'), config.vocabSize)), -1))) as tf.Scalar;
    }, vars);
    value.dataSync();
    Object.values(grads).forEach((g) => g.dataSync());
    value.dispose();
    Object.values(grads).forEach((g) => g.dispose());
    return (f.train - 1) / ((performance.now() - t0) / 1000);
  };
  stepOnce();
  const trainRates: number[] = [];
  let trainPeak = 0;
  for (let i = 0; i < 3; i++) {
    let rate = 0;
    const prof = await tf.profile(() => {
      rate = stepOnce();
    });
    trainRates.push(rate);
    trainPeak = Math.max(trainPeak, prof.peakBytes);
  }
  const ours = { decode: median(decodeRates), train: median(trainRates), rssMB: process.resourceUsage().maxRSS / 1024 };
  lora.dispose();
  params.forEach((t) => t.dispose());

  const torchArgs = (threads: number) => [JSON.stringify(SMOLLM2_135M), String(f.prompt), String(f.new), String(f.train), String(f.rank), String(threads)];
  const one = torchRun(torchArgs(1));
  const all = cpus().length > 1 ? torchRun(torchArgs(cpus().length)) : one;
  const row = (name: string, decode: number, train: number, mem: string) =>
    `  ${name.padEnd(26)} ${decode.toFixed(2).padStart(8)} ${train.toFixed(1).padStart(10)}   ${mem}`;
  console.log(`prompt ${f.prompt}, decode ${f.new} tokens; training sequence ${f.train} tokens, LoRA rank ${f.rank} on q/k/v/o`);
  console.log(`  ${''.padEnd(26)} ${'decode/s'.padStart(8)} ${'train tok/s'.padStart(10)}   peak memory`);
  console.log(
    row(
      `this project (${backend})`,
      ours.decode,
      ours.train,
      `backend ${(decodePeak / 1e6).toFixed(0)} MB decoding, ${(trainPeak / 1e6).toFixed(0)} MB training; process ${ours.rssMB.toFixed(0)} MB`,
    ),
  );
  console.log(
    `  batched: ${f.rows} rows decoded together (the prompt read once, prefill included) ${median(groupRates).toFixed(2)} tokens/s, ${(median(groupRates) / ours.decode).toFixed(2)}× one row's`,
  );
  console.log(
    `  16-bit held (bfloat16): weights ${(halfBytes / 1e6).toFixed(0)} MB against ${(fullBytes / 1e6).toFixed(0)} MB as float32; decode ${median(halfRates).toFixed(2)} tokens/s, ${(median(halfRates) / ours.decode).toFixed(2)}× float32's`,
  );
  for (const [label, t] of [
    ['PyTorch CPU, 1 thread', one],
    [`PyTorch CPU, ${cpus().length} threads`, all],
  ] as const) {
    if (typeof t === 'string') {
      console.log(`  ${label}: ${t}`);
      continue;
    }
    console.log(row(label, t.decodeTokensPerSec, t.trainTokensPerSec, `process ${t.peakMB.toFixed(0)} MB`));
    console.log(
      `    ratio (this project / ${label}): decode ${(ours.decode / t.decodeTokensPerSec).toFixed(3)}, train ${(ours.train / t.trainTokensPerSec).toFixed(3)}`,
    );
    if (cpus().length === 1) break;
  }
}
