/**
 * One episode of the reference's text protocol with a real model: the root reads the task under
 * the chat template with the spawn_clone tool offered and may call it; each objective becomes a
 * clone, a fresh context with its own chat (system and objective) and a token budget; the clones'
 * answers come back to the root as one tool message rendered by the template; the root goes on and
 * ends with a line "Answer: …". Every context keeps its tokens with who wrote each one: 'p' the
 * prompt, 'g' the model, 'i' what the loop injected (tool responses; never trained on).
 *
 * Decoding runs one context at a time with the decoder's cache, each token picked by `choose`
 * (greedy by default, or sampled): the loop's logic, not its speed. What breaks the protocol is
 * recorded as the token protocol's violation classes (protocol/violations.ts), so the reward,
 * credit and gating code reads text episodes as it reads token episodes.
 */
import { type ChooseToken, DecoderCache, argmaxToken } from '../model/decoder';
import { SPAWN_CLONE, SPAWN_CLONE_TOOL, cloneRequests, cloneUserMessage, extractToolCalls } from '../protocol/toolCalls';
import { CLONE_FAILED, answerOf, toolResponseIds, writesToolResponse } from '../protocol/textProtocol';
import { textPrompts } from '../protocol/prompts';
import type { TextModel } from '../policyModel';
import type { Violation } from '../protocol/violations';
import type { ChatMessage, HfTokenizer } from '../tokenizer/hfTokenizer';
import type { ContextCredit, RewardBreakdown } from './trace';
import { TEXT_TRACE_SCHEMA, type TextEpisodeOutcome, type TextEpisodeTrace } from './textTrace';
import type { TextLimits } from './textLimits';

export interface TextEpisodeOptions {
  /**
   * Offer the spawn_clone tool (default). Without it (the monolithic baseline) the chat has no tool
   * and a tool call the model writes anyway starts nothing: it counts as `malformed_spawn`.
   */
  offerTool?: boolean;
  /** The problem's context chunks by key (long-context tasks): a clone's shared-context keys are expanded from them. */
  context?: Readonly<Record<string, string>>;
  /** Text forced at the start of the root's first turn, injected, not generated. */
  rootPrefix?: string;
  /** How each token is picked from its logits; default the most likely (greedy). */
  choose?: ChooseToken;
  /**
   * Called when a context is about to generate (a root turn, a clone): its index in the episode's
   * contexts and the context with every token it holds so far (a stepper shows them).
   */
  onTurn?: (index: number, context: TextContext) => void;
  /**
   * Decode a round's clones together as one padded batch (default, unless `onTurn` watches each
   * turn). `choose` is then asked for the clones' tokens interleaved, not clone after clone: a
   * scripted chooser that reads its contexts in order needs false.
   */
  batchClones?: boolean;
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
  /** Tokens the model wrote here (writers 'g'). */
  generatedTokens: number;
  /** The context's first protocol violation (protocol/violations.ts), or null. */
  violation: Violation | null;
  /** The tool round a clone was started in (1, 2, …); 0 for the root. */
  round: number;
  /** A clone's objective as the root wrote it (its user message adds the expanded context); null for the root. */
  objective: string | null;
}

export interface TextEpisode extends TextEpisodeOutcome {
  contexts: TextContext[];
}

/** Runs one episode from the root's chat (system and user message: `rootChat` for a task's problem). */
export function runTextEpisode(
  model: TextModel,
  rootMessages: readonly ChatMessage[],
  limits: TextLimits,
  options: TextEpisodeOptions = {},
): Promise<TextEpisode> {
  return runEpisodeFrom(model, rootMessages, limits, options, null);
}

/**
 * Episodes of one root chat (a GRPO group: each with its own chooser), their first root turns
 * decoded together as one batch over a prompt read once (DecoderCache.generateRows); each then
 * goes on alone from its own cache. The same episodes as `runTextEpisode` one by one.
 */
export async function runTextEpisodeGroup(
  model: TextModel,
  rootMessages: readonly ChatMessage[],
  limits: TextLimits,
  options: readonly TextEpisodeOptions[],
): Promise<TextEpisode[]> {
  if (options.some((o) => (o.rootPrefix ?? '') !== '')) throw new Error('runTextEpisodeGroup: a forced root prefix is for one episode (runTextEpisode)');
  const offerTool = options[0]?.offerTool ?? true;
  if (options.some((o) => (o.offerTool ?? true) !== offerTool))
    throw new Error('runTextEpisodeGroup: the episodes of a group share one prompt, with the tool or without');
  const prompt = model.tokenizer.chatIds(
    rootMessages.map((m) => ({ ...m })),
    true,
    offerTool ? [SPAWN_CLONE_TOOL] : undefined,
  );
  const room = Math.min(limits.rootMaxTokens, model.config.maxPositions - prompt.length);
  if (options.length < 2 || room <= 0) {
    const out: TextEpisode[] = [];
    for (const o of options) out.push(await runTextEpisode(model, rootMessages, limits, o));
    return out;
  }
  const batch = new DecoderCache(model.params, model.config, model.adapters);
  const stop = new Set(model.tokenizer.stopIds());
  const first = await batch.generateRows(
    prompt,
    room,
    stop,
    options.map((o) => o.choose ?? argmaxToken),
  );
  const out: TextEpisode[] = [];
  try {
    for (const [g, o] of options.entries()) {
      out.push(await runEpisodeFrom(model, rootMessages, limits, o, { cache: first.rowCaches[g], ids: first.ids[g], cut: first.cut[g] }));
    }
  } catch (e) {
    // The episodes not yet run still hold their rows of the cache (a run one disposes its own).
    first.rowCaches.slice(out.length + 1).forEach((c) => c.dispose());
    throw e;
  }
  return out;
}

/** An episode; `first`: its first root turn already decoded, with the cache that read it (runTextEpisodeGroup). */
async function runEpisodeFrom(
  model: TextModel,
  rootMessages: readonly ChatMessage[],
  limits: TextLimits,
  options: TextEpisodeOptions,
  first: { cache: DecoderCache; ids: number[]; cut: boolean } | null,
): Promise<TextEpisode> {
  const { tokenizer, config } = model;
  const { rootPrefix = '', choose = argmaxToken, context = {}, onTurn, offerTool = true } = options;
  const batchClones = options.batchClones ?? onTurn === undefined;
  const stop = new Set(tokenizer.stopIds());
  const tools = offerTool ? [SPAWN_CLONE_TOOL] : undefined;
  const root: TextContext = {
    role: 'root',
    messages: rootMessages.map((m) => ({ ...m })),
    tokens: [],
    writers: '',
    answer: null,
    budget: null,
    overBudget: false,
    generatedTokens: 0,
    violation: null,
    round: 0,
    objective: null,
  };
  root.tokens = tokenizer.chatIds(root.messages, true, tools);
  root.writers = 'p'.repeat(root.tokens.length);
  const contexts: TextContext[] = [root];
  const stats = { toolCalls: 0, repairedToolCalls: 0, droppedToolCalls: 0, rejectedObjectives: 0 };
  const violations: TextEpisode['violations'] = [];
  const violate = (context: number, violation: Violation, detail: string) => {
    violations.push({ violation, context, detail });
    contexts[context].violation ??= violation;
  };
  let rootLeft = limits.rootMaxTokens;
  let rounds = 0;
  let forced = rootPrefix === '' ? [] : tokenizer.encode(rootPrefix, false);
  const cache = first?.cache ?? new DecoderCache(model.params, config, model.adapters);
  let decoded = first === null ? null : { ids: first.ids, cut: first.cut };
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
        violate(0, 'root_over_max', "the root's context outgrew the model's window");
        break;
      }
      // Forced text that ends the turn (its last token a stop id) leaves nothing to generate; the cache still reads it.
      const endsTurn = root.tokens.length > turnStart && stop.has(root.tokens[root.tokens.length - 1]);
      if (endsTurn) cache.feed([feed]).dispose();
      const room = endsTurn ? 0 : Math.min(rootLeft, config.maxPositions - root.tokens.length);
      if (decoded === null && !endsTurn && room > 0) onTurn?.(0, root);
      const { ids, cut } = decoded ?? (endsTurn ? { ids: [], cut: false } : room > 0 ? await cache.generate(feed, room, stop, choose) : { ids: [], cut: true });
      decoded = null;
      root.tokens.push(...ids);
      root.writers += 'g'.repeat(ids.length);
      root.generatedTokens += ids.length;
      rootLeft -= ids.length;
      // The cache has read every token of the context but the last one generated (sampled, not yet fed).
      const unfed = ids.length > 0 ? ids.slice(-1) : [];
      if (cache.length !== root.tokens.length - unfed.length) {
        throw new Error(`text episode: the root's cache holds ${cache.length} tokens where its context has ${root.tokens.length - unfed.length} read`);
      }
      const turn = tokenizer.decode(root.tokens.slice(turnStart));
      const { calls, dropped } = extractToolCalls(turn);
      stats.droppedToolCalls += dropped.length;
      for (const d of dropped) violate(0, 'malformed_spawn', `a tool call was dropped: ${d.reason}`);
      if (writesToolResponse(tokenizer.decode(ids))) violate(0, 'reserved_token', 'the root wrote a tool response (only the loop writes them)');
      if (!offerTool && calls.length > 0) violate(0, 'malformed_spawn', 'a tool call where no tool was offered');
      const spawns = offerTool ? calls.filter((c) => c.name === SPAWN_CLONE) : [];
      if (offerTool) for (const c of calls) if (c.name !== SPAWN_CLONE) violate(0, 'malformed_spawn', `a call of the unknown tool ${JSON.stringify(c.name)}`);
      if (spawns.length > 0 && rounds >= limits.maxRounds && !cut)
        violate(0, 'too_many_rounds', `a spawn_clone call after the last of ${limits.maxRounds} rounds`);
      if (cut || spawns.length === 0 || rounds >= limits.maxRounds) {
        root.overBudget = cut;
        root.answer = answerOf(tokenizer.decode(root.tokens.slice(turnStart), true));
        if (cut) violate(0, 'root_over_max', `the root reached its limit of ${limits.rootMaxTokens} tokens or the model's window`);
        else if (root.answer === null) violate(0, 'root_no_answer', 'the root ended its turn without an "Answer:" line');
        break;
      }
      rounds++;
      stats.toolCalls += spawns.length;
      stats.repairedToolCalls += spawns.filter((c) => c.repaired).length;
      // The clones of this round, the calls' objectives in order, at most maxClones a call.
      const answers: string[] = [];
      const round: { objective: string; message: string }[] = [];
      for (const call of spawns) {
        const { requests, rejected } = cloneRequests(call.arguments);
        const over = Math.max(0, requests.length - limits.maxClones);
        stats.rejectedObjectives += rejected.length + over;
        for (const r of rejected) violate(0, 'malformed_spawn', `an objective was rejected: ${r.reason}`);
        if (over > 0) violate(0, 'too_many_clones', `${requests.length} objectives in one call, at most ${limits.maxClones}`);
        for (const r of requests.slice(0, limits.maxClones)) round.push({ objective: r.instruction, message: cloneUserMessage(r, context) });
      }
      // The round's clones run side by side (one padded batch), or one by one when a stepper watches each turn.
      const clones =
        batchClones && round.length > 1
          ? await runClonesTogether(model, round, limits.cloneBudget, stop, choose, rounds)
          : await (async () => {
              const one: TextContext[] = [];
              for (const r of round)
                one.push(
                  await runClone(model, r.objective, r.message, limits.cloneBudget, stop, choose, rounds, (c) => onTurn?.(contexts.length + one.length, c)),
                );
              return one;
            })();
      for (const clone of clones) {
        contexts.push(clone);
        if (clone.violation !== null) violations.push({ violation: clone.violation, context: contexts.length - 1, detail: cloneDetail(clone) });
        answers.push(clone.answer ?? CLONE_FAILED);
      }
      // The turn's text as the message content: every token it wrote (tool-call markers included), less the stop token the template adds back.
      const turnIds = root.tokens.slice(turnStart);
      const content = tokenizer.decode(stop.has(turnIds[turnIds.length - 1]) ? turnIds.slice(0, -1) : turnIds);
      root.messages.push({ role: 'assistant', content }, { role: 'tool', content: JSON.stringify(answers) });
      const injected = toolResponseIds(tokenizer, root.messages, root.tokens, tools);
      root.tokens.push(...injected);
      root.writers += 'i'.repeat(injected.length);
      feed = [...unfed, ...injected];
      if (root.tokens.length >= config.maxPositions || rootLeft <= 0) {
        root.overBudget = true;
        violate(0, 'root_over_max', `the root reached its limit of ${limits.rootMaxTokens} tokens or the model's window`);
        break;
      }
    }
  } finally {
    cache.dispose();
  }
  return { contexts, answer: root.answer, rounds, ...stats, violations };
}

function cloneDetail(c: TextContext): string {
  if (c.violation === 'clone_over_budget') return `the clone used its budget of ${c.budget} tokens without an "Answer:" line`;
  if (c.violation === 'clone_spawn') return 'the clone called spawn_clone (clones do not spawn)';
  if (c.violation === 'reserved_token') return 'the clone wrote a tool response (only the loop writes them)';
  return 'the clone ended without an answer';
}

/** A clone's context before it generates: its chat (the clone system prompt and its message) rendered. */
function newClone(model: TextModel, objective: string, instruction: string, budget: number, round: number): TextContext {
  const clone: TextContext = {
    role: 'clone',
    messages: [
      { role: 'system', content: textPrompts(model.tokenizer.prompts).cloneSystem },
      { role: 'user', content: instruction },
    ],
    tokens: [],
    writers: '',
    answer: null,
    budget,
    overBudget: false,
    generatedTokens: 0,
    violation: null,
    round,
    objective,
  };
  clone.tokens = model.tokenizer.chatIds(clone.messages, true);
  clone.writers = 'p'.repeat(clone.tokens.length);
  return clone;
}

/** A clone's context with what it generated: its answer, and the violation, if any. */
function finishClone(model: TextModel, clone: TextContext, got: { ids: number[]; cut: boolean }): TextContext {
  const { tokenizer } = model;
  clone.tokens.push(...got.ids);
  clone.writers += 'g'.repeat(got.ids.length);
  clone.generatedTokens = got.ids.length;
  clone.overBudget = got.cut;
  const text = tokenizer.decode(got.ids, true);
  // A clone cut at its budget without an answer line has no answer (the reference gates it).
  clone.answer = answerOf(text) ?? (got.cut ? null : text.trim() || null);
  // With its special tokens (the tool-call markers are special in most tokenizers).
  const raw = tokenizer.decode(got.ids);
  if (extractToolCalls(raw).calls.some((c) => c.name === SPAWN_CLONE)) clone.violation = 'clone_spawn';
  else if (writesToolResponse(raw)) clone.violation = 'reserved_token';
  else if (clone.answer === null) clone.violation = got.cut ? 'clone_over_budget' : 'clone_no_answer';
  return clone;
}

/** A round's clones decoded together: their prompts left-padded into one batch (DecoderCache.generatePadded). */
async function runClonesTogether(
  model: TextModel,
  round: readonly { objective: string; message: string }[],
  budget: number,
  stop: ReadonlySet<number>,
  choose: ChooseToken,
  index: number,
): Promise<TextContext[]> {
  const clones = round.map((r) => newClone(model, r.objective, r.message, budget, index));
  const cache = new DecoderCache(model.params, model.config, model.adapters);
  const got = await cache.generatePadded(
    clones.map((c) => c.tokens),
    clones.map((c) => Math.min(budget, model.config.maxPositions - c.tokens.length)),
    stop,
    clones.map(() => choose),
  );
  return clones.map((c, r) => finishClone(model, c, { ids: got.ids[r], cut: got.cut[r] }));
}

/** A clone: its own chat (system and objective), decoded up to its budget. */
async function runClone(
  model: TextModel,
  objective: string,
  instruction: string,
  budget: number,
  stop: ReadonlySet<number>,
  choose: ChooseToken,
  round: number,
  onTurn: (c: TextContext) => void,
): Promise<TextContext> {
  const clone = newClone(model, objective, instruction, budget, round);
  const cache = new DecoderCache(model.params, model.config, model.adapters);
  try {
    onTurn(clone);
    return finishClone(model, clone, await cache.generate(clone.tokens, Math.min(budget, model.config.maxPositions - clone.tokens.length), stop, choose));
  } finally {
    cache.dispose();
  }
}

/** A text episode as its trace. */
export function textEpisodeTrace(
  e: TextEpisode,
  tokenizer: Pick<HfTokenizer, 'pieces'>,
  problem: { id: string; prompt: string; truth: string; task: string },
  correct: boolean,
  scored?: { reward: RewardBreakdown; credits: readonly ContextCredit[] },
): TextEpisodeTrace {
  return {
    schema: TEXT_TRACE_SCHEMA,
    task: problem.task,
    problem: { id: problem.id, prompt: problem.prompt, truth: problem.truth },
    answer: e.answer,
    correct,
    rounds: e.rounds,
    toolCalls: e.toolCalls,
    repairedToolCalls: e.repairedToolCalls,
    droppedToolCalls: e.droppedToolCalls,
    rejectedObjectives: e.rejectedObjectives,
    violations: e.violations.map((v) => ({ ...v })),
    ...(scored ? { reward: { ...scored.reward } } : {}),
    contexts: e.contexts.map((c, j) => ({
      role: c.role,
      objective: c.objective,
      round: c.round,
      budget: c.budget,
      overBudget: c.overBudget,
      answer: c.answer,
      violation: c.violation,
      generatedTokens: c.generatedTokens,
      tokens: [...c.tokens],
      pieces: tokenizer.pieces(c.tokens),
      writers: c.writers,
      ...(scored ? { credit: { ...scored.credits[j] } } : {}),
    })),
  };
}
