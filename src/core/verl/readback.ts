/**
 * Read back a verl run: rollout records of its agent loop (one JSON object per root or clone
 * sample) → episode traces in this project's schema (docs/FORMATS.md), text-only, so that the
 * page and `compare` show a real model's run as delegation trees and curves.
 *
 * A record (docs/FORMATS.md, "verl rollout records", gives every field):
 *   request_id, parent_request_id (null for a root), prompt, response (or text), response_mask,
 *   clone_label ("turn<N>": the spawn call that started a clone, optionally "turn<N>_clone<K>"),
 *   step, data_source,
 *   ground_truth (or reward_model.ground_truth), reward, score, answer, budget, and the parts of
 *   selfcest_reward.py's reward (answer_score, root_penalty, …) at the top or in reward_extra_info.
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
const TOOL_CALL = /<tool_call>[\s\S]*?<\/tool_call>/g;
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
  requestId: string;
  parent: string | null;
  prompt: string;
  response: string;
  generated: number;
  round: number | null;
  /** Index of the clone within its call, when the label gives one. */
  index: number | null;
  step: number | null;
  task: string | null;
  truth: string | null;
  reward: number | null;
  score: number | null;
  answer: string | null | undefined;
  budget: number | null;
  /** The parts of the reward, when the record carries selfcest_reward.py's (at the top or in reward_extra_info). */
  parts: RewardBreakdown | null;
}

/** selfcest_reward.py's names of the reward's parts → the trace's. */
const PARTS = { answer_score: 'score', root_penalty: 'rootPenalty', clone_penalty: 'clonePenalty', call_penalty: 'callPenalty', budget_penalty: 'budgetPenalty' } as const;
/** A part that files written before it existed do not log (read as absent, not as an error). */
const OPTIONAL_PARTS = { token_penalty: 'tokenPenalty' } as const;

function partsOf(r: Record<string, unknown>, reward: number | null): RewardBreakdown | null {
  const extra = r.reward_extra_info !== null && typeof r.reward_extra_info === 'object' ? (r.reward_extra_info as Record<string, unknown>) : {};
  const value = (k: string) => (typeof r[k] === 'number' ? r[k] : extra[k]);
  if (reward === null || !Object.keys(PARTS).every((k) => Number.isFinite(value(k)))) return null;
  const out: Record<string, number> = { reward };
  for (const [from, to] of Object.entries(PARTS)) out[to] = value(from) as number;
  for (const [from, to] of Object.entries(OPTIONAL_PARTS)) if (Number.isFinite(value(from))) out[to] = value(from) as number;
  return out as unknown as RewardBreakdown;
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
const SPECIAL_TEXT = new RegExp(VOCAB.filter((t) => t.length > 1).map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'));

/** The last complete `<ans>…<eos>` block, when it holds no special token. */
function answerBlock(text: string): string | null {
  const end = text.lastIndexOf('<eos>');
  const start = end < 0 ? -1 : text.lastIndexOf('<ans>', end);
  if (start < 0) return null;
  const inner = text.slice(start + '<ans>'.length, end);
  return inner !== '' && !SPECIAL_TEXT.test(inner) ? inner : null;
}

/** What the model wrote of a response, less its spawn calls and the injected tool responses (an `Answer:` in an objective or a clone's answer is not the root's). */
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

function parseRecord(obj: unknown, line: number): VerlRecord {
  const fail = (m: string): never => {
    throw new VerlRecordError(`line ${line}`, m);
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
  const response = str('response') ?? str('text') ?? fail('response (or text) is missing');
  const mask = r.response_mask;
  if (!Array.isArray(mask) || !mask.every((v) => v === 0 || v === 1)) fail('response_mask must be an array of 0 and 1 (1: a token the model generated)');
  const label = str('clone_label') ?? str('clone_id');
  const turn = label === null ? null : TURN.exec(label);
  if (label !== null && !turn) fail(`clone_label ${JSON.stringify(label)} does not name a turn (turn<N>)`);
  const info = r.extra_info !== null && typeof r.extra_info === 'object' ? (r.extra_info as Record<string, unknown>) : {};
  const dataSource = str('data_source');
  const step = num('step') ?? num('global_step');
  if (step !== null && !(Number.isInteger(step) && step >= 0)) fail('step must be an integer ≥ 0');
  const budget = num('budget');
  if (budget !== null && !(Number.isInteger(budget) && budget > 0)) fail('budget must be an integer > 0');
  const rm = r.reward_model as Record<string, unknown> | undefined;
  let truth = r.ground_truth ?? rm?.ground_truth ?? null;
  if (Array.isArray(truth) && truth.length === 1) truth = truth[0];
  if (truth !== null && typeof truth !== 'string' && typeof truth !== 'number') fail('ground_truth must be a string or a number');
  if (r.answer !== undefined && r.answer !== null && typeof r.answer !== 'string') fail('answer must be a string or null');
  return {
    line,
    requestId,
    parent: str('parent_request_id'),
    prompt: str('prompt') ?? '',
    response,
    generated: (mask as number[]).reduce((a, b) => a + b, 0),
    round: turn ? Number(turn[1]) : null,
    index: turn?.[2] !== undefined ? Number(turn[2]) : null,
    step,
    // The task: the export's extra_info.task, else the data_source less the export's `selfcest_` prefix.
    task: typeof info.task === 'string' ? info.task : dataSource?.replace(/^selfcest_/, '') ?? null,
    truth: truth === null ? null : String(truth),
    reward: num('reward'),
    score: num('score'),
    answer: r.answer as string | null | undefined,
    budget,
    parts: partsOf(r, num('reward')),
  };
}

/** Parse the records of a JSONL file; the first bad line refuses the file, naming line and field. */
export function parseVerlRecords(text: string): VerlRecord[] {
  return jsonLines(text, (line, m) => new VerlRecordError(`line ${line}`, m)).map(({ line, value }) => parseRecord(value, line));
}

export interface ConvertOptions {
  /** The task name written into each trace when the records carry no data_source. */
  task?: string;
}

/** One trace per root record, its clones (records naming it as parent) as contexts 1..n. */
export function verlRecordsToTraces(records: readonly VerlRecord[], opts: ConvertOptions = {}): (EpisodeTrace & { step?: number })[] {
  const byId = new Map<string, VerlRecord>();
  for (const r of records) {
    if (byId.has(r.requestId)) throw new VerlRecordError(`line ${r.line}`, `request_id ${JSON.stringify(r.requestId)} is given twice (also line ${byId.get(r.requestId)!.line})`);
    byId.set(r.requestId, r);
  }
  const clonesOf = new Map<string, VerlRecord[]>();
  for (const r of records) {
    if (r.parent === null) continue;
    const parent = byId.get(r.parent);
    if (!parent) throw new VerlRecordError(`line ${r.line}`, `parent_request_id ${JSON.stringify(r.parent)} names no record in the file`);
    if (parent.parent !== null) throw new VerlRecordError(`line ${r.line}`, `its parent ${JSON.stringify(r.parent)} is itself a clone: clones of clones are not part of the protocol (depth 1)`);
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
  // The parts when the source logged this project's reward (selfcest_reward.py), else what it reported.
  if (root.parts) trace.reward = root.parts;
  else if (root.reward !== null) trace.sourceReward = { reward: root.reward, score: root.score };
  return trace;
}

function context(r: VerlRecord, id: number, parent: number | null, round: number | null, answer: string | null, violation: Violation | null): ContextTrace {
  const spans: TextSpan[] = [...(r.prompt ? [{ writer: 'p' as const, text: r.prompt }] : []), ...responseSpans(r.response)];
  const detail = violation === 'root_no_answer' ? `the root's response has no "${ANSWER_MARKER}" line` : violation === 'clone_no_answer' ? `the clone's response has no "${ANSWER_MARKER}" line` : null;
  return {
    id,
    role: parent === null ? 'root' : 'clone',
    parent,
    round,
    subtask: parent === null ? null : r.prompt,
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
