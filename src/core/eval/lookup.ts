/**
 * The clone's half of the multi-hop task on its own: given a chunk of assignments and a
 * variable, answer its right-hand side or `none`. Delegation on multihop can only work once
 * clones do this, so the probe shows where a warm start stands before any episode succeeds.
 *
 * One teacher-forced forward pass per lookup: a lookup counts as solved when the greedy token
 * at every position of what the clone writes (`<ans>…<eos>`, or `written`) is the right one, which is exactly when greedy decoding
 * of the clone would write that answer.
 */
import * as tf from '@tensorflow/tfjs';
import type { ModelConfig } from '../model/config';
import { forwardLogits } from '../model/gpt';
import type { GPTParams } from '../model/params';
import { Rng } from '../rng';
import { MULTIHOP_DEFAULTS, assignmentsOf, fillerWords, multihop, notationOf } from '../tasks/multihop';
import { T } from '../tokenizer/vocab';

export interface LookupResult {
  /** Assignments in the clone's chunk. */
  size: number;
  /** Lookups of a variable the chunk assigns, and the share answered exactly. */
  foundN: number;
  foundAccuracy: number;
  /** Lookups of a variable assigned elsewhere, and the share answered `none`. */
  missingN: number;
  missingAccuracy: number;
}

export interface LookupCase {
  prompt: string;
  answer: string;
  /** What the clone writes, when it is more than `<ans>answer<eos>` (a restated lookup first). */
  written?: string;
}

function checkSize(size: number): void {
  if (!Number.isInteger(size) || size < 1 || size > 6) throw new Error(`lookup: chunk size must be an integer in [1, 6] (got ${size})`);
}

/**
 * `n` lookups that find and `n` that do not, over chunks of `size` assignments (seeded), in the
 * notation of `names` (the task's option: what the clone is asked and writes differs), among
 * `filler` filler characters (the task's option of that name; the long context has 24 for 4).
 */
export function lookupCases(
  size: number,
  n: number,
  seed: number,
  names: number = MULTIHOP_DEFAULTS.names,
  filler = 0,
): { found: LookupCase[]; missing: LookupCase[] } {
  checkSize(size);
  if (!Number.isInteger(filler) || filler < 0 || filler > 96) throw new Error(`lookup: filler must be an integer in [0, 96] (got ${filler})`);
  if (!Number.isInteger(n) || n < 1) throw new Error(`lookup: n must be a positive integer (got ${n})`);
  const note = notationOf(names);
  const options = { ...MULTIHOP_DEFAULTS, names };
  const rng = Rng.stream(seed, 'lookup-cases', size);
  // Filler from its own stream: the same lookups with and without it, for a paired reading.
  const fillerRng = Rng.stream(seed, 'lookup-filler', size);
  const found: LookupCase[] = [];
  const missing: LookupCase[] = [];
  for (let i = 0; i < n; i++) {
    // The assignments of a default problem: chain links and distractors, as clones meet them.
    const all = rng.shuffle(assignmentsOf(multihop.generate(rng, options, `lookup-${i}`)));
    const picked = all.slice(0, size);
    for (const word of fillerWords(fillerRng, filler)) picked.splice(fillerRng.int(0, picked.length), 0, word);
    const chunk = picked.join(' ');
    const inside = note.parse(chunk);
    const outside = [...note.parse(all.join(' ')).keys()].filter((v) => !inside.has(v));
    const v = rng.pick([...inside.keys()]);
    const w = rng.pick(outside);
    found.push({ prompt: `<clone>${chunk} ${v}?<sep>`, answer: inside.get(v)!, written: note.cloneAnswer(v, inside.get(v)) });
    missing.push({ prompt: `<clone>${chunk} ${w}?<sep>`, answer: 'none', written: note.cloneAnswer(w, undefined) });
  }
  return { found, missing };
}

/** Cases run through the model at once (rows of one padded forward pass). */
const BATCH = 128;

/**
 * Share of cases whose greedy clone answer is exactly the case's answer. Cases go through the
 * model in right-padded batches: with causal attention the padding after a case cannot change
 * its logits.
 */
export function lookupAccuracy(params: GPTParams, config: ModelConfig, cases: readonly LookupCase[], encode: (t: string) => number[]): number {
  let solved = 0;
  for (let start = 0; start < cases.length; start += BATCH) {
    const rows = cases.slice(start, start + BATCH).map((c) => ({ prompt: encode(c.prompt), target: encode(c.written ?? `<ans>${c.answer}<eos>`) }));
    const width = Math.max(...rows.map((r) => r.prompt.length + r.target.length));
    const ids = rows.flatMap((r) => [...r.prompt, ...r.target, ...new Array<number>(width - r.prompt.length - r.target.length).fill(T.pad)]);
    const greedy = tf.tidy(
      () =>
        forwardLogits(params, config, tf.tensor2d(ids, [rows.length, width], 'int32'))
          .argMax(-1)
          .arraySync() as number[][],
    );
    rows.forEach((r, i) => {
      if (r.target.every((t, j) => greedy[i][r.prompt.length - 1 + j] === t)) solved++;
    });
  }
  return cases.length === 0 ? 0 : solved / cases.length;
}

/** Lookup accuracy by chunk size. */
export function lookupProbe(
  params: GPTParams,
  config: ModelConfig,
  encode: (t: string) => number[],
  sizes: readonly number[],
  n: number,
  seed: number,
  names: number = MULTIHOP_DEFAULTS.names,
  filler = 0,
): LookupResult[] {
  sizes.forEach(checkSize);
  return sizes.map((size) => {
    const { found, missing } = lookupCases(size, n, seed, names, filler);
    return {
      size,
      foundN: found.length,
      foundAccuracy: lookupAccuracy(params, config, found, encode),
      missingN: missing.length,
      missingAccuracy: lookupAccuracy(params, config, missing, encode),
    };
  });
}
