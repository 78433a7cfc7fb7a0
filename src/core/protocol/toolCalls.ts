/**
 * The reference's text protocol for real models: tool calls in Hermes form, `<tool_call>{"name":
 * …, "arguments": {…}}</tool_call>`, read as the SELFCEST verl fork reads them
 * (verl/experimental/agent_loop/tool_parser.py `HermesToolParser.extract_tool_calls`), and a
 * spawn_clone call's arguments normalised into clone requests as its agent loop does
 * (tool_agent_loop.py `_normalize_clone_requests`, `_normalize_shared_context_keys`).
 *
 * Nothing here throws on what a model writes. A payload that is not valid JSON is repaired
 * (jsonrepair, where the reference uses Python's json_repair) and the call counts as repaired, as
 * the reference counts `tool_json_repair_count`; one that cannot be repaired, or lacks a name or
 * arguments, is dropped with its reason, as the reference logs and skips it.
 */
import { jsonrepair } from 'jsonrepair';

export const TOOL_CALL_START = '<tool_call>';
export const TOOL_CALL_END = '</tool_call>';
export const SPAWN_CLONE = 'spawn_clone';

export interface ToolCall {
  name: string;
  arguments: unknown;
  /** Some part of the payload needed JSON repair. */
  repaired: boolean;
}

export interface DroppedToolCall {
  payload: string;
  reason: string;
}

type Parsed = { ok: true; value: unknown; repaired: boolean } | { ok: false; reason: string };

/** JSON.parse, else a repair (repaired: true), else the reason. */
function parseOrRepair(text: string, what: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(text), repaired: false };
  } catch {
    try {
      return { ok: true, value: JSON.parse(jsonrepair(text)), repaired: true };
    } catch (e) {
      return { ok: false, reason: `${what} is not JSON and cannot be repaired (${(e as Error).message})` };
    }
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The tool calls of a response: none unless the text holds both markers; each complete
 * `<tool_call>…</tool_call>` block parsed (or repaired), in order.
 */
export function extractToolCalls(text: string): { calls: ToolCall[]; dropped: DroppedToolCall[] } {
  const calls: ToolCall[] = [];
  const dropped: DroppedToolCall[] = [];
  if (!text.includes(TOOL_CALL_START) || !text.includes(TOOL_CALL_END)) return { calls, dropped };
  for (const m of text.matchAll(/<tool_call>([\s\S]*?)<\/tool_call>/g)) {
    const payload = m[1];
    const drop = (reason: string) => dropped.push({ payload, reason });
    let p = parseOrRepair(payload, 'the payload');
    if (!p.ok) {
      drop(p.reason);
      continue;
    }
    let repaired = p.repaired;
    let call = p.value;
    if (typeof call === 'string') {
      p = parseOrRepair(call, 'the payload string');
      if (!p.ok) {
        drop(p.reason);
        continue;
      }
      repaired ||= p.repaired;
      call = p.value;
    }
    if (!isObject(call)) {
      drop('the payload is not an object');
      continue;
    }
    const name = call.name;
    let args = call.arguments;
    if (!name || args === undefined || args === null) {
      drop('the call lacks its name or its arguments');
      continue;
    }
    if (typeof args === 'string') {
      p = parseOrRepair(args, 'the arguments');
      if (!p.ok) {
        drop(p.reason);
        continue;
      }
      repaired ||= p.repaired;
      args = p.value;
    }
    calls.push({ name: String(name), arguments: args, repaired });
  }
  return { calls, dropped };
}

export interface CloneRequest {
  /** Position in the call's objectives. */
  index: number;
  instruction: string;
  /** Context keys the clone gets expanded into text (long-context tasks). */
  sharedContextKeys: string[];
  name: string | null;
}

export interface RejectedObjective {
  index: number;
  name: string | null;
  reason: string;
}

/** Shared-context keys as the reference accepts them: a string, a list, or an object's keys / ids / titles. */
export function sharedContextKeys(value: unknown): string[] {
  if (value === null || value === undefined) return [];
  if (typeof value === 'string') return value.trim() === '' ? [] : [value.trim()];
  if (Array.isArray(value))
    return value
      .filter((v) => v !== null && v !== undefined)
      .map((v) => (typeof v === 'string' ? v : JSON.stringify(v)).trim())
      .filter((k) => k !== '');
  if (isObject(value)) {
    for (const field of ['keys', 'ids', 'titles']) if (field in value) return sharedContextKeys(value[field]);
  }
  const key = String(value).trim();
  return key === '' ? [] : [key];
}

/**
 * A spawn_clone call's arguments as clone requests: `objectives` (or `tasks`, or one `objective`),
 * each a string or an object with an instruction (`instruction`, `objective` or `task`) and its own
 * shared context; the call's `shared_context` (or `context`) applies to the rest. What cannot be a
 * request is rejected with the reference's reason.
 */
export function cloneRequests(args: unknown): { requests: CloneRequest[]; rejected: RejectedObjective[] } {
  const requests: CloneRequest[] = [];
  const rejected: RejectedObjective[] = [];
  if (!isObject(args)) return { requests, rejected };
  const base = sharedContextKeys(args.shared_context ?? args.context);
  let raw: unknown = args.objectives || args.tasks;
  if ((raw === undefined || raw === null || raw === '' || raw === 0 || raw === false) && 'objective' in args) raw = [args.objective];
  if (raw === undefined || raw === null || raw === '' || raw === 0 || raw === false) return { requests, rejected };
  if (typeof raw === 'string') raw = [raw];
  if (!Array.isArray(raw)) return { requests, rejected: [{ index: 0, name: null, reason: 'failed due to invalid objectives format' }] };
  const names = Array.isArray(args.names) ? args.names : null;
  raw.forEach((item: unknown, index) => {
    if (typeof item === 'string') {
      const name = names && index < names.length ? String(names[index]) : null;
      const instruction = item.trim();
      if (instruction === '') rejected.push({ index, name, reason: 'failed due to missing instruction' });
      else requests.push({ index, instruction, sharedContextKeys: base, name });
    } else if (isObject(item)) {
      const name = (item.name || item.label || null) as string | null;
      let instruction = item.instruction || item.objective || item.task;
      if (typeof instruction === 'string') instruction = instruction.trim();
      if (!instruction) rejected.push({ index, name, reason: 'failed due to missing instruction' });
      else if (typeof instruction !== 'string') rejected.push({ index, name, reason: 'failed due to invalid instruction type' });
      else {
        const own = item.shared_context ?? item.context;
        requests.push({ index, instruction, sharedContextKeys: own !== undefined && own !== null ? sharedContextKeys(own) : base, name });
      }
    } else rejected.push({ index, name: null, reason: 'failed due to invalid objective type' });
  });
  return { requests, rejected };
}

/** A context key as the reference matches it: trimmed, inner whitespace collapsed, lower case. */
const contextKey = (k: string) => k.trim().split(/\s+/).join(' ').toLowerCase();

/**
 * The text a clone gets for its shared-context keys, as the reference renders it
 * (`_render_shared_context`): each key found (exactly, or by its normalised form) as "[key]" and its
 * text under a heading, the keys not found named; empty without keys.
 */
export function renderSharedContext(keys: readonly string[], context: Readonly<Record<string, string>>): string {
  if (keys.length === 0) return '';
  const names = Object.keys(context);
  if (names.length === 0) return `Shared context requested but no context map is available. Missing keys: ${keys.join(', ')}`;
  const byNormal = new Map(names.map((k) => [contextKey(k), k]));
  const found: [string, string][] = [];
  const missing: string[] = [];
  for (const key of keys) {
    // Own keys only: a key such as "constructor" is not the context's.
    const actual = Object.hasOwn(context, key) ? key : byNormal.get(contextKey(key));
    const text = actual === undefined ? '' : String(context[actual] ?? '').trim();
    if (actual === undefined || text === '') missing.push(actual ?? key);
    else found.push([actual, text]);
  }
  const parts: string[] = [];
  if (found.length > 0) parts.push('Shared context (expanded from keys):', ...found.map(([k, t]) => `[${k}]\n${t}`));
  if (missing.length > 0) parts.push(`Missing context keys: ${missing.join(', ')}`);
  return parts.join('\n\n');
}

/** A clone's user message: its instruction, then its shared context expanded (the reference's `_build_clone_prompt`, tools off). */
export function cloneUserMessage(request: Pick<CloneRequest, 'instruction' | 'sharedContextKeys'>, context: Readonly<Record<string, string>>): string {
  return [request.instruction, renderSharedContext(request.sharedContextKeys, context)].filter((s) => s !== '').join('\n\n');
}

/** The spawn_clone tool as the reference advertises it to the root (its `_build_clone_tool_schema`). */
export const SPAWN_CLONE_TOOL = {
  type: 'function',
  function: {
    name: SPAWN_CLONE,
    description: 'Fork clones of the current model to work on subtasks and report back succinctly.',
    parameters: {
      type: 'object',
      properties: {
        objectives: { type: 'array', description: 'List of independent prompts to spawn clones of in parallel. Engineer carefully.' },
        shared_context: { type: 'array', description: 'Context key(s) from the dataset index to share; the agent loop expands keys into text.' },
      },
      required: ['objectives'],
    },
  },
} as const;
