/**
 * Three disjoint problem sets, by content: the problems a run trains on, the problems it
 * monitors while training (the live frontier, `train`/`sft --eval-every`), and the problems of
 * the final evaluation (`eval`, `frontier`, `report`). A problem's set is a hash of everything a
 * model sees of it (task, prompts, context) and its answer: 10% final, 10% monitor, 80% train.
 * Each generator draws until a problem of its set comes up, so no problem can be in two sets,
 * whatever the seeds, and nothing tuned on the monitored set can leak into a final number.
 */
import { murmur3x86_128 } from '../rng';
import type { Rng } from '../rng';
import type { Problem, Task } from '../tasks/types';

export type Split = 'train' | 'monitor' | 'final';
export const EVAL_SPLITS = ['monitor', 'final'] as const;
export type EvalSplit = (typeof EVAL_SPLITS)[number];

/** The seed of the held-out problem sets every evaluation draws by default: the page's live one, `train --eval-every`, `sft --eval-every`, `eval`, `frontier` and `report`. */
export const HELD_OUT_SEED = 12345;

/** Draws before giving up on a set (a task whose options leave almost no problems in it). */
const MAX_DRAWS = 10_000;

const encoder = new TextEncoder();

/** The content that decides a problem's set. */
function content(p: Problem): string {
  return [p.task, p.prompt, p.monoPrompt ?? '', JSON.stringify(p.context ?? {}), p.truth].join('\u0000');
}

export function splitOf(p: Problem): Split {
  const bucket = murmur3x86_128(encoder.encode(content(p)), 0x5e1f)[0] % 10;
  return bucket === 0 ? 'final' : bucket === 1 ? 'monitor' : 'train';
}

/** The next problem of `split` from the generator's stream. */
export function drawProblem<O>(task: Task<O>, rng: Rng, opts: O, id: string, split: Split): Problem {
  for (let i = 0; i < MAX_DRAWS; i++) {
    const p = task.generate(rng, opts, id);
    if (splitOf(p) === split) return p;
  }
  throw new Error(`${task.name}: no ${split} problem in ${MAX_DRAWS} draws (the task options leave too few distinct problems)`);
}
