/**
 * Training sequences: a context's tokens with a per-token weight on the model's own
 * actions. Prompts and runtime-injected clone answers get weight 0 — the model did not
 * choose them, so they must not be learned as its behaviour.
 */
import * as tf from '@tensorflow/tfjs';
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
 * Fixed cost of one micro-batch in padded cells (a row's token position), by backend: on cpu
 * and wasm its per-call work (the gradient tensors, the tape, the calls themselves) measured at
 * about 8 ms for `small` against 0.23–0.29 ms a cell (docs/BENCHMARKS.md, "Micro-batches cut
 * by length"); on WebGPU a micro-batch is a few hundred dispatches while cells are nearly free,
 * so there few, larger groups win.
 */
export const GROUP_OVERHEAD_CELLS = { cpu: 32, wasm: 32, webgpu: 1024 } as const;

/** The overhead for the active backend (that of cpu for any other). */
export function groupOverheadCells(): number {
  const name = tf.getBackend();
  return name === 'webgpu' || name === 'wasm' ? GROUP_OVERHEAD_CELLS[name] : GROUP_OVERHEAD_CELLS.cpu;
}

/**
 * Indices of items with the given lengths (cells a row needs; items under 1 are left out)
 * grouped into micro-batches: in increasing length (ties by index), cut where the padded cells
 * (rows × the group's longest) plus `overhead` a group are fewest, by dynamic
 * programming over the sorted order. A group holds at most maxRows items and maxCells cells (an
 * item longer than maxCells goes alone).
 */
export function lengthGroups(lengths: readonly number[], maxCells: number, maxRows = 512, overhead = groupOverheadCells()): number[][] {
  const order = lengths
    .map((_, i) => i)
    .filter((i) => lengths[i] >= 1)
    .sort((a, b) => lengths[a] - lengths[b] || a - b);
  const n = order.length;
  const best = new Array<number>(n + 1).fill(Infinity);
  const cut = new Array<number>(n + 1).fill(0);
  best[0] = 0;
  for (let i = 1; i <= n; i++) {
    const longest = lengths[order[i - 1]];
    // Group order[j..i-1]: larger groups first, so that ties keep the fewer calls.
    for (let j = Math.max(0, i - maxRows); j < i; j++) {
      const rows = i - j;
      if (rows > 1 && rows * longest > maxCells) continue;
      const cost = best[j] + rows * longest + overhead;
      if (cost < best[i]) {
        best[i] = cost;
        cut[i] = j;
      }
    }
  }
  const groups: number[][] = [];
  for (let i = n; i > 0; i = cut[i]) groups.push(order.slice(cut[i], i));
  return groups.reverse();
}

/** What a group costs in cells: its padded cells plus the fixed cost of a micro-batch. */
function groupCost(lengths: readonly number[], group: readonly number[], overhead: number): number {
  return group.length * Math.max(...group.map((i) => lengths[i])) + overhead;
}

/** How the micro-batches of one step are cut and handed to the threads (`groupPlan`). */
export interface GroupPlan {
  /** The micro-batches, as item indices, in length order. */
  groups: number[][];
  /** Group indices, costliest first: the order in which threads claim them from a shared queue. */
  order: number[];
  /** A fixed deal of group indices, one share a thread, for where threads cannot share a queue. */
  shares: number[][];
}

/**
 * The micro-batches of one step for `parts` threads (this one and the gradient workers): cut by
 * `lengthGroups`, with more than one part capped at a third of a part's cells so that every
 * thread gets several and the loads can even out; the fixed deal puts each group, in `order`,
 * onto the share with the least cost so far (ties the lowest), each share in group order.
 * Shares may be empty.
 */
export function groupPlan(lengths: readonly number[], parts: number, maxCells: number, maxRows = 512): GroupPlan {
  if (!(Number.isInteger(parts) && parts >= 1)) throw new Error(`groupPlan: parts must be a positive integer (got ${parts})`);
  const total = lengths.reduce((n, l) => n + Math.max(0, l), 0);
  const cap = parts === 1 ? maxCells : Math.min(maxCells, Math.max(1, Math.ceil(total / (3 * parts))));
  const overhead = groupOverheadCells();
  const groups = lengthGroups(lengths, cap, maxRows, overhead);
  const cost = groups.map((g) => groupCost(lengths, g, overhead));
  const order = groups.map((_, i) => i).sort((a, b) => cost[b] - cost[a] || a - b);
  const shares: number[][] = Array.from({ length: parts }, () => []);
  const load = new Array<number>(parts).fill(0);
  for (const g of order) {
    const k = load.indexOf(Math.min(...load));
    shares[k].push(g);
    load[k] += cost[g];
  }
  return { groups, order, shares: shares.map((sh) => sh.sort((a, b) => a - b)) };
}

/** `groupPlan`'s fixed deal as the groups themselves: share k's micro-batches, in length order. */
export function shareGroups(lengths: readonly number[], parts: number, maxCells: number, maxRows = 512): number[][][] {
  const plan = groupPlan(lengths, parts, maxCells, maxRows);
  return plan.shares.map((sh) => sh.map((g) => plan.groups[g]));
}

/** Sequences in padded micro-batches of at most `maxTokens` cells, cut by `lengthGroups`. */
export function bucketByLength(seqs: readonly TrainSequence[], maxTokens: number, maxRows = 512): PaddedBatch[] {
  return lengthGroups(
    seqs.map((q) => q.tokens.length - 1),
    maxTokens,
    maxRows,
  ).map((g) => padBatch(seqs, g));
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
