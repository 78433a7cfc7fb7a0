/**
 * Read back a verl run: rollout records of its agent loop (one JSON object per root or clone
 * sample) → episode traces in this project's schema (docs/FORMATS.md), text-only, so that the
 * page and `compare` show a real model's run as delegation trees and curves.
 *
 * A record (docs/FORMATS.md, "verl rollout records", gives every field): the rows the exported
 * hook selfcest_dump.py writes (verl's input, output, gts, score, step with request_id,
 * parent_request_id, clone_label, clone_objective, response_mask_tokens, data_source and the
 * reward's parts in reward_extra_info), or rows of the older layout (prompt, response or text, a
 * response_mask array, ground_truth, reward). A clone_label "turn<N>" (optionally
 * "turn<N>_clone<K>") names the spawn call that started the clone; any other label (a name the
 * root chose) makes the clone a round of its own.
 *
 * What cannot be recovered is left out, never invented: token ids (the source's tokenizer is not
 * ours), per-token writers inside a response beyond the tool-response blocks, and the parts of a
 * reward the source did not report (`sourceReward` holds what it did).
 */
import type { Violation } from '../protocol/violations';
import type { RewardBreakdown } from '../rl/reward';
import { jsonLines } from '../io/jsonl';
import { VOCAB } from '../tokenizer/vocab';
import { type ContextTrace, type EpisodeEvent, type EpisodeTrace, type TextSpan, TRACE_SCHEMA, countTokens } from '../rollout/trace';

/** An answer is the text after the last marker, to the end of its line. */
export const ANSWER_MARKER = 'Answer:';
const TOOL_RESPONSE = /<tool_response>[\s\S]*?<\/tool_response>/g;
/** A spawn call, closed or cut off by the length limit. */
const TOOL_CALL = /<tool_call>[\s\S]*?(?:<\/tool_call>|$)/g;
/** `turn<N>`, optionally with a clone index after it (`turn0_clone2`) that orders the clones of one call. */
const TURN = /turn(\d+)(?:\D+(\d+))?/;

export class VerlRecordError extends Error {
  constructor(where: string, message: string) {
    super(`verl rollouts: ${where}: ${message}`);
    this.name = 'VerlRecordError';
  }
}

interface VerlRecord {
  line: number;
  /** Where it was read: "line N", or "FILE: line N". */
  where: string;
  requestId: string;
  parent: string | null;
  prompt: string;
  response: string;
  generated: number;
  round: number | null;
  /** Index of the clone within its call, when the label gives one. */
  index: number | null;
  /** What the root asked of the clone (clone_objective), when the record carries it. */
  objective: string | null;
  step: number | null;
  task: string | null;
  truth: string | null;
  reward: number | null;
  score: number | null;
  answer: string | null | undefined;
  budget: number | null;
  /** The parts of the reward, when the record carries all of selfcest_reward.py's (at the top or in reward_extra_info). */
  parts: RewardBreakdown | null;
  /** The parts it carries when not all are there, by the trace's names (missing ones absent, never 0). */
  someParts: Partial<Record<PartName, number>>;
}

/** selfcest_reward.py's names of the reward's parts → the trace's. */
const PARTS = {
  answer_score: 'score',
  root_penalty: 'rootPenalty',
  clone_penalty: 'clonePenalty',
  call_penalty: 'callPenalty',
  budget_penalty: 'budgetPenalty',
} as const;
/** A part that files written before it existed do not log (read as absent, not as an error). */
const OPTIONAL_PARTS = { token_penalty: 'tokenPenalty' } as const;

/** A part of the reward by the trace's name (RewardBreakdown's fields but the total). */
export type PartName = (typeof PARTS)[keyof typeof PARTS] | (typeof OPTIONAL_PARTS)[keyof typeof OPTIONAL_PARTS];

/** The numeric parts a record carries, at the top or in reward_extra_info, by the trace's names. */
function loggedParts(r: Record<string, unknown>): Partial<Record<PartName, number>> {
  const extra = r.reward_extra_info !== null && typeof r.reward_extra_info === 'object' ? (r.reward_extra_info as Record<string, unknown>) : {};
  const value = (k: string) => (typeof r[k] === 'number' ? r[k] : extra[k]);
  const out: Partial<Record<PartName, number>> = {};
  for (const [from, to] of [...Object.entries(PARTS), ...Object.entries(OPTIONAL_PARTS)] as [string, PartName][]) {
    const v = value(from);
    if (typeof v === 'number' && Number.isFinite(v)) out[to] = v;
  }
  return out;
}

/** The full breakdown when every required part is there, else null. */
function partsOf(parts: Partial<Record<PartName, number>>, reward: number | null): RewardBreakdown | null {
  if (reward === null || !Object.values(PARTS).every((k) => parts[k] !== undefined)) return null;
  return { reward, ...parts } as RewardBreakdown;
}

/**
 * The answer a response gives: after its last `Answer:`, to the end of that line, chat-template
 * tags removed; without a marker, a playground answer block (`<ans>…<eos>`); else null. The
 * exported reward (selfcest_reward.py, answer_text) reads answers by the same rule.
 */
export function answerOf(text: string): string | null {
  const at = text.lastIndexOf(ANSWER_MARKER);
  if (at < 0) return answerBlock(text);
  const rest = text.slice(at + ANSWER_MARKER.length);
  const end = rest.indexOf('\n');
  const answer = (end < 0 ? rest : rest.slice(0, end)).replace(TAGS, '').trim();
  return answer === '' ? null : answer;
}

const TAGS = /<\|[^|]*\|>|<\/?[a-z_]+>/g;
const SPECIAL_TEXT = new RegExp(
  VOCAB.filter((t) => t.length > 1)
    .map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('|'),
);

/** The last complete `<ans>…<eos>` block, when it holds no special token. */
function answerBlock(text: string): string | null {
  const end = text.lastIndexOf('<eos>');
  const start = end < 0 ? -1 : text.lastIndexOf('<ans>', end);
  if (start < 0) return null;
  const inner = text.slice(start + '<ans>'.length, end);
  return inner !== '' && !SPECIAL_TEXT.test(inner) ? inner : null;
}

/** What the model wrote of a response, less its spawn calls (closed or cut off) and the injected tool responses (an `Answer:` in an objective or a clone's answer is not the root's). */
function modelText(response: string): string {
  return response.replace(TOOL_RESPONSE, '\n').replace(TOOL_CALL, '\n');
}

/** A response split into what the model wrote (g) and the tool responses the loop injected (i). */
export function responseSpans(response: string): TextSpan[] {
  const spans: TextSpan[] = [];
  let at = 0;
  for (const m of response.matchAll(TOOL_RESPONSE)) {
    if (m.index > at) spans.push({ writer: 'g', text: response.slice(at, m.index) });
    spans.push({ writer: 'i', text: m[0] });
    at = m.index + m[0].length;
  }
  if (at < response.length) spans.push({ writer: 'g', text: response.slice(at) });
  return spans;
}

function parseRecord(obj: unknown, line: number, where = `line ${line}`): VerlRecord {
  const fail = (m: string): never => {
    throw new VerlRecordError(where, m);
  };
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) fail('not a JSON object');
  const r = obj as Record<string, unknown>;
  const str = (k: string): string | null => {
    if (r[k] === undefined || r[k] === null) return null;
    if (typeof r[k] !== 'string') fail(`${k} must be a string`);
    return r[k] as string;
  };
  const num = (k: string): number | null => {
    if (r[k] === undefined || r[k] === null) return null;
    if (typeof r[k] !== 'number' || !Number.isFinite(r[k])) fail(`${k} must be a finite number`);
    return r[k] as number;
  };
  const requestId = str('request_id') ?? fail('request_id is missing');
  const response = str('response') ?? str('text') ?? str('output') ?? fail('output (or response, or text) is missing');
  let generated: number;
  if (r.response_mask !== undefined && r.response_mask !== null) {
    const mask = r.response_mask;
    if (!Array.isArray(mask) || !mask.every((v) => v === 0 || v === 1)) fail('response_mask must be an array of 0 and 1 (1: a token the model generated)');
    generated = (mask as number[]).reduce((a, b) => a + b, 0);
  } else {
    const n = num('response_mask_tokens') ?? fail('response_mask_tokens (or a response_mask array) is missing: the tokens the model generated');
    if (!(Number.isInteger(n) && n >= 0)) fail('response_mask_tokens must be an integer ≥ 0');
    generated = n;
  }
  const label = str('clone_label') ?? str('clone_id');
  // A label that names no turn is a name the root gave the clone: the clone is a round of its own.
  const turn = label === null ? null : TURN.exec(label);
  const info = r.extra_info !== null && typeof r.extra_info === 'object' ? (r.extra_info as Record<string, unknown>) : {};
  const dataSource = str('data_source');
  const step = num('step') ?? num('global_step');
  if (step !== null && !(Number.isInteger(step) && step >= 0)) fail('step must be an integer ≥ 0');
  const budget = num('budget');
  if (budget !== null && !(Number.isInteger(budget) && budget > 0)) fail('budget must be an integer > 0');
  const rm = r.reward_model as Record<string, unknown> | undefined;
  let truth = r.ground_truth ?? r.gts ?? rm?.ground_truth ?? null;
  if (Array.isArray(truth) && truth.length === 1) truth = truth[0];
  if (truth !== null && typeof truth !== 'string' && typeof truth !== 'number') fail('ground_truth (gts) must be a string or a number');
  if (r.answer !== undefined && r.answer !== null && typeof r.answer !== 'string') fail('answer must be a string or null');
  const objective = str('clone_objective');
  // A record with `reward` gives the reward there and may give a score beside it; verl's dump gives
  // the reward as `score` (the sum of its token-level scores), and the answer score among the parts.
  const someParts = loggedParts(r);
  const hasReward = num('reward') !== null;
  const reward = hasReward ? num('reward') : num('score');
  const score = hasReward ? num('score') : (someParts.score ?? null);
  return {
    line,
    where,
    requestId,
    parent: str('parent_request_id'),
    prompt: str('prompt') ?? str('input') ?? '',
    response,
    generated,
    round: turn ? Number(turn[1]) : null,
    index: turn?.[2] !== undefined ? Number(turn[2]) : null,
    objective,
    step,
    // The task: the export's extra_info.task, else the data_source less the export's `selfcest_` prefix.
    task: typeof info.task === 'string' ? info.task : (dataSource?.replace(/^selfcest_/, '') ?? null),
    truth: truth === null ? null : String(truth),
    reward,
    score,
    answer: r.answer as string | null | undefined,
    budget,
    parts: partsOf(someParts, reward),
    someParts,
  };
}

/** Parse the records of a JSONL file; the first bad line refuses the file, naming line and field (and the file, given its name). */
export function parseVerlRecords(text: string, file?: string): VerlRecord[] {
  const where = (line: number) => (file === undefined ? `line ${line}` : `${file}: line ${line}`);
  return jsonLines(text, (line, m) => new VerlRecordError(where(line), m)).map(({ line, value }) => parseRecord(value, line, where(line)));
}

/** The records of several files (a dump's `<step>.jsonl`), in the order given, each error naming its file. */
export function parseVerlFiles(files: readonly { name: string; text: string }[]): VerlRecord[] {
  return files.flatMap((f) => parseVerlRecords(f.text, f.name));
}

/** A dump's step files in step order: `<step>.jsonl` by number, other names after them by name. */
export function stepFileOrder(a: string, b: string): number {
  const step = (n: string) => (/^\d+\.jsonl$/.test(n.split('/').pop()!) ? Number(n.split('/').pop()!.slice(0, -6)) : Infinity);
  return step(a) - step(b) || (a < b ? -1 : a > b ? 1 : 0);
}

/** Whether a JSON row is a verl rollout record (a request_id and the tokens generated, as an array or a count). */
export function isVerlRecord(row: Record<string, unknown>): boolean {
  return 'request_id' in row && ('response_mask' in row || 'response_mask_tokens' in row);
}

export interface ConvertOptions {
  /** The task name written into each trace when the records carry no data_source. */
  task?: string;
}

/** One trace per root record, its clones (records naming it as parent) as contexts 1..n. */
export function verlRecordsToTraces(records: readonly VerlRecord[], opts: ConvertOptions = {}): (EpisodeTrace & { step?: number })[] {
  const byId = new Map<string, VerlRecord>();
  for (const r of records) {
    if (byId.has(r.requestId))
      throw new VerlRecordError(r.where, `request_id ${JSON.stringify(r.requestId)} is given twice (also ${byId.get(r.requestId)!.where})`);
    byId.set(r.requestId, r);
  }
  const clonesOf = new Map<string, VerlRecord[]>();
  for (const r of records) {
    if (r.parent === null) continue;
    const parent = byId.get(r.parent);
    if (!parent) throw new VerlRecordError(r.where, `parent_request_id ${JSON.stringify(r.parent)} names no record in the file`);
    if (parent.parent !== null)
      throw new VerlRecordError(r.where, `its parent ${JSON.stringify(r.parent)} is itself a clone: clones of clones are not part of the protocol (depth 1)`);
    const list = clonesOf.get(r.parent);
    if (list) list.push(r);
    else clonesOf.set(r.parent, [r]);
  }
  return records.filter((r) => r.parent === null).map((root) => episodeOf(root, clonesOf.get(root.requestId) ?? [], opts));
}

function episodeOf(root: VerlRecord, clones: readonly VerlRecord[], opts: ConvertOptions): EpisodeTrace & { step?: number } {
  // Clones without a turn label are taken as one call each, in file order, after the labelled ones.
  const labelled = Math.max(-1, ...clones.map((c) => c.round ?? -1)) + 1;
  let extra = 0;
  const placed = clones.map((c) => ({ c, round: c.round ?? labelled + extra++ }));
  // By call, then by the label's clone index where given; else in file order (the sort is stable).
  placed.sort((a, b) => a.round - b.round || (a.c.index ?? 0) - (b.c.index ?? 0));
  // Rounds renumbered densely: turn labels may skip calls that started no clone.
  const rounds = [...new Set(placed.map((p) => p.round))];
  const violations: EpisodeTrace['violations'] = [];
  const rootAnswer = root.answer !== undefined ? root.answer : answerOf(modelText(root.response));
  const contexts: ContextTrace[] = [context(root, 0, null, null, rootAnswer, rootAnswer === null ? 'root_no_answer' : null)];
  const events: EpisodeEvent[] = [];
  placed.forEach(({ c, round }, k) => {
    const answer = c.answer !== undefined ? c.answer : answerOf(modelText(c.response));
    const r = rounds.indexOf(round);
    contexts.push(context(c, k + 1, 0, r, answer, answer === null ? 'clone_no_answer' : null));
  });
  rounds.forEach((_, r) => {
    const ids = contexts.filter((x) => x.round === r).map((x) => x.id);
    events.push({ kind: 'spawn', round: r, atToken: -1, clones: ids });
    events.push({ kind: 'join', round: r, atToken: -1, answers: ids.map((id) => contexts[id].answer) });
  });
  for (const c of contexts) if (c.violation) violations.push({ violation: c.violation, context: c.id, detail: c.violationDetail! });
  const truth = root.truth ?? '';
  const trace: EpisodeTrace & { step?: number } = {
    ...(root.step !== null ? { step: root.step } : {}),
    schema: TRACE_SCHEMA,
    policyVersion: root.step ?? 0,
    task: root.task ?? opts.task ?? 'verl',
    problemId: root.requestId,
    prompt: root.prompt,
    truth,
    method: 'delegate',
    answer: rootAnswer,
    correct: rootAnswer !== null && root.truth !== null && rootAnswer === truth,
    rounds: rounds.length,
    contexts,
    events,
    violations,
    tokens: countTokens(contexts),
  };
  // The parts when the source logged all of this project's reward (selfcest_reward.py), else what it reported.
  if (root.parts) trace.reward = root.parts;
  else if (root.reward !== null) {
    trace.sourceReward = { reward: root.reward, score: root.score };
    if (Object.keys(root.someParts).length > 0) trace.sourceReward.parts = root.someParts;
  }
  return trace;
}

function context(r: VerlRecord, id: number, parent: number | null, round: number | null, answer: string | null, violation: Violation | null): ContextTrace {
  const spans: TextSpan[] = [...(r.prompt ? [{ writer: 'p' as const, text: r.prompt }] : []), ...responseSpans(r.response)];
  const detail =
    violation === 'root_no_answer'
      ? `the root's response has no "${ANSWER_MARKER}" line`
      : violation === 'clone_no_answer'
        ? `the clone's response has no "${ANSWER_MARKER}" line`
        : null;
  return {
    id,
    role: parent === null ? 'root' : 'clone',
    parent,
    round,
    subtask: parent === null ? null : (r.objective ?? r.prompt),
    budget: r.budget,
    tokens: [],
    text: spans.map((s) => s.text).join(''),
    writers: '',
    logprobs: [],
    generatedTokens: r.generated,
    answer,
    violation,
    violationDetail: detail,
    spans,
  };
}
