/**
 * Long-context multi-hop retrieval, in the spirit of RULER's variable tracking and
 * 2WikiMultiHopQA: a context of keyed chunks, each holding a few assignments (`qx=7.` or
 * `ab=qx.`), most of them distractors; the question asks the value of a variable at the
 * end of a chain of `hops` assignments spread over different chunks.
 *
 * The delegating root sees only the chunk keys and the question. Each round it spawns one
 * clone per chunk (`<spawn><ctx>k3 ab?<b8>`: the runtime expands the key into the chunk),
 * each clone answers the right-hand side it finds or `none`, and the root follows the hop
 * into the next round. The monolithic root gets the whole context in its prompt, which
 * outgrows the model's context as chunks are added.
 */
import type { ProtocolLimits } from '../../protocol/grammar';
import type { Rng } from '../../rng';
import { optionFields } from '../options';
import type { DemoContext, Problem, Task, Verdict } from '../types';

export interface MultihopOptions {
  chunks: number;
  /** Assignments per chunk (chain links plus distractors). */
  perChunk: number;
  hops: number;
}

export const MULTIHOP_DEFAULTS: MultihopOptions = { chunks: 6, perChunk: 3, hops: 2 };

/** Options from outside (see Task.validateOptions): fields not given take MULTIHOP_DEFAULTS. */
export function validateMultihopOptions(raw: unknown): MultihopOptions {
  const o = { ...MULTIHOP_DEFAULTS, ...optionFields('multihop', raw) };
  const intIn = (field: keyof MultihopOptions, lo: number, hi: number) => {
    const v = o[field];
    if (!Number.isInteger(v) || v < lo || v > hi) throw new Error(`multihop: ${field} must be an integer in [${lo}, ${hi}] (got ${v})`);
  };
  intIn('chunks', 2, 16);
  intIn('perChunk', 1, 6);
  intIn('hops', 1, 4);
  if (o.hops > o.chunks * o.perChunk) throw new Error('multihop: hops must fit in chunks × perChunk assignments');
  return o;
}

const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

/** Parsed context: variable → right-hand side (a variable name or a number as text). */
export function parseAssignments(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/([a-z]{2})=([a-z]{2}|\d+)\./g)) out.set(m[1], m[2]);
  return out;
}

export const keyName = (i: number) => `k${i + 1}`;

function freshVar(rng: Rng, used: Set<string>): string {
  for (;;) {
    const v = rng.pick([...LETTERS]) + rng.pick([...LETTERS]);
    if (!used.has(v)) {
      used.add(v);
      return v;
    }
  }
}

function generate(rng: Rng, o: MultihopOptions, id: string): Problem {
  const used = new Set<string>(['no']); // 'no' would read like the start of 'none'
  // The chain: question = v[hops] → v[hops−1] → … → v[1] → value.
  const vars = Array.from({ length: o.hops }, () => freshVar(rng, used));
  const value = rng.int(0, 99);
  const links = vars.map((v, i) => `${v}=${i === 0 ? value : vars[i - 1]}.`);
  // Slots: chunk × position; chain links go to distinct chunks where possible.
  const slots: string[][] = Array.from({ length: o.chunks }, () => []);
  const order = rng.shuffle(Array.from({ length: o.chunks }, (_, i) => i));
  links.forEach((link, i) => slots[order[i % o.chunks]].push(link));
  // Distractors: their own short chains and constants, never touching the question's chain.
  const distractors: string[] = [];
  for (const chunk of slots) {
    while (chunk.length < o.perChunk) {
      const v = freshVar(rng, used);
      const rhs = distractors.length > 0 && rng.bool(0.4) ? rng.pick(distractors) : String(rng.int(0, 99));
      distractors.push(v);
      chunk.push(`${v}=${rhs}.`);
    }
    chunk.splice(0, chunk.length, ...rng.shuffle(chunk));
  }
  const context: Record<string, string> = {};
  slots.forEach((chunk, i) => (context[keyName(i)] = chunk.join(' ')));
  const keys = slots.map((_, i) => keyName(i));
  const question = vars[o.hops - 1];
  return {
    task: 'multihop',
    id,
    prompt: `keys ${keys.join(' ')}. ${question}?`,
    monoPrompt: `${keys.map((k) => `${k}: ${context[k]}`).join('\n')}\n${question}?`,
    truth: String(value),
    context,
    meta: { chunks: o.chunks, perChunk: o.perChunk, hops: o.hops },
  };
}

function questionOf(p: Problem): string {
  const m = /([a-z]{2})\?$/.exec(p.prompt);
  if (!m) throw new Error(`multihop: no question in ${JSON.stringify(p.prompt)}`);
  return m[1];
}

/** The chain of right-hand sides from the question's variable to its value. */
export function resolveChain(p: Problem): string[] {
  const all = parseAssignments(Object.values(p.context ?? {}).join(' '));
  const chain: string[] = [];
  let cur = questionOf(p);
  for (let i = 0; i < 16; i++) {
    const rhs = all.get(cur);
    if (rhs === undefined) throw new Error(`multihop: ${cur} is never assigned`);
    chain.push(rhs);
    if (/^\d+$/.test(rhs)) return chain;
    cur = rhs;
  }
  throw new Error('multihop: chain does not end');
}

/** Every assignment of the problem's context (`qx=7.`), chunk by chunk. */
export function assignmentsOf(problem: Problem): string[] {
  return Object.values(problem.context ?? {}).flatMap((c) => c.split(' '));
}

/**
 * Clone lookups over chunks of 1 to twice the problem's `perChunk` assignments (at most 6, the
 * knob's largest), two asking a variable the chunk assigns and two one it does not. Short
 * chunks make the comparison of a name with the question easy to learn first; long ones are
 * the long-context setting's. A warm start on `perChunk` 1 drills only chunks of 1–2.
 */
function lookupDrills(rng: Rng, problem: Problem): DemoContext[] {
  const all = assignmentsOf(problem);
  const largest = Math.min(6, 2 * Number(problem.meta.perChunk), all.length - 1);
  return [true, true, false, false].map((found) => {
    const picked = rng.shuffle(all).slice(0, rng.int(1, largest));
    const chunk = picked.join(' ');
    const inside = [...parseAssignments(chunk).keys()];
    const outside = [...parseAssignments(all.join(' ')).keys()].filter((v) => !inside.includes(v));
    return cloneDemo(chunk, rng.pick(found ? inside : outside));
  });
}

function cloneDemo(chunk: string, variable: string): DemoContext {
  const rhs = parseAssignments(chunk).get(variable) ?? 'none';
  return {
    role: 'clone',
    segments: [
      { kind: 'prompt', text: `<clone>${chunk} ${variable}?<sep>` },
      { kind: 'generated', text: `<ans>${rhs}<eos>` },
    ],
  };
}

export const multihop: Task<MultihopOptions> = {
  name: 'multihop',
  defaultOptions: MULTIHOP_DEFAULTS,
  validateOptions: validateMultihopOptions,
  presets: [
    { name: 'default', label: `default (${MULTIHOP_DEFAULTS.chunks} chunks × ${MULTIHOP_DEFAULTS.perChunk})`, options: {} },
    // The monolithic prompt of 6 × 6 assignments (about 280 tokens) outgrows a 256-position model; each clone's chunk fits.
    { name: 'long-context', label: 'long context (6 × 6, does not fit one window)', options: { chunks: 6, perChunk: 6 } },
  ],
  generate,
  // One clone per chunk each round, one round per hop. The delegating root writes a spawn of
  // about 9 tokens per chunk per hop (6 chunks, 2 hops: ~120 tokens), far past arithmetic's 48.
  rolloutDefaults: { maxClonesPerRound: 16, maxRounds: 4, rootMaxTokens: 224 },

  verify(problem: Problem, answer: string | null): Verdict {
    const value = answer !== null && /^(0|[1-9]\d*)$/.test(answer) ? Number(answer) : null;
    const truthValue = Number(problem.truth);
    return { correct: answer === problem.truth, value, truthValue };
  },

  /** Monolithic: look each hop up in the prompt and copy the assignment, then answer. */
  teacherMono(problem: Problem) {
    const chain = resolveChain(problem);
    let cur = questionOf(problem);
    let cot = '';
    for (const rhs of chain) {
      cot += `=${cur}=${rhs}.`;
      cur = rhs;
    }
    return {
      problem,
      style: 'mono' as const,
      contexts: [
        {
          role: 'root' as const,
          segments: [
            { kind: 'prompt' as const, text: `<root>${problem.monoPrompt}<sep>` },
            { kind: 'generated' as const, text: `${cot}<ans>${problem.truth}<eos>` },
          ],
        },
      ],
    };
  },

  /**
   * One round per hop: ask every chunk, follow the one answer that is not `none`.
   * Both teacher styles demonstrate this (no naive variant yet: asking every chunk is the
   * protocol's one way to find the holder; a naive one would ask random chunks at random budgets).
   *
   * The root's demonstration is the whole episode. Its clones' are chosen for learning the
   * lookup rather than copied whole: of the chunks × hops clone contexts all but one per round
   * answer `none`, and a warm start on all of them learns "always none" long before it learns
   * to look a variable up. Each round keeps the clone that finds the variable and one that does
   * not, plus four lookup drills (see lookupDrills).
   */
  teacherDelegate(problem: Problem, rng: Rng, limits: ProtocolLimits) {
    const keys = Object.keys(problem.context ?? {});
    const chain = resolveChain(problem);
    // One clone per chunk and one round per hop, in the run's limits; the answer `none` and a
    // value fit the smallest bucket of at least 8 tokens, the roomier ask takes the next one.
    const buckets = [...limits.budgets].sort((a, b) => a - b).filter((b) => b >= 8);
    if (keys.length > limits.maxClonesPerRound || chain.length > limits.maxRounds || buckets.length === 0) return null;
    const [tight, roomy = tight] = buckets;
    const root: DemoContext = { role: 'root', segments: [{ kind: 'prompt', text: `<root>${problem.prompt}<sep>` }] };
    const clones: DemoContext[] = [];
    let cur = questionOf(problem);
    chain.forEach((rhs) => {
      // Occasionally ask with a roomier budget: variety for RL to choose from.
      const budget = rng.bool(0.2) ? roomy : tight;
      const spawns = keys.map((k) => `<spawn><ctx>${k} ${cur}?<b${budget}>`).join('');
      root.segments.push({ kind: 'generated', text: `${spawns}<join>` });
      const answers = keys.map((k) => parseAssignments(problem.context![k]).get(cur) ?? 'none');
      const holder = answers.findIndex((a) => a !== 'none');
      const miss = rng.pick(keys.filter((_, i) => i !== holder));
      for (const k of [keys[holder], miss]) clones.push(cloneDemo(problem.context![k], cur));
      clones.push(...lookupDrills(rng, problem));
      root.segments.push({ kind: 'injected', text: answers.map((a) => `<ret>${a}`).join('') + '<resume>' });
      root.segments.push({ kind: 'generated', text: `=${rhs}` });
      cur = rhs;
    });
    root.segments.push({ kind: 'generated', text: `<ans>${problem.truth}<eos>` });
    return { problem, style: 'delegate' as const, contexts: [root, ...clones] };
  },
};
