/**
 * The teachers' demonstrations in the reference's text protocol: a task's Demonstration (the
 * token protocol's segments of a root and its clones) rendered as the chats a real model sees in
 * the text protocol (textProtocol.ts under the rollout scheduler), and tokenized as it builds its contexts.
 *
 * The toy segments are read with the token protocol's own parsers (grammar.ts RootParser, the
 * toy tokenizer), not with patterns: a root's generated run ends in a join (its spawn blocks,
 * `<ctx>*` fanned out as the runtime fans it) or in an answer block; the injected `<ret>…<resume>`
 * gives what each clone returned.
 *
 *   root   system + user as the prompt set's `root` (the spawn_clone tool offered); each generated run an
 *          assistant turn: its chain of thought (the toy's leading `=` dropped), then one
 *          spawn_clone call whose objectives are the spawn blocks (with `shared_context` keys
 *          where a block names `<ctx>key`), or a last line `Answer: X`; each join a tool message
 *          holding the clones' answers as the loop writes it (a failed clone: CLONE_FAILED).
 *   clone  the set's clone prompt + the objective with its context expanded (cloneUserMessage); the reply
 *          its chain then `Answer: v`. A clone with no answer block (the naive teacher's clone
 *          over its budget) is `cut`: the loop stops it at the clone budget with no answer, so its
 *          tokens are its chain run on to exactly that budget, with no end of turn.
 *   mono   one chat with no call: under the set's `root` with the tool offered (the root answers alone)
 *          when the problem's root prompt holds everything, else (multihop: the context is in
 *          `monoPrompt` only) under its `mono` with no tool, as the monolithic method runs.
 *
 * The toy budgets (`<bN>`) are not rendered: a spawn_clone call names no budget, every clone of a
 * text episode has the run's one clone budget.
 */
import { type ProtocolLimits, type SpawnBlock, RootParser, clonePrompt, fanOut } from '../protocol/grammar';
import { SPAWN_CLONE, TOOL_CALL_END, TOOL_CALL_START, cloneUserMessage } from '../protocol/toolCalls';
import { CLONE_FAILED, toolResponseIds } from '../protocol/textProtocol';
import type { TextPrompts } from '../protocol/prompts';
import type { TaskName } from '../tasks';
import type { DemoContext, Demonstration, Problem, Segment } from '../tasks/types';
import type { ChatMessage, HfTokenizer } from '../tokenizer/hfTokenizer';
import { pythonJson } from '../tokenizer/protocolCorpus';
import { Tokenizer } from '../tokenizer/tokenizer';
import { BUDGET_BUCKETS, T, VOCAB } from '../tokenizer/vocab';
import { SPAWN_CLONE_TOOL } from '../protocol/toolCalls';
import type { TrainSequence } from '../parallel/sequences';

/** One chat: its messages (assistant turns included) and whether the spawn_clone tool is offered. */
export interface TextChat {
  messages: ChatMessage[];
  tools: boolean;
}

/** A clone's chat; `cut`: its reply has no answer and the loop stops it at the clone budget. */
export interface TextCloneChat extends TextChat {
  objective: string;
  cut: boolean;
}

/** A clone the root's call starts: its objective, its context keys and the answer the loop returns for it. */
export interface SpawnedClone {
  objective: string;
  keys: string[];
  answer: string;
  /** Index in `clones` of its demonstrated chat; null where the teacher leaves it out (multihop's misses). */
  chat: number | null;
}

export interface TextDemonstration {
  problem: Problem;
  style: Demonstration['style'];
  root: TextChat;
  /** Per tool round, the clones its call starts, in order. */
  rounds: SpawnedClone[][];
  /** The clone chats trained on: the demonstration's clone contexts, in order. */
  clones: TextCloneChat[];
}

/** A context as the loop holds it: its tokens and who wrote each ('p' prompt, 'g' the model, 'i' the loop). */
export interface TextDemoContext {
  tokens: number[];
  writers: string;
}

const toy = Tokenizer.builtin();
/** The parser's limits: the demonstration is the teacher's, within the run's limits by construction. */
const OPEN_LIMITS: ProtocolLimits = { maxClonesPerRound: 1 << 20, maxRounds: 1 << 20, budgets: BUDGET_BUCKETS };
const chars = (ids: readonly number[]) => ids.map((id) => VOCAB[id]).join('');

/** A spawn block's objective and keys: `<ctx>key` names a key; the rest is the question. */
function blockRequest(prompts: TextPrompts, task: TaskName, b: SpawnBlock): { objective: string; keys: string[] } {
  const keys: string[] = [];
  let question = '';
  for (let i = 0; i < b.subtask.length; i++) {
    if (b.subtask[i] !== T.ctx) {
      question += VOCAB[b.subtask[i]];
      continue;
    }
    let key = '';
    while (i + 1 < b.subtask.length && /^[a-z0-9_]$/.test(VOCAB[b.subtask[i + 1]] ?? '')) key += VOCAB[b.subtask[++i]];
    keys.push(key);
  }
  return { objective: prompts.objective(task, question.trim()), keys };
}

/** A chain of thought as text: the toy's leading `=` dropped. */
const thought = (s: string) => (s.startsWith('=') ? s.slice(1) : s);

/** An assistant turn: its thought, then the call or the answer line. */
const turn = (text: string, end: string) => (text === '' ? end : `${text}\n${end}`);

/** The spawn_clone call of one round: objectives as strings, or with their own keys where any has keys. */
export function spawnCallText(requests: readonly { objective: string; keys: readonly string[] }[]): string {
  const withKeys = requests.some((r) => r.keys.length > 0);
  const objectives = withKeys ? requests.map((r) => ({ objective: r.objective, shared_context: r.keys })) : requests.map((r) => r.objective);
  return `${TOOL_CALL_START}\n${pythonJson({ name: SPAWN_CLONE, arguments: { objectives } })}\n${TOOL_CALL_END}`;
}

/** A clone's reply from its generated toy text: thought and answer, or cut (no answer block). */
function cloneReply(generated: string): { text: string; cut: boolean } {
  const ids = toy.encode(generated);
  const ans = ids.indexOf(T.ans);
  if (ans < 0) return { text: thought(chars(ids.filter((id) => id !== T.eos))), cut: true };
  const end = ids.indexOf(T.eos, ans);
  return { text: turn(thought(chars(ids.slice(0, ans))), `Answer: ${chars(ids.slice(ans + 1, end < 0 ? undefined : end))}`), cut: false };
}

/** The answers of an injected `<ret>…<resume>` segment: a value, or CLONE_FAILED for `<fail>`. */
function injectedAnswers(text: string): string[] {
  const out: string[] = [];
  for (const id of toy.encode(text)) {
    if (id === T.ret) out.push('');
    else if (id === T.fail) out[out.length - 1] = CLONE_FAILED;
    else if (id !== T.resume) out[out.length - 1] += VOCAB[id];
  }
  return out;
}

const promptBody = (c: DemoContext, open: string) => {
  const s = c.segments[0];
  if (s?.kind !== 'prompt' || !s.text.startsWith(open) || !s.text.endsWith('<sep>'))
    throw new Error(`textDemos: a ${c.role} context starts with no ${open}…<sep> prompt`);
  return s.text.slice(open.length, -'<sep>'.length);
};

/** The demonstration rendered in the text protocol, in a prompt set's words. */
export function renderTextDemo(demo: Demonstration, prompts: TextPrompts): TextDemonstration {
  const p = demo.problem;
  const task = p.task as TaskName;
  const context = p.context ?? {};
  const [root, ...cloneContexts] = demo.contexts;
  if (root?.role !== 'root') throw new Error('textDemos: a demonstration starts with its root');
  // Clones: their toy prompt body (the chunk expanded, as the toy runtime writes it) finds the spawn that started them.
  const clones: TextCloneChat[] = [];
  const byBody = new Map<string, number>();
  const keyOfChunk = new Map(Object.entries(context).map(([k, v]) => [v, k]));
  cloneContexts.forEach((c, i) => {
    const body = promptBody(c, '<clone>');
    byBody.set(body, byBody.get(body) ?? i);
    // A context chunk is passed as its key (a drill's chunk, in no context, under a key of its own).
    const cut = body.lastIndexOf(' ');
    const chunk = Object.keys(context).length > 0 && cut > 0 ? body.slice(0, cut) : null;
    const key = chunk === null ? null : (keyOfChunk.get(chunk) ?? `drill${i}`);
    const objective = prompts.objective(task, chunk === null ? body : body.slice(cut + 1));
    const message = cloneUserMessage({ instruction: objective, sharedContextKeys: key === null ? [] : [key] }, key === null ? {} : { [key]: chunk! });
    const reply = cloneReply(
      c.segments
        .filter((s) => s.kind === 'generated')
        .map((s) => s.text)
        .join(''),
    );
    clones.push({
      objective,
      cut: reply.cut,
      tools: false,
      messages: [
        { role: 'system', content: prompts.cloneSystem },
        { role: 'user', content: message },
        { role: 'assistant', content: reply.text },
      ],
    });
  });

  // The root: its generated runs parsed, each ending in a join or the answer. A root told its
  // limit (`<root>#48 …`, sft.ts rootLimitDemo) is told it in the prompt set's words.
  const body = promptBody(root, '<root>');
  const told = /^#(\d+) /.exec(body);
  const limit = told === null ? null : Number(told[1]);
  const promptText = told === null ? body : body.slice(told[0].length);
  const mono = demo.style === 'mono';
  const head: ChatMessage[] = mono && p.monoPrompt !== undefined && promptText === p.monoPrompt ? prompts.mono(task, p, limit) : prompts.root(task, p, limit);
  const tools = head.length > 1;
  const messages: ChatMessage[] = [...head];
  const rounds: SpawnedClone[][] = [];
  const parser = new RootParser(OPEN_LIMITS);
  let text: number[] = [];
  let blocks: SpawnBlock[] = [];
  // The run's thought: its characters before the first spawn block or answer block.
  let inThought = true;
  const segments: Segment[] = root.segments.slice(1);
  for (const seg of segments) {
    if (seg.kind === 'injected') {
      if (blocks.length === 0) throw new Error('textDemos: an injected segment with no join before it');
      const answers = injectedAnswers(seg.text);
      const fanned = fanOut(blocks, context);
      if ('error' in fanned) throw new Error(`textDemos: ${fanned.error}`);
      if (answers.length !== fanned.blocks.length) throw new Error(`textDemos: ${fanned.blocks.length} clones spawned but ${answers.length} answers injected`);
      const requests = fanned.blocks.map((b) => blockRequest(prompts, task, b));
      messages.push({ role: 'assistant', content: turn(thought(chars(text)), spawnCallText(requests)) });
      messages.push({ role: 'tool', content: JSON.stringify(answers) });
      rounds.push(
        requests.map((r, j) => {
          const prompt = clonePrompt(fanned.blocks[j].subtask, context, (t) => toy.encode(t));
          if ('error' in prompt) throw new Error(`textDemos: ${prompt.error}`);
          const body = toy.decode(prompt.tokens.slice(1, -1));
          return { ...r, answer: answers[j], chat: byBody.get(body) ?? null };
        }),
      );
      parser.resume();
      text = [];
      blocks = [];
      inThought = true;
      continue;
    }
    if (seg.kind !== 'generated') throw new Error(`textDemos: a ${seg.kind} segment inside the root`);
    for (const id of toy.encode(seg.text)) {
      const ev = parser.feed(id);
      if (ev.kind === 'violation') throw new Error(`textDemos: the teacher's root breaks the protocol: ${ev.detail}`);
      if (ev.kind === 'join') blocks = ev.blocks;
      else if (ev.kind === 'final') messages.push({ role: 'assistant', content: turn(thought(chars(text)), `Answer: ${ev.answer}`) });
      if (id === T.spawn || id === T.ans) inThought = false;
      else if (inThought) text.push(id);
    }
  }
  if (messages.at(-1)?.role !== 'assistant') throw new Error("textDemos: the root's demonstration does not end with an answer");
  return { problem: p, style: demo.style, root: { messages, tools }, rounds, clones };
}

/** The id that ends a turn: the folder's eos token (tokenizer.stopIds), as the loop stops at it. */
function stopId(tokenizer: Pick<HfTokenizer, 'stopIds'>): number {
  const [stop] = tokenizer.stopIds();
  if (stop === undefined) throw new Error('textDemos: tokenizer_config.json names no eos_token, so no turn can end');
  return stop;
}

/**
 * A cut clone's tokens: its reply run on by repeating its last `=…` step (as the toy's sloppy clone)
 * to exactly `budget` tokens, without an end of turn: where the loop stops a clone with no answer.
 */
function cutReply(tokenizer: Pick<HfTokenizer, 'encode'>, reply: string, budget: number): number[] {
  const step = /=[^=]*$/.exec(reply)?.[0] ?? `=${reply}`;
  let text = reply;
  while (tokenizer.encode(text, false).length < budget) text += step;
  return tokenizer.encode(text, false).slice(0, budget);
}

type ChatTokenizer = Pick<HfTokenizer, 'chatIds' | 'chatText' | 'decode' | 'encode' | 'stopIds'>;

/**
 * A chat's context as the text protocol builds it: the prompt (the messages before the first
 * assistant turn, with the generation prompt and the tool where offered), each assistant turn its
 * text encoded then the stop id ('g'), each tool message what the loop injects ('i'). `cutAt`: the
 * last turn is a cut clone's, run to exactly that many tokens.
 */
export function chatContext(tokenizer: ChatTokenizer, chat: TextChat, cutAt?: number): TextDemoContext {
  const tools = chat.tools ? [SPAWN_CLONE_TOOL] : undefined;
  const first = chat.messages.findIndex((m) => m.role === 'assistant');
  if (first < 1) throw new Error('textDemos: a chat needs a prompt and an assistant turn');
  const tokens = tokenizer.chatIds(chat.messages.slice(0, first), true, tools);
  let writers = 'p'.repeat(tokens.length);
  const stop = stopId(tokenizer);
  for (let i = first; i < chat.messages.length; i++) {
    const m = chat.messages[i];
    let ids: number[];
    let by: 'g' | 'i';
    if (m.role === 'assistant') {
      ids = cutAt !== undefined && i === chat.messages.length - 1 ? cutReply(tokenizer, m.content, cutAt) : [...tokenizer.encode(m.content, false), stop];
      by = 'g';
    } else if (m.role === 'tool') {
      ids = toolResponseIds(tokenizer, chat.messages.slice(0, i + 1), tokens, tools);
      by = 'i';
    } else throw new Error(`textDemos: a ${m.role} message after the first assistant turn`);
    tokens.push(...ids);
    writers += by.repeat(ids.length);
  }
  return { tokens, writers };
}

/** The lengths a text episode keeps to (TextLimits): a demonstration past them is not what the loop runs. */
export interface TextDemoLengths {
  rootMaxTokens: number;
  cloneBudget: number;
}

/** A demonstration's contexts, root first then its clone chats; null when its root writes more than `rootMaxTokens` or a clone more than `cloneBudget`. */
export function textDemoContexts(demo: TextDemonstration, tokenizer: ChatTokenizer, lengths: TextDemoLengths): TextDemoContext[] | null {
  const root = chatContext(tokenizer, demo.root);
  const clones = demo.clones.map((c) => chatContext(tokenizer, c, c.cut ? lengths.cloneBudget : undefined));
  const written = (c: TextDemoContext) => [...c.writers].filter((w) => w === 'g').length;
  if (written(root) > lengths.rootMaxTokens || clones.some((c) => written(c) > lengths.cloneBudget)) return null;
  return [root, ...clones];
}

/** A context as a training sequence: the loss on the tokens the model wrote ('g'), none on prompts and tool responses. */
export function textTrainSequence(c: TextDemoContext): TrainSequence {
  return { tokens: [...c.tokens], weights: [...c.writers.slice(1)].map((w) => (w === 'g' ? 1 : 0)) };
}
