/**
 * One episode of the reference's text protocol with a real model: the root reads the task under
 * the chat template with the spawn_clone tool offered and may call it; each objective becomes a
 * clone, a fresh context with its own chat (system and objective) and a token budget; the clones'
 * answers come back to the root as one tool message rendered by the template; the root goes on and
 * ends with a line "Answer: …". Every context keeps its tokens with who wrote each one: 'p' the
 * prompt, 'g' the model, 'i' what the loop injected (tool responses; never trained on).
 *
 * Decoding here is greedy, one context at a time, with the decoder's cache: the loop's logic, not
 * its speed. The reward, credit and gating code reads the answers and violations as it does for
 * the token protocol.
 */
import { DecoderCache, type DecoderConfig, type DecoderParams } from '../model/decoder';
import { SPAWN_CLONE, SPAWN_CLONE_TOOL, cloneRequests, extractToolCalls } from '../protocol/toolCalls';
import type { ChatMessage, HfTokenizer } from '../tokenizer/hfTokenizer';

export interface TextModel {
  config: DecoderConfig;
  params: DecoderParams;
  tokenizer: HfTokenizer;
}

export interface TextLimits {
  /** Tokens the root may generate over the episode. */
  rootMaxTokens: number;
  /** Tokens each clone may generate. */
  cloneBudget: number;
  /** Clones one call may start (the reference's max_clones_per_call); later objectives are refused. */
  maxClones: number;
  /** Tool rounds at most. */
  maxRounds: number;
}

export interface TextContext {
  role: 'root' | 'clone';
  /** The chat this context renders (the root's grows by its turns and the tool messages). */
  messages: ChatMessage[];
  tokens: number[];
  /** One letter per token: 'p' prompt, 'g' generated, 'i' injected. */
  writers: string;
  /** What "Answer:" gave (the clone's whole text when it wrote no such line), or null. */
  answer: string | null;
  /** The clone's budget; null for the root. */
  budget: number | null;
  /** The context stopped at its limit, not at the end of its turn. */
  overBudget: boolean;
}

export interface TextEpisode {
  contexts: TextContext[];
  answer: string | null;
  rounds: number;
  toolCalls: number;
  repairedToolCalls: number;
  droppedToolCalls: number;
  rejectedObjectives: number;
}

/**
 * What a clone is told (its role, that keys may have been expanded into context, the answer line,
 * brevity, and to say why when it fails): the points of the reference's default clone prompt, in
 * this project's words.
 */
export const CLONE_SYSTEM =
  'You are a clone started by a root agent for one objective. Any context you are given was expanded from keys the root named. ' +
  'Keep it short, and end with a line "Answer: <result>"; if the objective cannot be done, say why in one line.';

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

/**
 * Runs one episode from the root's chat (system and user message: `rootChat` for a task's problem);
 * `rootPrefix` (optional) is text forced at the start of the root's first turn, injected, not generated.
 */
export async function runTextEpisode(model: TextModel, rootMessages: readonly ChatMessage[], limits: TextLimits, rootPrefix = ''): Promise<TextEpisode> {
  const { tokenizer, config } = model;
  const stop = new Set(tokenizer.stopIds());
  const tools = [SPAWN_CLONE_TOOL];
  const root: TextContext = {
    role: 'root',
    messages: rootMessages.map((m) => ({ ...m })),
    tokens: [],
    writers: '',
    answer: null,
    budget: null,
    overBudget: false,
  };
  root.tokens = tokenizer.chatIds(root.messages, true, tools);
  root.writers = 'p'.repeat(root.tokens.length);
  const contexts: TextContext[] = [root];
  const stats = { toolCalls: 0, repairedToolCalls: 0, droppedToolCalls: 0, rejectedObjectives: 0 };
  let rootLeft = limits.rootMaxTokens;
  let rounds = 0;
  let forced = rootPrefix === '' ? [] : tokenizer.encode(rootPrefix, false);
  const cache = new DecoderCache(model.params, config);
  try {
    let feed = [...root.tokens];
    for (;;) {
      // The root's turn: forced text first (injected), then its own tokens.
      const turnStart = root.tokens.length;
      if (forced.length > 0) {
        root.tokens.push(...forced);
        root.writers += 'i'.repeat(forced.length);
        feed = [...feed, ...forced];
        forced = [];
      }
      if (root.tokens.length > config.maxPositions) {
        // The context no longer fits the model's window: the episode ends there (the root ran over).
        root.overBudget = true;
        break;
      }
      // Forced text that ends the turn (its last token a stop id) leaves nothing to generate; the cache still reads it.
      const endsTurn = root.tokens.length > turnStart && stop.has(root.tokens[root.tokens.length - 1]);
      if (endsTurn) cache.feed([feed]).dispose();
      const room = endsTurn ? 0 : Math.min(rootLeft, config.maxPositions - root.tokens.length);
      const { ids, cut } = endsTurn ? { ids: [], cut: false } : room > 0 ? await cache.greedy(feed, room, stop) : { ids: [], cut: true };
      root.tokens.push(...ids);
      root.writers += 'g'.repeat(ids.length);
      rootLeft -= ids.length;
      // The cache has read every token of the context but the last one generated (sampled, not yet fed).
      const unfed = ids.length > 0 ? ids.slice(-1) : [];
      if (cache.length !== root.tokens.length - unfed.length) {
        throw new Error(`text episode: the root's cache holds ${cache.length} tokens where its context has ${root.tokens.length - unfed.length} read`);
      }
      const turn = tokenizer.decode(root.tokens.slice(turnStart));
      const { calls, dropped } = extractToolCalls(turn);
      stats.droppedToolCalls += dropped.length;
      const spawns = calls.filter((c) => c.name === SPAWN_CLONE);
      if (cut || spawns.length === 0 || rounds >= limits.maxRounds) {
        root.overBudget = cut;
        root.answer = answerOf(tokenizer.decode(root.tokens.slice(turnStart), true));
        break;
      }
      rounds++;
      stats.toolCalls += spawns.length;
      stats.repairedToolCalls += spawns.filter((c) => c.repaired).length;
      // The clones of this round, the calls' objectives in order, at most maxClones a call.
      const answers: string[] = [];
      for (const call of spawns) {
        const { requests, rejected } = cloneRequests(call.arguments);
        stats.rejectedObjectives += rejected.length + Math.max(0, requests.length - limits.maxClones);
        for (const r of requests.slice(0, limits.maxClones)) {
          const clone = await runClone(model, r.instruction, limits.cloneBudget, stop);
          contexts.push(clone);
          answers.push(clone.answer ?? 'failed: no answer within the budget');
        }
      }
      // The tool message as the template renders it after the root's turn: its tokens are injected.
      const rootText = tokenizer.decode(root.tokens);
      // The turn's text as the message content: every token it wrote (tool-call markers included), less the stop token the template adds back.
      const turnIds = root.tokens.slice(turnStart);
      const content = tokenizer.decode(stop.has(turnIds[turnIds.length - 1]) ? turnIds.slice(0, -1) : turnIds);
      root.messages.push({ role: 'assistant', content });
      const withoutTool = tokenizer.chatText(root.messages, false, tools);
      root.messages.push({ role: 'tool', content: JSON.stringify(answers) });
      const withTool = tokenizer.chatText(root.messages, true, tools);
      // Where the root's own text is what the template renders, everything after it; else the tool part alone.
      const injected = tokenizer.encode(withTool.startsWith(rootText) ? withTool.slice(rootText.length) : withTool.slice(withoutTool.length), false);
      root.tokens.push(...injected);
      root.writers += 'i'.repeat(injected.length);
      feed = [...unfed, ...injected];
      if (root.tokens.length >= config.maxPositions || rootLeft <= 0) {
        root.overBudget = true;
        break;
      }
    }
  } finally {
    cache.dispose();
  }
  return { contexts, answer: root.answer, rounds, ...stats };
}

/** A clone: its own chat (system and objective), greedy up to its budget. */
async function runClone(model: TextModel, instruction: string, budget: number, stop: ReadonlySet<number>): Promise<TextContext> {
  const { tokenizer, config } = model;
  const clone: TextContext = {
    role: 'clone',
    messages: [
      { role: 'system', content: CLONE_SYSTEM },
      { role: 'user', content: instruction },
    ],
    tokens: [],
    writers: '',
    answer: null,
    budget,
    overBudget: false,
  };
  clone.tokens = tokenizer.chatIds(clone.messages, true);
  clone.writers = 'p'.repeat(clone.tokens.length);
  const cache = new DecoderCache(model.params, config);
  try {
    const got = await cache.greedy(clone.tokens, Math.min(budget, config.maxPositions - clone.tokens.length), stop);
    clone.tokens.push(...got.ids);
    clone.writers += 'g'.repeat(got.ids.length);
    clone.overBudget = got.cut;
    const text = tokenizer.decode(got.ids, true);
    // A clone cut at its budget without an answer line has no answer (the reference gates it).
    clone.answer = answerOf(text) ?? (got.cut ? null : text.trim() || null);
  } finally {
    cache.dispose();
  }
  return clone;
}
