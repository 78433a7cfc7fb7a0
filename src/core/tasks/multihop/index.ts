/**
 * Long-context multi-hop retrieval, in the spirit of RULER's variable tracking and
 * 2WikiMultiHopQA: a context of keyed chunks, each holding a few assignments, most of them
 * distractors; the question asks the value of a variable at the end of a chain of `hops`
 * assignments spread over different chunks.
 *
 * Two notations (option `names`). One-letter names (the default) write the value right after
 * its name: `q7.` assigns 7 to q, `aq.` assigns q to a. Two-letter names (`names: 2`, the
 * notation of protocol v1's first runs) write `qx=7.` and `ab=qx.`. The lookup probe
 * (docs/TRAINING.md) found the first one learnable at the `small` size and the second not:
 * with the value right after the name, finding it is one induction step (find the asked
 * token earlier, copy what followed it).
 *
 * The delegating root sees only the chunk keys and the question. Each round it asks every
 * chunk at once (`<spawn><ctx>* q?<b8>`: the runtime starts one clone per chunk, each with its
 * chunk expanded; the first notation's runs wrote one `<spawn><ctx>k3 q?<b8>` per chunk), each
 * clone answers the right-hand side it finds or `none`, and the root follows the hop into the
 * next round. The monolithic root gets the whole context in its prompt, which
 * outgrows the model's context as chunks (and filler) are added.
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
  /** Characters (tokens) per variable name: 1 (`q7.`) or 2 (`qx=7.`). */
  names: number;
  /**
   * Filler characters per chunk, in words of `#*_+` placed between the assignments: the
   * irrelevant text around the facts of a real document. It holds no letter or digit, so it
   * never reads as a name or a value.
   */
  filler: number;
}

export const MULTIHOP_DEFAULTS: MultihopOptions = { chunks: 6, perChunk: 3, hops: 2, names: 1, filler: 0 };

/** One-letter names: every letter but k, which starts the chunk keys (`k3`). */
const ONE_LETTER = 'abcdefghijlmnopqrstuvwxyz';
const LETTERS = 'abcdefghijklmnopqrstuvwxyz';
const FILLER_CHARS = '#*_+';

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
  intIn('names', 1, 2);
  intIn('filler', 0, 96);
  if (o.hops > o.chunks * o.perChunk) throw new Error('multihop: hops must fit in chunks × perChunk assignments');
  if (o.names === 1 && o.chunks * o.perChunk > ONE_LETTER.length) {
    throw new Error(
      `multihop: one-letter names give ${ONE_LETTER.length} variables (a–z but k), so chunks × perChunk must be at most ${ONE_LETTER.length} (got ${o.chunks} × ${o.perChunk} = ${o.chunks * o.perChunk}); use names 2 for more`,
    );
  }
  return o;
}

/** How a problem writes its assignments, by its `names` option. */
export interface Notation {
  names: 1 | 2;
  /** One assignment as the context holds it. */
  assign(name: string, rhs: string): string;
  /** Every assignment of a text, name → right-hand side. */
  parse(text: string): Map<string, string>;
  /** What a clone asked `name` writes: its answer block, after a restated lookup in notation 1. */
  cloneAnswer(name: string, rhs: string | undefined): string;
  /** One hop of the monolithic chain of thought. */
  monoHop(name: string, rhs: string): string;
}

const NOTATIONS: Record<1 | 2, Notation> = {
  1: {
    names: 1,
    assign: (name, rhs) => `${name}${rhs}.`,
    parse(text) {
      const out = new Map<string, string>();
      for (const m of text.matchAll(/(?<![a-z0-9])([a-z])([a-z]|\d+)\./g)) out.set(m[1], m[2]);
      return out;
    },
    // The clone first writes the asked name, then what followed it in the chunk (nothing when
    // the chunk does not assign it): the token before the value is the name, as in the chunk.
    cloneAnswer: (name, rhs) => `${name}${rhs ?? ''}<ans>${rhs ?? 'none'}<eos>`,
    monoHop: (name, rhs) => `${name}${rhs}.`,
  },
  2: {
    names: 2,
    assign: (name, rhs) => `${name}=${rhs}.`,
    parse(text) {
      const out = new Map<string, string>();
      for (const m of text.matchAll(/([a-z]{2})=([a-z]{2}|\d+)\./g)) out.set(m[1], m[2]);
      return out;
    },
    cloneAnswer: (_name, rhs) => `<ans>${rhs ?? 'none'}<eos>`,
    monoHop: (name, rhs) => `=${name}=${rhs}.`,
  },
};

/** The notation of `names` (1 or 2). */
export function notationOf(names: number): Notation {
  if (names !== 1 && names !== 2) throw new Error(`multihop: names must be 1 or 2 (got ${names})`);
  return NOTATIONS[names];
}

/** What problems and runs from before the `names` and `filler` options were: two-letter names, no filler. */
export const MULTIHOP_BEFORE_NOTATION: Pick<MultihopOptions, 'names' | 'filler'> = { names: 2, filler: 0 };

/** The notation a problem was generated in (problems from before the option: two-letter). */
export function problemNotation(p: Pick<Problem, 'meta'>): Notation {
  return notationOf(p.meta.names === undefined ? MULTIHOP_BEFORE_NOTATION.names : Number(p.meta.names));
}

export const keyName = (i: number) => `k${i + 1}`;

function freshVar(rng: Rng, used: Set<string>, names: number): string {
  for (;;) {
    const v = names === 1 ? rng.pick([...ONE_LETTER]) : rng.pick([...LETTERS]) + rng.pick([...LETTERS]);
    if (!used.has(v)) {
      used.add(v);
      return v;
    }
  }
}

/** `total` filler characters in words of 2–5 (the last one shorter when that is what is left), to place between a chunk's assignments. */
export function fillerWords(rng: Rng, total: number): string[] {
  const words: string[] = [];
  let left = total;
  while (left > 0) {
    const n = Math.min(left, rng.int(2, 5));
    words.push(Array.from({ length: n }, () => rng.pick([...FILLER_CHARS])).join(''));
    left -= n;
  }
  return words;
}

function generate(rng: Rng, o: MultihopOptions, id: string): Problem {
  const note = notationOf(o.names);
  const used = new Set<string>(o.names === 2 ? ['no'] : []); // 'no' would read like the start of 'none'
  const fresh = () => freshVar(rng, used, o.names);
  // The chain: question = v[hops] → v[hops−1] → … → v[1] → value.
  const vars = Array.from({ length: o.hops }, fresh);
  const value = rng.int(0, 99);
  const links = vars.map((v, i) => note.assign(v, i === 0 ? String(value) : vars[i - 1]));
  // Slots: chunk × position; chain links go to distinct chunks where possible.
  const slots: string[][] = Array.from({ length: o.chunks }, () => []);
  const order = rng.shuffle(Array.from({ length: o.chunks }, (_, i) => i));
  links.forEach((link, i) => slots[order[i % o.chunks]].push(link));
  // Distractors: their own short chains and constants, never touching the question's chain.
  const distractors: string[] = [];
  for (const chunk of slots) {
    while (chunk.length < o.perChunk) {
      const v = fresh();
      const rhs = distractors.length > 0 && rng.bool(0.4) ? rng.pick(distractors) : String(rng.int(0, 99));
      distractors.push(v);
      chunk.push(note.assign(v, rhs));
    }
    chunk.splice(0, chunk.length, ...rng.shuffle(chunk));
    // Filler words go between (and around) the assignments, their order kept.
    for (const word of fillerWords(rng, o.filler)) chunk.splice(rng.int(0, chunk.length), 0, word);
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
    meta: { chunks: o.chunks, perChunk: o.perChunk, hops: o.hops, names: o.names, filler: o.filler },
  };
}

function questionOf(p: Problem): string {
  const m = / ([a-z]{1,2})\?$/.exec(p.prompt);
  if (!m) throw new Error(`multihop: no question in ${JSON.stringify(p.prompt)}`);
  return m[1];
}

/** The chain of right-hand sides from the question's variable to its value. */
export function resolveChain(p: Problem): string[] {
  const all = problemNotation(p).parse(Object.values(p.context ?? {}).join(' '));
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

/** Every assignment of the problem's context (`q7.`, `qx=7.`), chunk by chunk, without filler. */
export function assignmentsOf(problem: Problem): string[] {
  const note = problemNotation(problem);
  return Object.values(problem.context ?? {}).flatMap((c) => c.split(' ').filter((w) => note.parse(w).size === 1));
}

/**
 * Clone lookups over chunks of 1 to twice the problem's `perChunk` assignments (at most 6, the
 * knob's largest), two asking a variable the chunk assigns and two one it does not. Short
 * chunks make the comparison of a name with the question easy to learn first; long ones are
 * the long-context setting's. A warm start on `perChunk` 1 drills only chunks of 1–2.
 *
 * Filler: a problem with filler gives each drill its share of it. Without, in the one-letter
 * notation, half the drills still carry 1–6 filler characters per assignment (the long
 * context's 24 for 4 is the top of that range): the long-context setting differs from the
 * default only in its clones' chunks (its root sees the same keys and question), so a warm start
 * on the default setting learns to read those chunks too.
 */
function lookupDrills(rng: Rng, problem: Problem): DemoContext[] {
  const note = problemNotation(problem);
  const all = assignmentsOf(problem);
  const assigned = [...note.parse(all.join(' ')).keys()];
  const largest = Math.min(6, 2 * Number(problem.meta.perChunk), all.length - 1);
  return [true, true, false, false].map((found) => {
    const picked = rng.shuffle(all).slice(0, rng.int(1, largest));
    const filler = Number(problem.meta.filler ?? 0);
    const perAssignment = filler > 0 ? filler / Number(problem.meta.perChunk) : note.names === 1 && rng.bool(0.5) ? rng.int(1, 6) : 0;
    const words = fillerWords(rng, Math.round(perAssignment * picked.length));
    for (const word of words) picked.splice(rng.int(0, picked.length), 0, word);
    const chunk = picked.join(' ');
    const inside = [...note.parse(chunk).keys()];
    const outside = assigned.filter((v) => !inside.includes(v));
    return cloneDemo(note, chunk, rng.pick(found ? inside : outside));
  });
}

function cloneDemo(note: Notation, chunk: string, variable: string): DemoContext {
  return {
    role: 'clone',
    segments: [
      { kind: 'prompt', text: `<clone>${chunk} ${variable}?<sep>` },
      { kind: 'generated', text: note.cloneAnswer(variable, note.parse(chunk).get(variable)) },
    ],
  };
}

export const multihop: Task<MultihopOptions> = {
  name: 'multihop',
  defaultOptions: MULTIHOP_DEFAULTS,
  validateOptions: validateMultihopOptions,
  presets: [
    { name: 'default', label: `default (${MULTIHOP_DEFAULTS.chunks} chunks × ${MULTIHOP_DEFAULTS.perChunk})`, options: {} },
    // The monolithic prompt of 6 chunks of 4 assignments among 24 filler characters each (about
    // 320 tokens) outgrows a 256-position model; each clone's prompt (at most about 57) fits.
    { name: 'long-context', label: 'long context (6 × 4 among filler, does not fit one window)', options: { chunks: 6, perChunk: 4, filler: 24 } },
    // Fits one window (about 235 tokens), where the delegating root's episode (at most 110) is under half of it.
    { name: 'filler', label: '6 × 3 among filler (fits one window)', options: { filler: 16 } },
    // Four chunks of five assignments among filler: the warm start was taught six chunks of three, and
    // the monolithic prompt outgrows the window (the mono method scores 0); the page's first-visit demo.
    { name: 'demo', label: '4 × 5 among filler (the first-visit demo)', options: { chunks: 4, perChunk: 5, filler: 24 } },
    // More chunks and more hops than the warm start is taught (6 chunks, 2 hops); the root's episode still fits.
    { name: 'ood', label: 'out of distribution (8 chunks, 3 hops)', options: { chunks: 8, hops: 3 } },
  ],
  generate,
  // One clone per chunk each round, one round per hop. The delegating root of the first notation
  // writes a spawn of about 9 tokens per chunk per hop (6 chunks, 2 hops: ~120 tokens), far past
  // arithmetic's 48; a fan-out root about 12 a hop.
  rolloutDefaults: { maxClonesPerRound: 16, maxRounds: 4, rootMaxTokens: 224 },

  verify(problem: Problem, answer: string | null): Verdict {
    const value = answer !== null && /^(0|[1-9]\d*)$/.test(answer) ? Number(answer) : null;
    const truthValue = Number(problem.truth);
    return { correct: answer === problem.truth, value, truthValue };
  },

  /** Monolithic: look each hop up in the prompt and copy the assignment, then answer. */
  teacherMono(problem: Problem) {
    const note = problemNotation(problem);
    const chain = resolveChain(problem);
    let cur = questionOf(problem);
    let cot = '';
    for (const rhs of chain) {
      cot += note.monoHop(cur, rhs);
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
    const note = problemNotation(problem);
    const keys = Object.keys(problem.context ?? {});
    const chain = resolveChain(problem);
    // One clone per chunk and one round per hop, in the run's limits; what a clone writes (at
    // most 7 tokens: `q57<ans>57<eos>`) fits the smallest bucket of at least 8 tokens, the
    // roomier ask takes the next one.
    const buckets = [...limits.budgets].sort((a, b) => a - b).filter((b) => b >= 8);
    if (keys.length > limits.maxClonesPerRound || chain.length > limits.maxRounds || buckets.length === 0) return null;
    const [tight, roomy = tight] = buckets;
    const root: DemoContext = { role: 'root', segments: [{ kind: 'prompt', text: `<root>${problem.prompt}<sep>` }] };
    const clones: DemoContext[] = [];
    let cur = questionOf(problem);
    chain.forEach((rhs) => {
      // Occasionally ask with a roomier budget: variety for RL to choose from.
      const budget = rng.bool(0.2) ? roomy : tight;
      // One spawn that fans out over every chunk (`<ctx>*`, the runtime's one clone per chunk) in
      // the one-letter notation; a spawn per chunk in the first notation, as its runs were taught.
      const spawns = note.names === 1 ? `<spawn><ctx>* ${cur}?<b${budget}>` : keys.map((k) => `<spawn><ctx>${k} ${cur}?<b${budget}>`).join('');
      root.segments.push({ kind: 'generated', text: `${spawns}<join>` });
      const answers = keys.map((k) => note.parse(problem.context![k]).get(cur) ?? 'none');
      const holder = answers.findIndex((a) => a !== 'none');
      const miss = rng.pick(keys.filter((_, i) => i !== holder));
      for (const k of [keys[holder], miss]) clones.push(cloneDemo(note, problem.context![k], cur));
      clones.push(...lookupDrills(rng, problem));
      root.segments.push({ kind: 'injected', text: answers.map((a) => `<ret>${a}`).join('') + '<resume>' });
      root.segments.push({ kind: 'generated', text: `=${rhs}` });
      cur = rhs;
    });
    root.segments.push({ kind: 'generated', text: `<ans>${problem.truth}<eos>` });
    return { problem, style: 'delegate' as const, contexts: [root, ...clones] };
  },
};
