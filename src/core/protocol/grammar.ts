/**
 * The delegation protocol at token level: incremental parsers for root and clone output,
 * clone prompts, join injection and answer extraction. See docs/PROTOCOL.md.
 *
 * Model output never throws here: every token moves a parser to a new state or ends the
 * context with an answer or a named violation.
 */
import { BUDGET_BUCKETS, CHAR_TOKENS, T, VOCAB, budgetOfToken, tokenId } from '../tokenizer/vocab';
import type { Violation } from './violations';

export const PROTOCOL_VERSION = 1;

export interface ProtocolLimits {
  /** Clones allowed in one round: spawn blocks, each `<ctx>*` counted as the clones it fans out to. */
  maxClonesPerRound: number;
  /** Spawn rounds allowed per episode. */
  maxRounds: number;
  /** Budget buckets a spawn may name (subset of BUDGET_BUCKETS). */
  budgets: readonly number[];
}

export interface SpawnBlock {
  /** Subtask tokens as the root wrote them (may hold `<ctx>` key references). */
  subtask: number[];
  budget: number;
}

export type ParseEvent =
  | { kind: 'continue' }
  | { kind: 'join'; blocks: SpawnBlock[] }
  | { kind: 'final'; answer: string }
  | { kind: 'violation'; violation: Violation; detail: string };

const CHAR_IDS: ReadonlySet<number> = new Set(CHAR_TOKENS.map((c) => tokenId(c)));

/** Tokens only the runtime writes; a model that emits one has broken the protocol. */
export const RUNTIME_ONLY: ReadonlySet<number> = new Set([
  T.pad,
  T.root,
  T.clone,
  T.sep,
  T.ret,
  T.fail,
  T.resume,
  ...['<unused0>', '<unused1>', '<unused2>', '<unk>'].map(tokenId),
]);

/** Tokens of the spawn grammar (forbidden to clones and masked out for monolithic sampling). */
export const SPAWN_GRAMMAR: ReadonlySet<number> = new Set([T.spawn, T.join, T.ctx, ...BUDGET_BUCKETS.map((b) => tokenId(`<b${b}>`))]);

const CONTINUE: ParseEvent = { kind: 'continue' };
const violation = (v: Violation, detail: string): ParseEvent => ({ kind: 'violation', violation: v, detail });
const name = (id: number) => VOCAB[id] ?? `#${id}`;

/**
 * The root's parser. Feed every token the root generates; after a 'join' event the
 * runtime injects the clone answers and calls `resume()`.
 */
export class RootParser {
  private mode: 'text' | 'spawn' | 'answer' = 'text';
  private blocks: SpawnBlock[] = [];
  private subtask: number[] = [];
  private answer = '';
  private rounds = 0;

  constructor(private readonly limits: ProtocolLimits) {}

  get roundsDone(): number {
    return this.rounds;
  }

  resume(): void {
    this.rounds++;
    this.mode = 'text';
    this.blocks = [];
  }

  feed(id: number): ParseEvent {
    if (RUNTIME_ONLY.has(id)) return violation('reserved_token', `root wrote ${name(id)}`);
    if (this.mode === 'answer') return this.feedAnswer(id);
    if (this.mode === 'spawn') return this.feedSpawn(id);
    if (CHAR_IDS.has(id)) return CONTINUE;
    switch (id) {
      case T.spawn:
        if (this.rounds >= this.limits.maxRounds) {
          return violation('too_many_rounds', `spawn after ${this.rounds} rounds (max ${this.limits.maxRounds})`);
        }
        if (this.blocks.length >= this.limits.maxClonesPerRound) {
          return violation('too_many_clones', `more than ${this.limits.maxClonesPerRound} clones in one round`);
        }
        this.mode = 'spawn';
        this.subtask = [];
        return CONTINUE;
      case T.join:
        return this.blocks.length === 0 ? violation('malformed_spawn', 'join without a spawn block') : { kind: 'join', blocks: this.blocks };
      case T.ans:
        if (this.blocks.length > 0) return violation('malformed_spawn', 'answer while spawn blocks wait for a join');
        this.mode = 'answer';
        this.answer = '';
        return CONTINUE;
      case T.eos:
        return violation('root_no_answer', 'root ended without an answer block');
      default:
        return violation('malformed_spawn', `${name(id)} outside a spawn block`);
    }
  }

  private feedSpawn(id: number): ParseEvent {
    if (CHAR_IDS.has(id) || id === T.ctx) {
      this.subtask.push(id);
      return CONTINUE;
    }
    const budget = budgetOfToken(id);
    if (budget === undefined) return violation('malformed_spawn', `spawn block closed by ${name(id)} instead of a budget`);
    if (this.subtask.length === 0) return violation('malformed_spawn', 'spawn block with an empty subtask');
    if (!this.limits.budgets.includes(budget)) {
      return violation('malformed_spawn', `budget ${budget} is not allowed (allowed: ${this.limits.budgets.join(', ')})`);
    }
    this.blocks.push({ subtask: this.subtask, budget });
    this.mode = 'text';
    return CONTINUE;
  }

  private feedAnswer(id: number): ParseEvent {
    if (CHAR_IDS.has(id)) {
      this.answer += VOCAB[id];
      return CONTINUE;
    }
    if (id === T.eos && this.answer.length > 0) return { kind: 'final', answer: this.answer };
    return violation('root_no_answer', id === T.eos ? 'empty answer block' : `${name(id)} inside the answer block`);
  }
}

/** A clone's parser: chain of thought then an answer block; any spawn grammar is a violation. */
export class CloneParser {
  private inAnswer = false;
  private answer = '';

  feed(id: number): ParseEvent {
    if (RUNTIME_ONLY.has(id)) return violation('reserved_token', `clone wrote ${name(id)}`);
    if (SPAWN_GRAMMAR.has(id)) return violation('clone_spawn', `clone wrote ${name(id)}`);
    if (this.inAnswer) {
      if (CHAR_IDS.has(id)) {
        this.answer += VOCAB[id];
        return CONTINUE;
      }
      if (id === T.eos && this.answer.length > 0) return { kind: 'final', answer: this.answer };
      return violation('clone_no_answer', id === T.eos ? 'empty answer block' : `${name(id)} inside the answer block`);
    }
    if (CHAR_IDS.has(id)) return CONTINUE;
    if (id === T.ans) {
      this.inAnswer = true;
      return CONTINUE;
    }
    return violation('clone_no_answer', `clone ended with ${name(id)} before an answer block`);
  }
}

/**
 * The chunk a `<ctx>key` names, or undefined. The key is model output and the context a plain
 * (JSON-serialisable) object, so only its own string entries count: `constructor` or
 * `__proto__` must not find what every object inherits.
 */
export function contextChunk(context: Readonly<Record<string, string>> | undefined, key: string): string | undefined {
  if (context === undefined || !Object.hasOwn(context, key)) return undefined;
  const chunk: unknown = context[key];
  return typeof chunk === 'string' ? chunk : undefined;
}

/** Key characters after `<ctx>`: lowercase letters, digits and '_'. */
const KEY_CHAR = /^[a-z0-9_]$/;

/**
 * A clone's prompt: `<clone>` subtask `<sep>`, with every `<ctx>key` replaced by that
 * chunk of the problem's context. Returns an error string for an unknown or empty key.
 */
export function clonePrompt(
  subtask: readonly number[],
  context: Record<string, string> | undefined,
  encode: (text: string) => number[],
): { tokens: number[] } | { error: string } {
  const out = [T.clone];
  for (let i = 0; i < subtask.length; i++) {
    if (subtask[i] !== T.ctx) {
      out.push(subtask[i]);
      continue;
    }
    let key = '';
    while (i + 1 < subtask.length && KEY_CHAR.test(VOCAB[subtask[i + 1]] ?? '')) key += VOCAB[subtask[++i]];
    if (key === '') return { error: '<ctx> without a key' };
    const chunk = contextChunk(context, key);
    if (chunk === undefined) return { error: `unknown context key ${JSON.stringify(key)}` };
    out.push(...encode(chunk));
  }
  out.push(T.sep);
  return { tokens: out };
}

/** After `<ctx>`, this key stands for every chunk: `<ctx>*` fans a spawn out over the context. */
export const FAN_OUT_KEY = '*';

/**
 * The spawn blocks of a round with fan-outs expanded: a block whose subtask holds `<ctx>*`
 * becomes one block per chunk of the problem's context, in the context's key order, each with
 * `*` replaced by that key (`<spawn><ctx>* q?<b8>` over chunks k1…k6 is the six blocks
 * `<ctx>k1 q?` … `<ctx>k6 q?`, each of budget 8). Every expanded block is a clone like any
 * other (its budget, its length penalty, its gating). Errors: a fan-out without
 * a context, two in one block, or a key character right after `*`.
 */
export function fanOut(blocks: readonly SpawnBlock[], context: Readonly<Record<string, string>> | undefined): { blocks: SpawnBlock[] } | { error: string } {
  const star = tokenId(FAN_OUT_KEY);
  const out: SpawnBlock[] = [];
  for (const block of blocks) {
    const at = block.subtask.findIndex((t, i) => t === T.ctx && block.subtask[i + 1] === star);
    if (at < 0) {
      out.push(block);
      continue;
    }
    if (block.subtask.some((t, i) => i > at && t === T.ctx && block.subtask[i + 1] === star)) return { error: 'more than one <ctx>* in a spawn block' };
    // `<ctx>*1` would read as the keys k11, k21, …: a key character after `*` is malformed.
    const after = block.subtask[at + 2];
    if (after !== undefined && KEY_CHAR.test(VOCAB[after] ?? '')) return { error: `<ctx>* followed by the key character ${JSON.stringify(VOCAB[after])}` };
    // Only keys a `<ctx>key` could name (KEY_CHAR) are fanned out to.
    const keys =
      context === undefined ? [] : Object.keys(context).filter((k) => contextChunk(context, k) !== undefined && [...k].every((c) => KEY_CHAR.test(c)));
    if (keys.length === 0) return { error: '<ctx>* with no context to fan out over' };
    for (const key of keys)
      out.push({ subtask: [...block.subtask.slice(0, at + 1), ...[...key].map((c) => tokenId(c)), ...block.subtask.slice(at + 2)], budget: block.budget });
  }
  return { blocks: out };
}

/** The tokens the runtime writes after a join: each clone's answer (cut) or a failure marker. */
export function joinInjection(answers: readonly (string | null)[], maxChars: number, encode: (text: string) => number[]): number[] {
  const out: number[] = [];
  for (const a of answers) {
    out.push(T.ret);
    if (a === null) out.push(T.fail);
    else out.push(...encode(a.slice(0, maxChars)));
  }
  out.push(T.resume);
  return out;
}

/**
 * The root's prompt: `<root>`, its limit when it is told it (`#<limit> `, e.g. `<root>#48 1+2<sep>`),
 * the task's prompt, `<sep>`.
 */
export function rootPrompt(promptText: string, encode: (text: string) => number[], limit: number | null = null): number[] {
  return [T.root, ...(limit === null ? [] : encode(rootLimitText(limit))), ...encode(promptText), T.sep];
}

/** How a root prompt states its token limit (after `<root>`). */
export const rootLimitText = (limit: number): string => `#${limit} `;

/**
 * The final answer of a finished token sequence: the text of the last complete
 * `<ans> … <eos>` block, or null. For traces and offline checks; the runtime uses the parsers.
 */
export function extractAnswer(tokens: readonly number[]): string | null {
  const end = tokens.lastIndexOf(T.eos);
  if (end < 0) return null;
  const start = tokens.lastIndexOf(T.ans, end);
  if (start < 0 || end === start + 1) return null;
  let s = '';
  for (let i = start + 1; i < end; i++) {
    if (!CHAR_IDS.has(tokens[i])) return null;
    s += VOCAB[tokens[i]];
  }
  return s;
}
