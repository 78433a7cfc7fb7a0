/**
 * The reference's text protocol as a Protocol (protocol.ts), for a real model under its chat
 * template. The root reads the task with the spawn_clone tool offered and may call it at the end of
 * a turn; each objective becomes a clone, a fresh chat (the clone system prompt and the objective with its
 * shared-context keys expanded) with the run's clone budget (the largest of `budgets`: a call names
 * no budget); the clones' answers come back as one tool message rendered by the template; the root
 * ends with a line "Answer: …".
 *
 * A turn is parsed when it ends (the tokenizer's stop id): tool calls are read from its text
 * (toolCalls.ts). What breaks the protocol is named with the token protocol's violation classes,
 * so reward, credit and gating read both alike. A malformed call, a rejected objective or more
 * objectives than a round allows is recorded and the rest of the round runs, as the reference's
 * agent loop drops what it cannot parse; a turn over the root's limit has no answer.
 */
import type { EpisodeLimits } from '../rollout/config';
import type { TaskName } from '../tasks';
import type { Problem } from '../tasks/types';
import type { ChatMessage, HfTokenizer } from '../tokenizer/hfTokenizer';
import type { CloneEvent, CloneStart, CloneTurns, Protocol, ProtocolNote, RootEvent, RootStart, RootTurns } from './protocol';
import { type TextPrompts, textPrompts } from './prompts';
import { SPAWN_CLONE, SPAWN_CLONE_TOOL, cloneRequests, cloneUserMessage, extractToolCalls } from './toolCalls';

/** What the root is told for a clone that returned no answer. */
export const CLONE_FAILED = 'failed: no answer within the budget';

export type ChatTokenizer = Pick<HfTokenizer, 'chatIds' | 'chatText' | 'decode' | 'encode' | 'stopIds' | 'pieces' | 'prompts'>;

/**
 * The tokens the loop injects after a root's turn: `messages` ending with that turn and its tool
 * message, `tokens` the root's context through the turn. Where the root's own text is what the
 * template renders, everything after it (the tool message and the next generation prompt); else
 * the tool part alone.
 */
export function toolResponseIds(
  tokenizer: Pick<HfTokenizer, 'chatText' | 'decode' | 'encode'>,
  messages: readonly ChatMessage[],
  tokens: readonly number[],
  tools: readonly object[] | undefined,
): number[] {
  const rootText = tokenizer.decode(tokens);
  const withoutTool = tokenizer.chatText(messages.slice(0, -1), false, tools);
  const withTool = tokenizer.chatText(messages, true, tools);
  return tokenizer.encode(withTool.startsWith(rootText) ? withTool.slice(rootText.length) : withTool.slice(withoutTool.length), false);
}

/** Text only the loop may write: the tool-response markers of the chat templates (Qwen's, Hermes'). */
const TOOL_RESPONSE_MARKERS = ['<tool_response>', '</tool_response>'];

export function writesToolResponse(text: string): boolean {
  return TOOL_RESPONSE_MARKERS.some((m) => text.includes(m));
}

/** The text after the last "Answer:" marker, trimmed; null when there is none. */
export function answerOf(text: string): string | null {
  const i = text.lastIndexOf('Answer:');
  if (i < 0) return null;
  const a = text
    .slice(i + 'Answer:'.length)
    .split('\n')[0]
    .trim();
  return a === '' ? null : a;
}

/** A clone's chat before it writes: the clone system prompt of the set and its message. */
export function cloneChat(prompts: TextPrompts, message: string): ChatMessage[] {
  return [
    { role: 'system', content: prompts.cloneSystem },
    { role: 'user', content: message },
  ];
}

/** The one budget of a text clone: the largest bucket the run allows. */
export const textCloneBudget = (limits: Pick<EpisodeLimits, 'budgets'>): number => Math.max(...limits.budgets);

class TextRoot implements RootTurns {
  private rounds = 0;
  /** This turn's tokens so far. */
  private turn: number[] = [];
  private readonly tokens: number[];

  constructor(
    private readonly tokenizer: ChatTokenizer,
    private readonly stop: ReadonlySet<number>,
    private readonly problem: Problem,
    private readonly limits: EpisodeLimits,
    private readonly messages: ChatMessage[],
    private readonly tools: readonly object[] | undefined,
    prompt: readonly number[],
  ) {
    this.tokens = [...prompt];
  }

  get roundsDone(): number {
    return this.rounds;
  }

  feed(id: number): RootEvent {
    this.turn.push(id);
    this.tokens.push(id);
    return this.stop.has(id) ? this.endTurn() : { kind: 'continue' };
  }

  private endTurn(): RootEvent {
    const { tokenizer, limits } = this;
    const notes: ProtocolNote[] = [];
    const raw = tokenizer.decode(this.turn);
    const { calls, dropped } = extractToolCalls(raw);
    for (const d of dropped) notes.push({ violation: 'malformed_spawn', detail: `a tool call was dropped: ${d.reason}` });
    if (writesToolResponse(raw)) notes.push({ violation: 'reserved_token', detail: 'the root wrote a tool response (only the loop writes them)' });
    if (this.tools === undefined && calls.length > 0) notes.push({ violation: 'malformed_spawn', detail: 'a tool call where no tool was offered' });
    const spawns = this.tools === undefined ? [] : calls.filter((c) => c.name === SPAWN_CLONE);
    if (this.tools !== undefined)
      for (const c of calls)
        if (c.name !== SPAWN_CLONE) notes.push({ violation: 'malformed_spawn', detail: `a call of the unknown tool ${JSON.stringify(c.name)}` });
    if (spawns.length > 0 && this.rounds >= limits.maxRounds)
      notes.push({ violation: 'too_many_rounds', detail: `a spawn_clone call after the last of ${limits.maxRounds} rounds` });
    if (spawns.length === 0 || this.rounds >= limits.maxRounds) {
      const answer = answerOf(tokenizer.decode(this.turn, true));
      return answer === null
        ? { kind: 'violation', violation: 'root_no_answer', detail: 'the root ended its turn without an "Answer:" line', notes }
        : { kind: 'final', answer, notes };
    }
    // The round's clones: the calls' objectives in order, at most maxClonesPerRound.
    const budget = textCloneBudget(limits);
    const clones: CloneStart[] = [];
    for (const call of spawns) {
      const { requests, rejected } = cloneRequests(call.arguments);
      for (const r of rejected) notes.push({ violation: 'malformed_spawn', detail: `an objective was rejected: ${r.reason}` });
      for (const r of requests) {
        if (clones.length >= limits.maxClonesPerRound) {
          notes.push({ violation: 'too_many_clones', detail: `more than ${limits.maxClonesPerRound} objectives in one round` });
          break;
        }
        const message = cloneUserMessage(r, this.problem.context ?? {});
        clones.push({ subtask: r.instruction, budget, prompt: tokenizer.chatIds(cloneChat(textPrompts(tokenizer.prompts), message), true) });
      }
    }
    return { kind: 'spawn', clones, notes };
  }

  resume(answers: readonly (string | null)[]): number[] {
    this.rounds++;
    const ids = this.turn;
    // The turn's text as the message content: every token it wrote (tool-call markers included), less the stop token the template adds back.
    const content = this.tokenizer.decode(this.stop.has(ids[ids.length - 1]) ? ids.slice(0, -1) : ids);
    this.messages.push({ role: 'assistant', content }, { role: 'tool', content: JSON.stringify(answers.map((a) => a ?? CLONE_FAILED)) });
    const injected = toolResponseIds(this.tokenizer, this.messages, this.tokens, this.tools);
    this.tokens.push(...injected);
    this.turn = [];
    return injected;
  }
}

class TextClone implements CloneTurns {
  private readonly ids: number[] = [];

  constructor(
    private readonly tokenizer: ChatTokenizer,
    private readonly stop: ReadonlySet<number>,
  ) {}

  feed(id: number): CloneEvent {
    this.ids.push(id);
    if (!this.stop.has(id)) return { kind: 'continue' };
    // With its special tokens (the tool-call markers are special in most tokenizers).
    const raw = this.tokenizer.decode(this.ids);
    if (extractToolCalls(raw).calls.some((c) => c.name === SPAWN_CLONE))
      return { kind: 'violation', violation: 'clone_spawn', detail: 'the clone called spawn_clone (clones do not spawn)' };
    if (writesToolResponse(raw))
      return { kind: 'violation', violation: 'reserved_token', detail: 'the clone wrote a tool response (only the loop writes them)' };
    const text = this.tokenizer.decode(this.ids, true);
    // A clone that ends its turn without the line answers with its whole text.
    const answer = answerOf(text) ?? (text.trim() || null);
    return answer === null ? { kind: 'violation', violation: 'clone_no_answer', detail: 'the clone ended without an answer' } : { kind: 'final', answer };
  }
}

/** The text protocol over a model's tokenizer (its chat template and stop ids). */
export function textProtocol(tokenizer: ChatTokenizer): Protocol {
  const stop: ReadonlySet<number> = new Set(tokenizer.stopIds());
  if (stop.size === 0) throw new Error('text protocol: the tokenizer names no eos_token, so no turn can end');
  const none: ReadonlySet<number> = new Set();
  const prompts = textPrompts(tokenizer.prompts);
  return {
    name: 'text',
    root(problem: Problem, limits: EpisodeLimits, o: { allowSpawn: boolean; limitInPrompt: boolean }): RootStart {
      const task = problem.task as TaskName;
      // Told its limit: the prompt set's words for it in the user message.
      const limit = o.limitInPrompt ? limits.rootMaxTokens : null;
      const messages: ChatMessage[] = (o.allowSpawn ? prompts.root(task, problem, limit) : prompts.mono(task, problem, limit)).map((m) => ({ ...m }));
      const tools = o.allowSpawn ? [SPAWN_CLONE_TOOL] : undefined;
      const prompt = tokenizer.chatIds(messages, true, tools);
      return { promptText: problem.prompt, prompt, turns: new TextRoot(tokenizer, stop, problem, limits, messages, tools, prompt) };
    },
    clone: () => new TextClone(tokenizer, stop),
    banned: () => none,
    decode: (ids) => tokenizer.decode(ids),
    pieces: (ids) => tokenizer.pieces(ids),
  };
}
