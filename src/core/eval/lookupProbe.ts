/**
 * What a model of a given size can learn of the multihop clone's lookup, in isolation: fresh
 * weights trained on lookup drills alone (a chunk of assignments and a variable → its
 * right-hand side, or `none`), with held-out drills read greedily every few steps. The knobs
 * are the ones that might make the lookup hard: chunk size, names of one or two characters
 * (tokens), and where the question stands (after the chunk, as protocol v1's clones get it
 * from `<spawn><ctx>k3 ab?…`, or before it, as `<spawn>ab? <ctx>k3…` would give).
 *
 * Training goes through the warm start's own step (sftStep) and the held-out reading through
 * lookupAccuracy, so the probe measures this project's model and optimiser, not another's.
 */
import type { ModelConfig } from '../model/config';
import { initParams, disposeParams, type GPTParams } from '../model/params';
import { AdamW, ADAM_MOMENTS, cosineLr } from '../optim/adamw';
import { demoSequence } from '../parallel/sequences';
import { sftStep } from '../sft/sft';
import { Rng, SEED_MAX } from '../rng';
import { notationOf } from '../tasks/multihop';
import { type LookupCase, lookupAccuracy } from './lookup';

export type QuestionLayout = 'last' | 'first';

export interface LookupProbeConfig {
  /** Assignments per chunk. */
  size: number;
  /** Characters (tokens) per variable name. */
  nameChars: 1 | 2;
  layout: QuestionLayout;
  /** Train on chunks of 1 to `size` assignments drawn uniformly (a curriculum in one); held out: `size`. */
  mix: boolean;
  /** The clone restates the lookup before answering (`=ab=12<ans>12<eos>`), as the monolithic teacher writes a hop. */
  cot: boolean;
  /**
   * The multihop task's one-letter notation (`names: 1`): the value right after its name (`q7.`),
   * and the clone writes what the task teaches (`q7<ans>7<eos>`, a miss `q<ans>none<eos>`).
   * Needs one-letter names; the clone's restatement is part of the notation, so `cot` is moot.
   */
  adjacent: boolean;
  steps: number;
  /** Drills per step (half of them ask a variable the chunk does not assign). */
  batch: number;
  lr: number;
  warmup: number;
  weightDecay: number;
  evalEvery: number;
  /** Held-out drills of each kind (found, missing). */
  evalN: number;
  /** Stop at the first reading where both kinds reach this accuracy (0 = run every step). */
  target: number;
  seed: number;
}

export const LOOKUP_PROBE_DEFAULTS: Omit<LookupProbeConfig, 'size' | 'nameChars' | 'layout' | 'steps'> = {
  mix: false,
  cot: false,
  adjacent: false,
  batch: 96,
  lr: 2e-3,
  warmup: 50,
  weightDecay: 0.01,
  evalEvery: 100,
  evalN: 200,
  target: 0.9,
  seed: 1,
};

export function validateLookupProbeConfig(c: LookupProbeConfig): void {
  const errs: string[] = [];
  const int = (field: keyof LookupProbeConfig, lo: number, hi: number) => {
    const v = c[field];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi) errs.push(`${field} must be an integer in [${lo}, ${hi}] (got ${String(v)})`);
  };
  int('size', 1, 6);
  int('steps', 1, 1_000_000);
  int('batch', 2, 4096);
  int('warmup', 0, 1_000_000);
  int('evalEvery', 1, 1_000_000);
  int('evalN', 1, 5000);
  int('seed', 0, SEED_MAX);
  if (c.nameChars !== 1 && c.nameChars !== 2) errs.push(`nameChars must be 1 or 2 (got ${String(c.nameChars)})`);
  if (typeof c.cot !== 'boolean') errs.push(`cot must be true or false (got ${String(c.cot)})`);
  if (typeof c.mix !== 'boolean') errs.push(`mix must be true or false (got ${String(c.mix)})`);
  if (typeof c.adjacent !== 'boolean') errs.push(`adjacent must be true or false (got ${String(c.adjacent)})`);
  else if (c.adjacent && c.nameChars !== 1) errs.push('adjacent needs one-letter names (nameChars 1): a longer name would run into its value');
  else if (c.adjacent && c.cot) errs.push('adjacent already has the clone restate the lookup (its notation): leave cot off');
  if (c.layout !== 'last' && c.layout !== 'first') errs.push(`layout must be one of last, first (got ${String(c.layout)})`);
  if (!(c.lr > 0 && c.lr <= 1)) errs.push(`lr must be in (0, 1] (got ${String(c.lr)})`);
  if (!(c.weightDecay >= 0 && c.weightDecay <= 1)) errs.push(`weightDecay must be in [0, 1] (got ${String(c.weightDecay)})`);
  if (!(c.target >= 0 && c.target <= 1)) errs.push(`target must be in [0, 1] (got ${String(c.target)})`);
  if (errs.length > 0) throw new Error(`lookup probe: ${errs.join('; ')}`);
}

const LETTERS = [...'abcdefghijklmnopqrstuvwxyz'];
const ONE_LETTER = notationOf(1);

export interface ProbeDrill extends LookupCase {
  found: boolean;
  written: string;
}

/**
 * One drill. Chunks are built as multihop's are: distinct names, right-hand sides a number
 * (0–99) or, 40% of the time, another variable (assigned elsewhere). A missing question asks,
 * half of the time when there is one, a name the chunk holds only on a right-hand side — the
 * near miss a clone meets on every hop.
 */
export function probeDrill(rng: Rng, size: number, nameChars: 1 | 2, layout: QuestionLayout, found: boolean, cot = false, adjacent = false): ProbeDrill {
  const used = new Set<string>(nameChars === 2 ? ['no'] : []);
  const fresh = () => {
    for (;;) {
      const v = Array.from({ length: nameChars }, () => rng.pick(LETTERS)).join('');
      if (!used.has(v)) {
        used.add(v);
        return v;
      }
    }
  };
  const assigned = Array.from({ length: size }, fresh);
  const rhsNames: string[] = [];
  const rhs = assigned.map(() => {
    if (!rng.bool(0.4)) return String(rng.int(0, 99));
    const v = fresh();
    rhsNames.push(v);
    return v;
  });
  const chunk = assigned.map((v, i) => (adjacent ? ONE_LETTER.assign(v, rhs[i]) : `${v}=${rhs[i]}.`)).join(' ');
  let question: string;
  let answer: string;
  if (found) {
    const i = rng.int(0, size - 1);
    question = assigned[i];
    answer = rhs[i];
  } else {
    question = rhsNames.length > 0 && rng.bool(0.5) ? rng.pick(rhsNames) : fresh();
    answer = 'none';
  }
  const prompt = layout === 'last' ? `<clone>${chunk} ${question}?<sep>` : `<clone>${question}? ${chunk}<sep>`;
  const written = adjacent
    ? ONE_LETTER.cloneAnswer(question, found ? answer : undefined)
    : cot
      ? `=${question}=${answer}<ans>${answer}<eos>`
      : `<ans>${answer}<eos>`;
  return { prompt, answer, found, written };
}

/** The held-out drills: their own stream, `n` of each kind. */
export function probeEvalDrills(c: LookupProbeConfig): { found: ProbeDrill[]; missing: ProbeDrill[] } {
  const rng = Rng.stream(c.seed, 'lookup-probe-eval', c.size * 10 + c.nameChars);
  const found = Array.from({ length: c.evalN }, () => probeDrill(rng, c.size, c.nameChars, c.layout, true, c.cot, c.adjacent));
  const missing = Array.from({ length: c.evalN }, () => probeDrill(rng, c.size, c.nameChars, c.layout, false, c.cot, c.adjacent));
  return { found, missing };
}

/**
 * The drills of one training step (seeded by step), none of them a held-out one: when the
 * space of drills is small (one assignment, one-letter names) a drawn drill that is also held
 * out is replaced by the next draw.
 */
export function probeTrainDrills(c: LookupProbeConfig, step: number, heldOut: ReadonlySet<string>): ProbeDrill[] {
  const rng = Rng.stream(c.seed, 'lookup-probe-train', step);
  const out: ProbeDrill[] = [];
  for (let i = 0, tries = 0; out.length < c.batch; tries++) {
    if (tries > 100 * c.batch) throw new Error('lookup probe: the held-out drills cover nearly every drill; use a smaller evalN');
    const size = c.mix ? rng.int(1, c.size) : c.size;
    const d = probeDrill(rng, size, c.nameChars, c.layout, i % 2 === 0, c.cot, c.adjacent);
    if (heldOut.has(d.prompt + d.answer)) continue;
    out.push(d);
    i++;
  }
  return out;
}

export interface LookupProbeRow {
  step: number;
  loss: number;
  foundAccuracy: number;
  missingAccuracy: number;
  elapsedSec: number;
}

export interface LookupProbeResult {
  /** The first reading at which both kinds reached the target, or null. */
  stepsToTarget: number | null;
  rows: LookupProbeRow[];
}

/**
 * Trains a fresh model of `model` on drills and reads the held-out ones every `evalEvery` steps
 * (and at step 0). `onRow` sees each reading as it is made.
 */
export async function runLookupProbe(
  model: ModelConfig,
  c: LookupProbeConfig,
  encode: (t: string) => number[],
  onRow: (row: LookupProbeRow) => void = () => {},
): Promise<LookupProbeResult> {
  validateLookupProbeConfig(c);
  const params: GPTParams = initParams(model, c.seed);
  const optimizer = new AdamW(params, { ...ADAM_MOMENTS, lr: c.lr, weightDecay: c.weightDecay, gradClip: 1 });
  const held = probeEvalDrills(c);
  const heldOut = new Set([...held.found, ...held.missing].map((d) => d.prompt + d.answer));
  const rows: LookupProbeRow[] = [];
  const t0 = Date.now();
  let lossSum = 0;
  let lossN = 0;
  const read = (step: number): LookupProbeRow => {
    const row = {
      step,
      loss: lossN > 0 ? lossSum / lossN : NaN,
      foundAccuracy: lookupAccuracy(params, model, held.found, encode),
      missingAccuracy: lookupAccuracy(params, model, held.missing, encode),
      elapsedSec: Math.round((Date.now() - t0) / 100) / 10,
    };
    lossSum = 0;
    lossN = 0;
    rows.push(row);
    onRow(row);
    return row;
  };
  const reached = (r: LookupProbeRow) => c.target > 0 && r.foundAccuracy >= c.target && r.missingAccuracy >= c.target;
  let stepsToTarget: number | null = null;
  try {
    if (reached(read(0))) return { stepsToTarget: 0, rows };
    for (let step = 0; step < c.steps;) {
      const seqs = probeTrainDrills(c, step, heldOut).map((d) =>
        demoSequence(
          {
            role: 'clone',
            segments: [
              { kind: 'prompt', text: d.prompt },
              { kind: 'generated', text: d.written },
            ],
          },
          encode,
        ),
      );
      // Constant rate after the warm-up: "steps to target" then reads the same at any run length.
      const r = await sftStep(params, model, optimizer, seqs, cosineLr(step, c.steps, c.lr, c.warmup, 1), 8192);
      step++;
      if (Number.isFinite(r.loss)) {
        lossSum += r.loss;
        lossN++;
      }
      if (step % c.evalEvery === 0 || step === c.steps) {
        if (reached(read(step))) {
          stepsToTarget = step;
          break;
        }
      }
    }
  } finally {
    optimizer.dispose();
    disposeParams(params);
  }
  return { stepsToTarget, rows };
}
