/**
 * Training sequences: a context's tokens with a per-token weight on the model's own
 * actions. Prompts and runtime-injected clone answers get weight 0 — the model did not
 * choose them, so they must not be learned as its behaviour.
 */
import type { ContextTrace } from '../rollout/trace';
import type { DemoContext } from '../tasks/types';

export interface TrainSequence {
  /** Whole context, prompt included. */
  tokens: number[];
  /** weights[i] applies to predicting tokens[i + 1] from tokens[0..i]; length tokens.length − 1. */
  weights: number[];
}

/** A teacher demonstration context → a training sequence (loss on 'generated' segments only). */
export function demoSequence(ctx: DemoContext, encode: (text: string) => number[]): TrainSequence {
  const tokens: number[] = [];
  const trained: boolean[] = [];
  for (const seg of ctx.segments) {
    const ids = encode(seg.text);
    tokens.push(...ids);
    for (let i = 0; i < ids.length; i++) trained.push(seg.kind === 'generated');
  }
  return { tokens, weights: trained.slice(1).map((t) => (t ? 1 : 0)) };
}

/** A rollout context → a training sequence with weight 1 on generated tokens. */
export function traceSequence(ctx: ContextTrace, weight = 1): TrainSequence {
  const weights: number[] = [];
  for (let i = 1; i < ctx.tokens.length; i++) weights.push(ctx.writers[i] === 'g' ? weight : 0);
  return { tokens: ctx.tokens, weights };
}

export interface PaddedBatch {
  /** [rows × length] inputs, right-padded with 0. */
  inputs: Int32Array;
  targets: Int32Array;
  weights: Float32Array;
  rows: number;
  length: number;
  /** Which input sequences the rows are, in order. */
  members: number[];
}

/**
 * Group sequences of similar length into batches of at most `maxTokens` padded tokens
 * (rows × longest), so short clone contexts are not padded to the longest root.
 */
export function bucketByLength(seqs: readonly TrainSequence[], maxTokens: number, maxRows = 512): PaddedBatch[] {
  const order = seqs.map((_, i) => i).sort((a, b) => seqs[a].tokens.length - seqs[b].tokens.length);
  const batches: PaddedBatch[] = [];
  let group: number[] = [];
  const flush = () => {
    if (group.length > 0) batches.push(padBatch(seqs, group));
    group = [];
  };
  for (const i of order) {
    const len = seqs[i].tokens.length - 1;
    if (len < 1) continue;
    if (group.length > 0 && ((group.length + 1) * len > maxTokens || group.length >= maxRows)) flush();
    group.push(i);
  }
  flush();
  return batches;
}

export function padBatch(seqs: readonly TrainSequence[], members: number[]): PaddedBatch {
  const length = Math.max(...members.map((i) => seqs[i].tokens.length - 1));
  const rows = members.length;
  const inputs = new Int32Array(rows * length);
  const targets = new Int32Array(rows * length);
  const weights = new Float32Array(rows * length);
  members.forEach((m, r) => {
    const { tokens, weights: w } = seqs[m];
    for (let t = 0; t + 1 < tokens.length; t++) {
      inputs[r * length + t] = tokens[t];
      targets[r * length + t] = tokens[t + 1];
      weights[r * length + t] = w[t];
    }
  });
  return { inputs, targets, weights, rows, length, members };
}

/**
 * Indices 0…n−1 of items of the given lengths in `parts` shares of about equal total length:
 * longest first onto the lightest share (ties by index); each share in increasing index order.
 */
export function shareByLength(lengths: readonly number[], parts: number): number[][] {
  if (!(Number.isInteger(parts) && parts >= 1)) throw new Error(`shareByLength: parts must be a positive integer (got ${parts})`);
  const shares: number[][] = Array.from({ length: parts }, () => []);
  const load = new Array<number>(parts).fill(0);
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[b] - lengths[a] || a - b);
  for (const i of order) {
    const k = load.indexOf(Math.min(...load));
    shares[k].push(i);
    load[k] += lengths[i];
  }
  return shares.map((sh) => sh.sort((a, b) => a - b));
}
