/**
 * The trace of a real model's text episode (`selfcest-text-episode/1`, docs/FORMATS.md): its
 * shape, its check as read from a file, the same episode as an episode trace whose contexts are
 * text-only (what the views draw), and a terminal tree. Pure and light: the page's main thread
 * reads these without the model code (runs recorded before `train --model` wrote them).
 */
import type { Violation } from '../protocol/violations';
import { VIOLATIONS } from '../protocol/violations';
import { type ContextCredit, type EpisodeTrace, type RewardBreakdown, TRACE_SCHEMA, type TokenCounts, type Writer } from './trace';

/** The schema of a text episode's trace: what train-lm writes to traces.jsonl and views read. */
export const TEXT_TRACE_SCHEMA = 'selfcest-text-episode/1';

/** One context of a text episode's trace, with each token's own text (the model's token strings). */
export interface TextContextTrace {
  role: 'root' | 'clone';
  /** A clone's objective (its user message); null for the root. */
  objective: string | null;
  round: number;
  budget: number | null;
  overBudget: boolean;
  answer: string | null;
  violation: Violation | null;
  generatedTokens: number;
  tokens: number[];
  /** Each token decoded alone (special tokens included). */
  pieces: string[];
  writers: string;
  /** The context's part of the update, when the episode was trained on. */
  credit?: ContextCredit;
}

/** How a text episode went, as the loop records it and its trace keeps it. */
export interface TextEpisodeOutcome {
  answer: string | null;
  rounds: number;
  toolCalls: number;
  repairedToolCalls: number;
  droppedToolCalls: number;
  rejectedObjectives: number;
  /** Every violation, with the context (index into `contexts`) and what happened. */
  violations: { violation: Violation; context: number; detail: string }[];
}

export interface TextEpisodeTrace extends TextEpisodeOutcome {
  schema: typeof TEXT_TRACE_SCHEMA;
  /** The task's name (its verdict and prompts). */
  task: string;
  problem: { id: string; prompt: string; truth: string };
  correct: boolean;
  reward?: RewardBreakdown;
  contexts: TextContextTrace[];
}

/**
 * A text episode's trace as an indented tree for a terminal: the root's turns, each round's
 * clones under the turn that started them with their objective, answer and violation, and the
 * root's answer. Prompt text is left out; what the model wrote is quoted, what the loop injected
 * is summarised.
 */
export function formatTextEpisode(t: TextEpisodeTrace): string {
  const quote = (s: string) => JSON.stringify(s.length > 400 ? `${s.slice(0, 400)}…` : s);
  const spans = (c: TextContextTrace) => {
    // Runs of one writer: [writer, text].
    const out: [string, string][] = [];
    c.pieces.forEach((p, i) => {
      const w = c.writers[i];
      if (out.length > 0 && out[out.length - 1][0] === w) out[out.length - 1][1] += p;
      else out.push([w, p]);
    });
    return out;
  };
  const lines = [`problem ${t.problem.id}: ${t.problem.prompt} (truth ${t.problem.truth})`];
  const root = t.contexts[0];
  let turn = 0;
  for (const [w, text] of spans(root)) {
    if (w === 'p') continue;
    if (w === 'i') {
      lines.push(`  [loop] ${quote(text)}`);
      continue;
    }
    turn++;
    lines.push(`  root turn ${turn}: ${quote(text)}`);
    for (const c of t.contexts.filter((x) => x.role === 'clone' && x.round === turn)) {
      const said = spans(c)
        .filter(([cw]) => cw === 'g')
        .map(([, s]) => s)
        .join('');
      lines.push(
        `    clone (budget ${c.budget}, ${c.generatedTokens} tokens${c.violation ? `, ${c.violation}` : ''}): ${quote(c.objective ?? '')} -> ${quote(said)}; answer ${c.answer === null ? 'none' : quote(c.answer)}`,
      );
    }
  }
  lines.push(
    `  answer ${t.answer === null ? 'none' : quote(t.answer)}: ${t.correct ? 'correct' : 'wrong'}; ${t.rounds} round(s), ${t.contexts.length - 1} clone(s), ${t.toolCalls} call(s) (${t.repairedToolCalls} repaired, ${t.droppedToolCalls} dropped)` +
      (t.reward ? `; reward ${t.reward.reward.toFixed(3)}` : ''),
  );
  for (const v of t.violations) lines.push(`  violation ${v.violation} (context ${v.context}): ${v.detail}`);
  return lines.join('\n');
}

/**
 * The tokens a text episode's contexts generated (the root first; clones by the round, 1, 2, …,
 * that started them), as an episode trace counts them: what the reward, the frontier and the
 * views read.
 */
export function textTokenCounts(contexts: readonly { role: 'root' | 'clone'; round: number; generatedTokens: number }[], rounds: number): TokenCounts {
  const clones = contexts.filter((c) => c.role === 'clone');
  const longestClonePerRound = Array.from({ length: rounds }, (_, r) =>
    clones.filter((c) => c.round === r + 1).reduce((m, c) => Math.max(m, c.generatedTokens), 0),
  );
  const root = contexts[0]?.generatedTokens ?? 0;
  const clonesTotal = clones.reduce((n, c) => n + c.generatedTokens, 0);
  return { root, clonesTotal, longestClonePerRound, criticalPath: root + longestClonePerRound.reduce((a, b) => a + b, 0), total: root + clonesTotal };
}

/**
 * A text episode as an episode trace (trace.ts) whose contexts are text-only: each token one span
 * with its writer, so the views that draw episodes (tree, rollout table, context view) show the
 * model's own token strings. `policyVersion`: the GRPO steps the weights had taken.
 */
export function episodeTraceOfText(t: TextEpisodeTrace, policyVersion: number): EpisodeTrace {
  const detail = (j: number) => t.violations.find((v) => v.context === j)?.detail ?? null;
  return {
    schema: TRACE_SCHEMA,
    policyVersion,
    task: t.task,
    problemId: t.problem.id,
    prompt: t.problem.prompt,
    truth: t.problem.truth,
    method: 'delegate',
    answer: t.answer,
    correct: t.correct,
    rounds: t.rounds,
    contexts: t.contexts.map((c, j) => ({
      id: j,
      role: c.role,
      parent: c.role === 'root' ? null : 0,
      round: c.role === 'root' ? null : c.round - 1,
      subtask: c.objective,
      budget: c.budget,
      tokens: [],
      text: c.pieces.join(''),
      writers: '',
      logprobs: [],
      generatedTokens: c.generatedTokens,
      answer: c.answer,
      violation: c.violation,
      violationDetail: detail(j),
      ...(c.credit ? { credit: { ...c.credit } } : {}),
      spans: c.pieces.map((text, k) => ({ writer: c.writers[k] as Writer, text })),
    })),
    events: [],
    violations: t.violations.map((v) => ({ ...v })),
    tokens: textTokenCounts(t.contexts, t.rounds),
    ...(t.reward ? { reward: { ...t.reward } } : {}),
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const VIOLATION_SET: ReadonlySet<string> = new Set(VIOLATIONS);

/**
 * A text episode trace read from a file, checked field by field; throws `fail(message)` naming
 * the field. (The episode trace made of it is checked again as any trace is.)
 */
export function checkTextTrace(x: unknown, fail: (message: string) => never): TextEpisodeTrace {
  if (!isObject(x)) return fail('a text episode trace must be a JSON object');
  const str = (v: unknown) => typeof v === 'string';
  const count = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;
  if (x.schema !== TEXT_TRACE_SCHEMA) fail(`schema must be ${JSON.stringify(TEXT_TRACE_SCHEMA)}`);
  if (!str(x.task)) fail("task must be a string (the task's name)");
  const p = x.problem;
  if (!isObject(p) || !str(p.id) || !str(p.prompt) || !str(p.truth)) fail('problem must be {id, prompt, truth}, all strings');
  if (!(x.answer === null || str(x.answer))) fail('answer must be a string or null');
  if (typeof x.correct !== 'boolean') fail('correct must be true or false');
  for (const k of ['rounds', 'toolCalls', 'repairedToolCalls', 'droppedToolCalls', 'rejectedObjectives'] as const)
    if (!count(x[k])) fail(`${k} must be a count ≥ 0`);
  if (!Array.isArray(x.contexts) || x.contexts.length === 0) fail('contexts must be a non-empty list, the root first');
  const contexts = x.contexts as unknown[];
  contexts.forEach((c, j) => {
    const at = `contexts[${j}]`;
    if (!isObject(c)) fail(`${at} must be an object`);
    const ctx = c as Record<string, unknown>;
    if (ctx.role !== (j === 0 ? 'root' : 'clone')) fail(`${at}.role must be ${j === 0 ? '"root"' : '"clone"'}`);
    if (!Array.isArray(ctx.tokens) || !ctx.tokens.every((t) => Number.isSafeInteger(t) && t >= 0)) fail(`${at}.tokens must be a list of token ids`);
    if (!Array.isArray(ctx.pieces) || !ctx.pieces.every(str) || ctx.pieces.length !== (ctx.tokens as unknown[]).length)
      fail(`${at}.pieces must be one string per token`);
    if (!str(ctx.writers) || !/^[pgi]*$/.test(ctx.writers as string) || (ctx.writers as string).length !== (ctx.tokens as unknown[]).length) {
      fail(`${at}.writers must be one letter (p, g or i) per token`);
    }
    if (!count(ctx.generatedTokens) || ctx.generatedTokens !== [...(ctx.writers as string)].filter((w) => w === 'g').length) {
      fail(`${at}.generatedTokens must count its writers' g`);
    }
    if (!Number.isSafeInteger(ctx.round) || (ctx.round as number) < 0) fail(`${at}.round must be an integer ≥ 0`);
    if (!(ctx.violation === null || VIOLATION_SET.has(ctx.violation as string))) fail(`${at}.violation must be a violation class or null`);
  });
  if (!Array.isArray(x.violations)) fail('violations must be a list');
  return x as unknown as TextEpisodeTrace;
}
