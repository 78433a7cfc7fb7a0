/**
 * The episode trace: a serialisable record of one root and its clones.
 * One trace per JSONL line; docs/FORMATS.md documents every field.
 */
import type { Violation } from '../protocol/violations';

/** A context's part of the loss, as the advantage step decided it (core/rl/advantage.ts). */
export interface ContextCredit {
  /** The effective advantage of the policy-gradient term (0 for a gated context). */
  advantage: number;
  /** Loss weight: 1 = in the batch (a gated context with its KL term kept included), 0 = skipped group, or gated without KL. */
  weight: number;
  gated: boolean;
  /** The reward this context is credited with (R for roots, r_clone for clones). */
  reward: number;
}

/** An episode's reward and its parts (core/rl/reward.ts computes it). */
export interface RewardBreakdown {
  reward: number;
  score: number;
  rootPenalty: number;
  clonePenalty: number;
  callPenalty: number;
  /** budgetRate · unused reserved clone budget. */
  budgetPenalty: number;
  /** tokenRate · generated tokens; absent in traces written before the token cost existed (read as 0). */
  tokenPenalty?: number;
}

export const TRACE_SCHEMA = 'selfcest-episode/1';

/** Who wrote each token of a context: prompt (runtime), generated (model), injected (runtime). */
export type Writer = 'p' | 'g' | 'i';

/** A run of a context's text written by one writer (text-only contexts, below). */
export interface TextSpan {
  writer: Writer;
  text: string;
}

export interface ContextTrace {
  id: number;
  role: 'root' | 'clone';
  /** The root's id for a clone; null for the root. */
  parent: number | null;
  /** Spawn round (0-based) for a clone; null for the root. */
  round: number | null;
  /** The subtask as the root wrote it (before context-key expansion; a fan-out's clone: its own key in place of `*`). */
  subtask: string | null;
  budget: number | null;
  tokens: number[];
  text: string;
  /** One letter per token (see Writer); only 'g' tokens are the model's actions. */
  writers: string;
  /** Behaviour-policy log-probability of each generated token, in order. */
  logprobs: number[];
  generatedTokens: number;
  answer: string | null;
  violation: Violation | null;
  violationDetail: string | null;
  /** In the trainer's traces (scoredTrace): this context's advantage, loss weight and gate decision. */
  credit?: ContextCredit;
  /**
   * A text-only context (a rollout of another trainer, e.g. verl's, whose token ids mean nothing
   * here): its text by writer, in order. `tokens`, `writers` and `logprobs` are then empty and
   * `generatedTokens` is the source's own count (its response mask).
   */
  spans?: TextSpan[];
  /** Each token's own text, where the model's tokens are subwords (a Hugging Face model's); absent for the toy's characters. */
  pieces?: string[];
}

export type EpisodeEvent =
  { kind: 'spawn'; round: number; atToken: number; clones: number[] } | { kind: 'join'; round: number; atToken: number; answers: (string | null)[] };

export interface TokenCounts {
  /** Tokens the root generated. */
  root: number;
  /** Tokens all clones generated. */
  clonesTotal: number;
  /** Longest clone of each round. */
  longestClonePerRound: number[];
  /** Root plus the longest clone of each round: the latency-like cost. */
  criticalPath: number;
  /** Root plus all clones. */
  total: number;
}

export interface EpisodeTrace {
  schema: typeof TRACE_SCHEMA;
  policyVersion: number;
  task: string;
  problemId: string;
  prompt: string;
  truth: string;
  method: 'delegate' | 'mono';
  answer: string | null;
  correct: boolean;
  rounds: number;
  contexts: ContextTrace[];
  events: EpisodeEvent[];
  violations: { violation: Violation; context: number; detail: string }[];
  tokens: TokenCounts;
  /** In the trainer's traces (scoredTrace): the episode reward and its parts. */
  reward?: RewardBreakdown;
  /**
   * In a trace converted from another trainer's rollouts: the reward that trainer gave the
   * episode (and its score when it reported one), whose parts this project did not compute.
   */
  sourceReward?: {
    reward: number;
    score: number | null;
    /** The parts of the reward the source logged when not all of them (RewardBreakdown's names); a part not logged is absent, not 0. */
    parts?: Partial<Record<Exclude<keyof RewardBreakdown, 'reward'>, number>>;
  };
}

/** The episode's reward as recorded: this project's, else the source trainer's; null when none. */
export function recordedReward(t: Pick<EpisodeTrace, 'reward' | 'sourceReward'>): number | null {
  return t.reward?.reward ?? t.sourceReward?.reward ?? null;
}

/**
 * The trace as the trainer writes it (traces.jsonl, the page's rollout table): the rollout's
 * trace with its reward and each context's credit added, `credits[j]` for `contexts[j]`.
 */
export function scoredTrace(e: { trace: EpisodeTrace; reward: RewardBreakdown; credits: readonly ContextCredit[] }): EpisodeTrace {
  const { trace, reward, credits } = e;
  if (credits.length !== trace.contexts.length) throw new Error(`scoredTrace: ${credits.length} credits for ${trace.contexts.length} contexts`);
  return { ...trace, contexts: trace.contexts.map((c, j) => ({ ...c, credit: credits[j] })), reward };
}

export function countTokens(contexts: readonly ContextTrace[]): TokenCounts {
  const root = contexts.filter((c) => c.role === 'root').reduce((n, c) => n + c.generatedTokens, 0);
  const longest: number[] = [];
  let clonesTotal = 0;
  for (const c of contexts) {
    if (c.role !== 'clone' || c.round === null) continue;
    clonesTotal += c.generatedTokens;
    longest[c.round] = Math.max(longest[c.round] ?? 0, c.generatedTokens);
  }
  const longestClonePerRound = Array.from(longest, (x) => x ?? 0);
  const criticalPath = root + longestClonePerRound.reduce((a, b) => a + b, 0);
  return { root, clonesTotal, longestClonePerRound, criticalPath, total: root + clonesTotal };
}
