/**
 * Choosing the next token from a row of logits, on the CPU (the decoder already read them back).
 *
 * The returned logprob is log softmax(logits / temperature) at the chosen id over all tokens
 * that are not banned. Top-k only narrows what may be *drawn*; it does not renormalise the
 * logprob, so the RL ratio π/π_old is computed against the same untruncated distribution that
 * the training forward (targetLogProbs with the same temperature) evaluates. Banned tokens are
 * removed from that distribution (they are the protocol's hard constraints, e.g. <pad>).
 */
import type { Rng } from '../rng';

export interface SampleOptions {
  /** > 0; divides the logits. Ignored for choosing under greedy (its logprob then uses 1 when ≤ 0). */
  temperature: number;
  /** Draw only among the k most likely tokens; 0 turns the limit off. */
  topK: number;
  /** Take the most likely allowed token (lowest id on ties); no randomness is drawn. */
  greedy?: boolean;
}

export interface Sampled {
  id: number;
  logprob: number;
}

function checkRow(logits: Float32Array, offset: number, vocab: number): void {
  if (!Number.isInteger(vocab) || vocab < 1) throw new Error(`sample: vocab must be an integer ≥ 1 (got ${vocab})`);
  if (!Number.isInteger(offset) || offset < 0 || offset + vocab > logits.length) {
    throw new Error(`sample: offset ${offset} + vocab ${vocab} is outside the logits (length ${logits.length})`);
  }
}

export function validateSampleOptions(opts: SampleOptions): void {
  const greedy = opts.greedy ?? false;
  if (!greedy && !(Number.isFinite(opts.temperature) && opts.temperature > 0)) {
    throw new Error(`sample: temperature must be a finite number > 0 unless greedy (got ${opts.temperature})`);
  }
  if (!Number.isInteger(opts.topK) || opts.topK < 0) {
    throw new Error(`sample: topK must be an integer ≥ 0, 0 meaning no limit (got ${opts.topK})`);
  }
}

/** Scaled logits of the allowed ids and their log-sum-exp. */
function tempered(
  logits: Float32Array,
  offset: number,
  vocab: number,
  temperature: number,
  banned: ReadonlySet<number> | undefined,
): { ids: number[]; scaled: number[]; logZ: number } {
  const ids: number[] = [];
  const scaled: number[] = [];
  let max = -Infinity;
  for (let i = 0; i < vocab; i++) {
    if (banned?.has(i)) continue;
    const s = logits[offset + i] / temperature;
    ids.push(i);
    scaled.push(s);
    if (s > max) max = s;
  }
  if (ids.length === 0) throw new Error('sample: every token is banned');
  if (!Number.isFinite(max)) throw new Error(`sample: logits are not finite (max ${max})`);
  let sum = 0;
  for (const s of scaled) sum += Math.exp(s - max);
  return { ids, scaled, logZ: max + Math.log(sum) };
}

export function sampleFromLogits(logits: Float32Array, offset: number, vocab: number, opts: SampleOptions, rng: Rng, banned?: ReadonlySet<number>): Sampled {
  checkRow(logits, offset, vocab);
  validateSampleOptions(opts);
  const greedy = opts.greedy ?? false;
  const temperature = greedy && !(opts.temperature > 0) ? 1 : opts.temperature;
  const { ids, scaled, logZ } = tempered(logits, offset, vocab, temperature, banned);

  let chosen: number;
  if (greedy) {
    chosen = 0;
    for (let i = 1; i < ids.length; i++) if (scaled[i] > scaled[chosen]) chosen = i;
  } else {
    // Candidates: all allowed ids, or the k largest (ties broken by lower id).
    let candidates = ids.map((_, i) => i);
    if (opts.topK > 0 && opts.topK < candidates.length) {
      candidates.sort((a, b) => scaled[b] - scaled[a] || a - b);
      candidates = candidates.slice(0, opts.topK).sort((a, b) => a - b);
    }
    const weights = candidates.map((i) => Math.exp(scaled[i] - logZ));
    const total = weights.reduce((a, b) => a + b, 0);
    const u = rng.next() * total;
    chosen = candidates[candidates.length - 1];
    let cumulative = 0;
    for (let c = 0; c < candidates.length; c++) {
      cumulative += weights[c];
      if (u < cumulative) {
        chosen = candidates[c];
        break;
      }
    }
  }
  return { id: ids[chosen], logprob: scaled[chosen] - logZ };
}

/** The k most likely tokens under softmax(logits / temperature), most likely first (for display). */
export function topKProbs(logits: Float32Array, offset: number, vocab: number, k: number, temperature: number): { id: number; prob: number }[] {
  checkRow(logits, offset, vocab);
  if (!Number.isInteger(k) || k < 1) throw new Error(`topKProbs: k must be an integer ≥ 1 (got ${k})`);
  if (!(Number.isFinite(temperature) && temperature > 0)) {
    throw new Error(`topKProbs: temperature must be a finite number > 0 (got ${temperature})`);
  }
  const { ids, scaled, logZ } = tempered(logits, offset, vocab, temperature, undefined);
  return ids
    .map((id, i) => ({ id, prob: Math.exp(scaled[i] - logZ) }))
    .sort((a, b) => b.prob - a.prob || a.id - b.id)
    .slice(0, k);
}
