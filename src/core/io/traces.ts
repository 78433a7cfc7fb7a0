/**
 * Reading and writing episode traces as JSONL (docs/FORMATS.md). Reading validates every
 * line and names the line and field that is wrong; nothing is half-loaded.
 */
import { VIOLATIONS } from '../protocol/violations';
import { firstJsonObject, jsonLines } from './jsonl';
import { type ContextTrace, type EpisodeTrace, TRACE_SCHEMA } from '../rollout/trace';
import { TEXT_TRACE_SCHEMA, checkTextTrace, episodeTraceOfText } from '../rollout/textTrace';

/** The parts a converted trace's sourceReward may carry (RewardBreakdown's names). */
const SOURCE_PARTS = new Set(['score', 'rootPenalty', 'clonePenalty', 'callPenalty', 'budgetPenalty', 'tokenPenalty']);

export function tracesToJsonl(traces: readonly object[]): string {
  return traces.map((t) => JSON.stringify(t)).join('\n') + (traces.length ? '\n' : '');
}

const VIOLATION_SET: ReadonlySet<string> = new Set(VIOLATIONS);

/**
 * Whether a JSONL text is meant as traces: its first row names a `schema` (a trace of this or
 * another version; the reader then says which). A byte-order mark is skipped.
 */
export function looksLikeTraces(text: string): boolean {
  const row = firstJsonObject(text);
  return row !== null && 'schema' in row;
}

export class TraceFormatError extends Error {
  constructor(line: number, message: string) {
    super(`traces: line ${line}: ${message}`);
    this.name = 'TraceFormatError';
  }
}

/**
 * Episode traces, one a line. A real model's text episode (`selfcest-text-episode/1`, as
 * train-lm writes them) is read as the episode trace the views draw (`episodeTraceOfText`: its
 * contexts text-only), its `step` kept and taken as its policy version.
 */
export function parseTracesJsonl(text: string): EpisodeTrace[] {
  return jsonLines(text.replace(/^\uFEFF/, ''), (line, m) => new TraceFormatError(line, m)).map(({ line, value }) => {
    if (isObject(value) && value.schema === TEXT_TRACE_SCHEMA) {
      const t = checkTextTrace(value, (m) => {
        throw new TraceFormatError(line, m);
      });
      const step = Number.isSafeInteger(value.step) ? (value.step as number) : undefined;
      const episode = checkTrace(episodeTraceOfText(t, step ?? 0), line);
      return step === undefined ? episode : ({ ...episode, step } as EpisodeTrace);
    }
    return checkTrace(value, line);
  });
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function checkTrace(obj: unknown, line: number): EpisodeTrace {
  const fail = (msg: string): never => {
    throw new TraceFormatError(line, msg);
  };
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) fail('not a JSON object');
  const t = obj as Record<string, unknown>;
  if (t.schema !== TRACE_SCHEMA) fail(`schema is ${JSON.stringify(t.schema)}, expected "${TRACE_SCHEMA}"`);
  for (const f of ['task', 'problemId', 'prompt', 'truth']) if (typeof t[f] !== 'string') fail(`${f} must be a string`);
  if (t.method !== 'delegate' && t.method !== 'mono') fail('method must be "delegate" or "mono"');
  if (typeof t.correct !== 'boolean') fail('correct must be a boolean');
  if (t.answer !== null && typeof t.answer !== 'string') fail('answer must be a string or null');
  if (!Number.isInteger(t.policyVersion)) fail('policyVersion must be an integer');
  if (!Number.isInteger(t.rounds)) fail('rounds must be an integer');
  if (!Array.isArray(t.contexts) || t.contexts.length === 0) fail('contexts must be a non-empty array');
  (t.contexts as unknown[]).forEach((c, i) => checkContext(c, i, fail));
  if ((t.contexts as ContextTrace[])[0].role !== 'root') fail('contexts[0] must be the root');
  if (!Array.isArray(t.events)) fail('events must be an array');
  if (!Array.isArray(t.violations)) fail('violations must be an array');
  for (const v of t.violations as { violation?: unknown }[]) {
    if (!VIOLATION_SET.has(String(v?.violation))) fail(`unknown violation ${JSON.stringify(v?.violation)}`);
  }
  if (t.sourceReward !== undefined) {
    const r = t.sourceReward as Record<string, unknown> | null;
    if (typeof r !== 'object' || r === null || !Number.isFinite(r.reward) || !(r.score === null || Number.isFinite(r.score)))
      fail('sourceReward must be {reward: number, score: number | null}');
    const parts = r!.parts as Record<string, unknown> | undefined;
    if (
      parts !== undefined &&
      (typeof parts !== 'object' ||
        parts === null ||
        Array.isArray(parts) ||
        !Object.entries(parts).every(([k, v]) => SOURCE_PARTS.has(k) && Number.isFinite(v)))
    ) {
      fail(`sourceReward.parts must map parts of the reward (${[...SOURCE_PARTS].join(', ')}) to numbers`);
    }
  }
  const tok = t.tokens as Record<string, unknown> | undefined;
  if (!tok || !['root', 'clonesTotal', 'criticalPath', 'total'].every((k) => Number.isInteger(tok[k])) || !Array.isArray(tok.longestClonePerRound)) {
    fail('tokens must hold integer root, clonesTotal, criticalPath, total and a longestClonePerRound array');
  }
  return obj as EpisodeTrace;
}

function checkContext(c: unknown, i: number, fail: (m: string) => never): void {
  if (typeof c !== 'object' || c === null) fail(`contexts[${i}] is not an object`);
  const x = c as Record<string, unknown>;
  const at = `contexts[${i}]`;
  if (x.role !== 'root' && x.role !== 'clone') fail(`${at}.role must be "root" or "clone"`);
  if (x.spans !== undefined) return checkTextOnly(x, at, fail);
  if (!Array.isArray(x.tokens) || !(x.tokens as unknown[]).every((v) => Number.isInteger(v))) fail(`${at}.tokens must be an array of integers`);
  if (typeof x.text !== 'string') fail(`${at}.text must be a string`);
  if (typeof x.writers !== 'string' || !/^[pgi]*$/.test(x.writers)) fail(`${at}.writers must be a string of p, g and i`);
  if ((x.writers as string).length !== (x.tokens as unknown[]).length)
    fail(`${at}.writers has ${(x.writers as string).length} letters for ${(x.tokens as unknown[]).length} tokens`);
  const generated = (x.writers as string).split('').filter((w) => w === 'g').length;
  if (x.generatedTokens !== generated) fail(`${at}.generatedTokens is ${String(x.generatedTokens)} but writers mark ${generated}`);
  if (!Array.isArray(x.logprobs) || (x.logprobs as unknown[]).length !== generated) fail(`${at}.logprobs must hold one number per generated token`);
  if (x.violation !== null && !VIOLATION_SET.has(String(x.violation))) fail(`${at}.violation ${JSON.stringify(x.violation)} is not a known class`);
  if (
    x.pieces !== undefined &&
    (!Array.isArray(x.pieces) || x.pieces.length !== (x.tokens as unknown[]).length || !x.pieces.every((p) => typeof p === 'string'))
  )
    fail(`${at}.pieces must hold one string per token (each token's own text)`);
}

/**
 * A text-only context (`spans` given): its spans must spell `text`, it carries no token ids
 * (`tokens`, `writers`, `logprobs` absent or empty, filled in as empty) and counts its
 * generated tokens itself.
 */
function checkTextOnly(x: Record<string, unknown>, at: string, fail: (m: string) => never): void {
  if (!Array.isArray(x.spans)) fail(`${at}.spans must be an array of {writer, text}`);
  const spans = x.spans as unknown[];
  spans.forEach((s, k) => {
    const span = s as Record<string, unknown> | null;
    if (typeof span !== 'object' || span === null || !['p', 'g', 'i'].includes(String(span.writer)) || typeof span.text !== 'string') {
      fail(`${at}.spans[${k}] must be {writer: "p" | "g" | "i", text: string}`);
    }
  });
  if (typeof x.text !== 'string') fail(`${at}.text must be a string`);
  if (spans.map((s) => (s as { text: string }).text).join('') !== x.text) fail(`${at}.spans do not spell its text`);
  for (const f of ['tokens', 'logprobs'] as const) {
    if (x[f] !== undefined && !(Array.isArray(x[f]) && (x[f] as unknown[]).length === 0))
      fail(`${at}.${f} must be absent or empty in a text-only context (it has spans)`);
  }
  if (x.writers !== undefined && x.writers !== '') fail(`${at}.writers must be absent or empty in a text-only context (it has spans)`);
  if (!Number.isInteger(x.generatedTokens) || (x.generatedTokens as number) < 0) fail(`${at}.generatedTokens must be an integer ≥ 0`);
  if (x.violation !== null && !VIOLATION_SET.has(String(x.violation))) fail(`${at}.violation ${JSON.stringify(x.violation)} is not a known class`);
  x.tokens = [];
  x.writers = '';
  x.logprobs = [];
}
