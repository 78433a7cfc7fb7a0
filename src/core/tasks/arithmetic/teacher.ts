/**
 * The programmatic teacher: demonstrations of the monolithic chain of thought and of
 * delegation, with varied decompositions and budgets, for the warm start.
 *
 * Chain of thought: `=` then the whole expression after each reduction step, then the
 * answer block. Delegation: the top-level sum is cut into 2–4 contiguous slices; each
 * clone gets a slice (with its leading minus, so the root only has to add) and the
 * smallest budget bucket that fits its chain, sometimes one bucket more; after the join
 * the root adds the clone answers with the same chain-of-thought format. Only the run's spawn
 * limits are demonstrated: its budget buckets and at most its clones per round.
 */
import type { ProtocolLimits } from '../../protocol/grammar';
import type { Rng } from '../../rng';
import { BUDGET_BUCKETS } from '../../tokenizer/vocab';
import type { DemoContext, Segment } from '../types';
import { type Sum, evaluate, formatSum, reductionChain, sumOfValues } from './expr';

/** The chain of thought text a context generates for an expression, answer block included. */
export function chainText(s: Sum): string {
  const { chain } = reductionChain(s);
  const value = evaluate(s);
  return chain.map((e) => `=${formatSum(e)}`).join('') + `<ans>${value}<eos>`;
}

/** Generated length in tokens of a chain text (special tokens count one). */
export function tokenLength(text: string): number {
  return text.replace(/<[a-z0-9]+>/g, '#').length;
}

/** The smallest of `buckets` (default: all) that holds `tokens`. */
export function smallestBucket(tokens: number, buckets: readonly number[] = BUDGET_BUCKETS): number | null {
  return [...buckets].sort((a, b) => a - b).find((b) => b >= tokens) ?? null;
}

export function monoContexts(s: Sum): DemoContext[] {
  return [
    {
      role: 'root',
      segments: [
        { kind: 'prompt', text: `<root>${formatSum(s)}<sep>` },
        { kind: 'generated', text: chainText(s) },
      ],
    },
  ];
}

/** Contiguous slices of the top-level terms, each carrying its sign. */
export function sliceSum(s: Sum, cuts: number[]): Sum[] {
  const bounds = [0, ...cuts, s.terms.length];
  const slices: Sum[] = [];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const from = bounds[i];
    const to = bounds[i + 1];
    slices.push({
      terms: s.terms.slice(from, to),
      ops: s.ops.slice(from, to - 1),
      neg: from === 0 ? s.neg : s.ops[from - 1] === '-',
    });
  }
  return slices;
}

function randomCuts(rng: Rng, nTerms: number, parts: number): number[] {
  const positions = rng.shuffle(Array.from({ length: nTerms - 1 }, (_, i) => i + 1));
  return positions.slice(0, parts - 1).sort((a, b) => a - b);
}

/**
 * Delegation demonstration, or null when the sum has fewer than two top-level terms, or the
 * limits allow no split (fewer than two clones, no round, no bucket that fits a slice).
 */
export function delegateContexts(s: Sum, rng: Rng, limits: ProtocolLimits): DemoContext[] | null {
  const nTerms = s.terms.length;
  if (nTerms < 2 || limits.maxClonesPerRound < 2 || limits.maxRounds < 1) return null;
  const buckets = [...limits.budgets].sort((a, b) => a - b);
  const parts = rng.int(2, Math.max(2, Math.min(4, limits.maxClonesPerRound, Math.ceil(nTerms / 2))));
  // Prefer slices that hold work (a lone number is a wasted clone); after a few tries
  // accept one, which also shows the model that such a split still works.
  const trivial = (p: Sum) => p.terms.length === 1 && p.terms[0].length === 1 && p.terms[0][0].kind === 'num';
  let slices = sliceSum(s, randomCuts(rng, nTerms, parts));
  for (let tries = 0; tries < 20 && slices.some(trivial); tries++) {
    slices = sliceSum(s, randomCuts(rng, nTerms, parts));
  }
  const clones: DemoContext[] = [];
  const spawns: string[] = [];
  const values: number[] = [];
  for (const slice of slices) {
    const sub = formatSum(slice);
    const gen = chainText(slice);
    const need = tokenLength(gen);
    const fit = smallestBucket(need, buckets);
    if (fit === null) return null;
    const i = buckets.indexOf(fit);
    const budget = i + 1 < buckets.length && rng.bool(0.25) ? buckets[i + 1] : fit;
    spawns.push(`<spawn>${sub}<b${budget}>`);
    values.push(evaluate(slice));
    clones.push({
      role: 'clone',
      segments: [
        { kind: 'prompt', text: `<clone>${sub}<sep>` },
        { kind: 'generated', text: gen },
      ],
    });
  }
  const combined = sumOfValues(values);
  const injected = values.map((v) => `<ret>${v}`).join('') + '<resume>';
  const rootSegments: Segment[] = [
    { kind: 'prompt', text: `<root>${formatSum(s)}<sep>` },
    { kind: 'generated', text: spawns.join('') + '<join>' },
    { kind: 'injected', text: injected },
    // The root first writes the combination, then reduces it like any chain of thought.
    { kind: 'generated', text: `=${formatSum(combined)}${chainText(combined)}` },
  ];
  return [{ role: 'root', segments: rootSegments }, ...clones];
}
