/**
 * The workloads that `bench profile` and `bench scaling` time, built from the code the CLI
 * runs: a training step is `sftStep` (forward, backward, AdamW, as `bench sft`), a decode step
 * is one single-token `BatchedDecoder.feed` over rows with a prefilled cache (as `bench
 * decode`), a GRPO step is `grpoStep` (as `train`, rollouts in this thread or in a worker pool).
 * Random init and random tokens: the time of a step does not depend on what was learned, only
 * on its shapes (GRPO rollouts excepted: their lengths depend on the policy, so the scaling
 * bench prints the tokens per episode with the time).
 */
import { presetConfig, type ModelConfig, parameterCount } from '../src/core/model/config';
import { BatchedDecoder } from '../src/core/model/decode';
import type { GPTParams } from '../src/core/model/params';
import { Rng } from '../src/core/rng';
import type { AdamW } from '../src/core/optim/adamw';
import { type SftStepOutcome, sftStep } from '../src/core/sft/sft';
import type { TrainSequence } from '../src/core/parallel/sequences';
import { VOCAB_SIZE } from '../src/core/tokenizer/vocab';

/** A shape the benches run: the model presets and one larger one defined only here. */
export interface BenchPreset {
  name: string;
  config: ModelConfig;
  /** In words, for the printed header. */
  label: string;
}

/**
 * `medium` is not a model preset (src/core/model/config.ts has tiny and small): it is here to
 * see how the rates move when the matMuls grow (4x the width² of small, 1.5x the layers).
 */
const BENCH_ONLY: Record<string, ModelConfig> = {
  medium: { nLayer: 6, nEmbd: 256, nHead: 8, nPositions: 256, vocabSize: VOCAB_SIZE, layerNormEps: 1e-5 },
};

export function benchPreset(name: string): BenchPreset {
  const own = BENCH_ONLY[name];
  const config = own ? { ...own } : presetConfig(name);
  const shape = `${config.nLayer} layers, d ${config.nEmbd}, ${config.nHead} heads, ${(parameterCount(config) / 1e6).toFixed(2)}M parameters`;
  return { name, config, label: `${name}${own ? ' (bench-only shape)' : ''}: ${shape}` };
}

export const BENCH_PRESET_NAMES = ['tiny', 'small', ...Object.keys(BENCH_ONLY)];

/** Token ids past the protocol's specials, so random sequences look like text to the model. */
const FIRST_TEXT_TOKEN = 21;

export function randomTokens(rng: Rng, n: number, vocab: number): number[] {
  return Array.from({ length: n }, () => rng.int(FIRST_TEXT_TOKEN, vocab - 1));
}

/** `rows` sequences of `seq` inputs each (seq + 1 tokens), every target trained. */
export function trainingSequences(rows: number, seq: number, vocab: number, rng: Rng): TrainSequence[] {
  return Array.from({ length: rows }, () => ({ tokens: randomTokens(rng, seq + 1, vocab), weights: new Array<number>(seq).fill(1) }));
}

/**
 * One training step on rows × seq tokens: `sftStep` buckets them into micro-batches of at most
 * `microTokens` padded tokens (the warm start's setting by default), sums their gradients and
 * applies AdamW; it reads back the loss and the gradient norm, so the work is finished when it returns.
 */
export function trainStep(params: GPTParams, config: ModelConfig, opt: AdamW, seqs: readonly TrainSequence[], microTokens: number): Promise<SftStepOutcome> {
  // A small lr: the weights barely move, so no step is skipped as non-finite.
  return sftStep(params, config, opt, seqs, 1e-5, microTokens);
}

/** A decoder holding `rows` contexts of `context` tokens each, ready for single-token steps. */
export async function prefilledDecoder(
  params: GPTParams,
  config: ModelConfig,
  rows: number,
  context: number,
  rng: Rng,
): Promise<{ decoder: BatchedDecoder; slots: number[] }> {
  const decoder = new BatchedDecoder(params, config, { capacity: rows });
  const slots = Array.from({ length: rows }, () => decoder.open());
  await decoder.feed(
    slots,
    slots.map(() => randomTokens(rng, context, config.vocabSize)),
  );
  return { decoder, slots };
}

/** One decode step: a random next token for every row (sampling is not part of it). */
export function decodeStep(decoder: BatchedDecoder, slots: readonly number[], rng: Rng): Promise<Float32Array> {
  return decoder.feed(
    slots,
    slots.map(() => randomTokens(rng, 1, decoder.vocabSize)),
  );
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Milliseconds `f` takes, awaited. */
export async function timeMs(f: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await f();
  return performance.now() - t0;
}

/** Prints rows under a header, each column padded to its widest cell (first column left-aligned). */
export function printTable(header: readonly string[], rows: readonly (readonly string[])[], indent = '  '): void {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
  const line = (cells: readonly string[]) => indent + cells.map((x, c) => (c === 0 ? x.padEnd(widths[c]) : x.padStart(widths[c]))).join('  ');
  console.log(line(header));
  for (const r of rows) console.log(line(r));
}

/** A comma list of non-negative integers (`--seqs 32,64`), or a message naming the flag. */
export function intList(flag: string, text: string): number[] {
  const xs = text.split(',').map((s) => Number(s.trim()));
  if (xs.length === 0 || xs.some((x) => !Number.isInteger(x) || x < 0))
    throw new Error(`--${flag} must be a comma list of non-negative integers (got ${JSON.stringify(text)})`);
  return xs;
}
