/**
 * What every task provides: a seeded generator, a verifier, and a teacher that writes
 * warm-start demonstrations in the delegation protocol.
 */
import type { ProtocolLimits } from '../protocol/grammar';
import type { Rng } from '../rng';

export interface Problem {
  task: string;
  /** Stable id within its generator stream (seed + index), for traces and comparisons. */
  id: string;
  /** The root prompt text (between `<root>` and `<sep>`). */
  prompt: string;
  /**
   * The root prompt for the monolithic method when it differs (long-context tasks: the whole
   * context in one prompt, where the delegating root sees only the chunk keys).
   */
  monoPrompt?: string;
  /** The exact answer text. */
  truth: string;
  /**
   * Named context chunks that a spawn may reference with `<ctx>key` (long-context tasks). A plain
   * object so that it survives JSON and worker messages; the keys a spawn names are model output,
   * so look them up with `contextChunk` (own entries only), never `context[key]`.
   */
  context?: Record<string, string>;
  /** Task-specific difficulty facts (operand count, hops, …) for slicing results. */
  meta: Record<string, number | string>;
}

/** One piece of a demonstration: who writes it decides whether it is trained on. */
export interface Segment {
  text: string;
  /** 'prompt' and 'injected' are written by the runtime and masked out of the loss. */
  kind: 'prompt' | 'generated' | 'injected';
}

/** A context as the teacher would produce it: a root or one clone, start to end. */
export interface DemoContext {
  role: 'root' | 'clone';
  segments: Segment[];
}

export interface Demonstration {
  problem: Problem;
  style: 'mono' | 'delegate';
  /** Root first, then its clones in spawn order. */
  contexts: DemoContext[];
}

export interface Verdict {
  correct: boolean;
  /** The parsed numeric value when the task is numeric (for partial credit); null otherwise. */
  value: number | null;
  truthValue: number | null;
}

/**
 * How a delegation is demonstrated: `expert` with a strategy (splits that balance the work,
 * budgets that fit), `naive` with none (the protocol only: any split, any budget, its failures
 * shown as the runtime has them), so that RL has the strategy left to learn.
 */
export const TEACHER_STYLES = ['expert', 'naive'] as const;
export type TeacherStyle = (typeof TEACHER_STYLES)[number];

/**
 * A named setting of a task's options that the page offers: `options` holds only the fields
 * that differ from the task's defaults, so the default setting is `{}`.
 */
export interface OptionPreset<Opts> {
  name: string;
  /** What the setting is, in a few words (a menu entry). */
  label: string;
  options: Partial<Opts>;
}

/** A task whose generator takes options of type `Opts` (tasks/index.ts: the registry, by name). */
export interface Task<Opts> {
  name: string;
  defaultOptions: Opts;
  /**
   * Options from outside (a JSON file, the CLI, the page): fields not given take their defaults;
   * a bad value throws a message that names the field and the allowed range.
   */
  validateOptions(raw: unknown): Opts;
  generate(rng: Rng, opts: Opts, id: string): Problem;
  verify(problem: Problem, answer: string | null): Verdict;
  /** A monolithic chain of thought ending in an answer block. */
  teacherMono(problem: Problem, rng: Rng): Demonstration;
  /** Named settings of its options, the default (`{}`) first. */
  presets: readonly OptionPreset<Opts>[];
  /** Rollout limits this task needs beyond the defaults (e.g. one clone per chunk). */
  rolloutDefaults?: { maxClonesPerRound?: number; maxRounds?: number; rootMaxTokens?: number };
  /**
   * A delegation (spawn, join, combine) within the run's spawn limits (budget buckets, clones per
   * round, rounds), or null when the problem does not split within them. `style` (default
   * `expert`): see TeacherStyle; a task without a naive variant demonstrates its expert.
   */
  teacherDelegate(problem: Problem, rng: Rng, limits: ProtocolLimits, style?: TeacherStyle): Demonstration | null;
}
