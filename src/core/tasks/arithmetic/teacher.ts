/**
 * The programmatic teachers: demonstrations of the monolithic chain of thought and of
 * delegation, for the warm start.
 *
 * Chain of thought: `=` then the whole expression after each reduction step, then the
 * answer block.
 *
 * Expert delegation (`delegateContexts`): the top-level sum is cut into 2–4 contiguous slices
 * (slices that hold work preferred); each clone gets a slice (with its leading minus, so the
 * root only has to add) and the smallest budget bucket that fits its chain, sometimes one
 * bucket more; after the join the root adds the clone answers with the same chain-of-thought
 * format. Only the run's spawn limits are demonstrated: its budget buckets and at most its
 * clones per round.
 *
 * Naive delegation (`naiveDelegateContexts`): the protocol with no strategy, so that RL has
 * the strategy left to learn. 1 to min(4, clones per round, top-level terms) clones, uniformly
 * (one clone: the whole sum); cut points uniformly at random (lone numbers as likely as any
 * slice); each budget uniformly from all the run's buckets, too small ones included. A clone
 * whose chain fits its budget is demonstrated whole, as the expert's. One whose chain does not
 * fit is demonstrated as the rollout treats it: the runtime cuts a clone at its budget
 * (`clone_over_budget`) and injects `<ret><fail>` for it, so its demonstration is its chain cut
 * at the budget (never a token past it), and the root sees `<fail>`. The root then does the
 * failed slices itself: it writes the sum with each answered slice replaced by its answer and
 * each failed slice copied from its prompt, and reduces it. Of the root's honest options this
 * is the one a runtime episode can actually take — it uses only the injected answers and its
 * own prompt, and reaches the truth; answering from the answers it has would teach wrong
 * answers, and spawning the failed slice again with a larger budget would be a strategy.
 */
import type { ProtocolLimits } from '../../protocol/grammar';
import type { Rng } from '../../rng';
import { BUDGET_BUCKETS } from '../../tokenizer/vocab';
import type { DemoContext, Segment } from '../types';
import { type Sum, evaluate, formatSum, num, reductionChain, sumOfValues } from './expr';

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

/** The first `n` tokens of a generated text (special tokens count one), as a budget cuts it. */
export function firstTokens(text: string, n: number): string {
  return (text.match(/<[a-z0-9]+>|[\s\S]/g) ?? []).slice(0, n).join('');
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
  return [delegatingRoot(s, spawns, values, sumOfValues(values)), ...clones];
}

/**
 * The root of a delegation: its prompt, the spawn blocks and the join, the injected answers
 * (null: a failed clone), then the combination `combined` reduced like any chain of thought.
 */
function delegatingRoot(s: Sum, spawns: readonly string[], answers: readonly (number | null)[], combined: Sum): DemoContext {
  const injected = answers.map((v) => (v === null ? '<ret><fail>' : `<ret>${v}`)).join('') + '<resume>';
  const segments: Segment[] = [
    { kind: 'prompt', text: `<root>${formatSum(s)}<sep>` },
    { kind: 'generated', text: spawns.join('') + '<join>' },
    { kind: 'injected', text: injected },
    { kind: 'generated', text: `=${formatSum(combined)}${chainText(combined)}` },
  ];
  return { role: 'root', segments };
}

/**
 * The root's sum after a join: each answered slice replaced by its answer (a number), each
 * failed one (`null`) as the slice itself. With every slice answered it is `sumOfValues`.
 */
export function combineSlices(slices: readonly Sum[], answers: readonly (number | null)[]): Sum {
  const pieces = slices.map((slice, i) => {
    const v = answers[i];
    return v === null ? slice : { terms: [[num(Math.abs(v))]], ops: [], neg: v < 0 };
  });
  const out: Sum = { terms: [], ops: [], neg: pieces[0].neg };
  pieces.forEach((p, i) => {
    // A piece's leading minus becomes the operator that joins it.
    if (i > 0) out.ops.push(p.neg ? '-' : '+');
    out.terms.push(...p.terms);
    out.ops.push(...p.ops);
  });
  return out;
}

/**
 * Naive delegation demonstration (see the header): no strategy in the count, the cuts or the
 * budgets; a clone over its budget is cut there and the root finishes its slice. Null only
 * when the limits allow no spawn round.
 */
export function naiveDelegateContexts(s: Sum, rng: Rng, limits: ProtocolLimits): DemoContext[] | null {
  if (limits.maxRounds < 1 || limits.maxClonesPerRound < 1 || limits.budgets.length === 0) return null;
  const nTerms = s.terms.length;
  const buckets = [...limits.budgets].sort((a, b) => a - b);
  const parts = rng.int(1, Math.min(4, limits.maxClonesPerRound, nTerms));
  const slices = sliceSum(s, randomCuts(rng, nTerms, parts));
  const clones: DemoContext[] = [];
  const spawns: string[] = [];
  const answers: (number | null)[] = [];
  for (const slice of slices) {
    const sub = formatSum(slice);
    const budget = rng.pick(buckets);
    const gen = chainText(slice);
    const fits = tokenLength(gen) <= budget;
    spawns.push(`<spawn>${sub}<b${budget}>`);
    answers.push(fits ? evaluate(slice) : null);
    clones.push({
      role: 'clone',
      segments: [
        { kind: 'prompt', text: `<clone>${sub}<sep>` },
        { kind: 'generated', text: fits ? gen : firstTokens(gen, budget) },
      ],
    });
  }
  return [delegatingRoot(s, spawns, answers, combineSlices(slices, answers)), ...clones];
}
