/**
 * The words a text episode is framed in: the root's chat, the monolithic chat, how a sub-question
 * is asked of a clone, and the clone's system prompt. Two sets:
 *
 *   reference  the verl export's rows (verl/dataset.ts rootChat, monoChat): a system prompt of 80
 *              to 130 tokens that explains the tool, "Calculate the value of …" questions and
 *              objectives; what a pretrained chat model is asked.
 *   short      for a model made from scratch (`init --family`), whose window and training budget
 *              are small: SHORT_SYSTEM_PROMPT (about 30 tokens), a one-line clone prompt, and an
 *              arithmetic problem or objective as its bare expression. Multihop keeps its question
 *              and key list (they are its content).
 *
 * A folder names its set in tokenizer_config.json (`selfcest_prompts`, read by HfTokenizer);
 * without it, reference. The set is part of what the model was trained on, so it travels with
 * the folder and every save of it rather than being a per-command setting.
 */
import type { TaskName } from '../tasks';
import type { Problem } from '../tasks/types';
import type { ChatMessage } from '../tokenizer/hfTokenizer';
import { ARITHMETIC_SYSTEM_PROMPT, SHORT_SYSTEM_PROMPT, monoChat, rootChat } from '../verl/dataset';

import type { PromptSetName } from './promptSetName';

export { PROMPT_SETS, PROMPTS_FIELD, type PromptSetName, isPromptSetName } from './promptSetName';

export interface TextPrompts {
  readonly name: PromptSetName;
  /**
   * The root's chat before it writes: system prompt and the problem (the spawn_clone tool is offered
   * beside it); `limit`: the root is told it may write that many tokens (`told`).
   */
  root(task: TaskName, p: Problem, limit?: number | null): ChatMessage[];
  /** The monolithic baseline's chat: everything in it, no tool; `limit` as for `root`. */
  mono(task: TaskName, p: Problem, limit?: number | null): ChatMessage[];
  /** A user message that tells the root its limit: the reference's a sentence after it, the short set's `#L ` before it. */
  told(content: string, limit: number): string;
  /** A task's sub-question (the toy prompt's question) as a clone's objective. */
  objective(task: TaskName, question: string): string;
  /** What every clone is told before its objective. */
  readonly cloneSystem: string;
  /** The arithmetic root's system prompt (it does not depend on the problem). */
  readonly arithmeticSystem: string;
}

const REFERENCE_OBJECTIVE: { readonly [N in TaskName]: (question: string) => string } = {
  arithmetic: (q) => `Calculate the value of ${q}.`,
  multihop: (q) => `What is the value of ${q.replace(/\?$/, '')}?`,
};

/**
 * What a clone is told under the reference set (its role, that keys may have been expanded into
 * context, the answer line, brevity, and to say why when it fails): the points of the reference's
 * default clone prompt, in this project's words.
 */
export const CLONE_SYSTEM =
  'You are a clone started by a root agent for one objective. Any context you are given was expanded from keys the root named. ' +
  'Keep it short, and end with a line "Answer: <result>"; if the objective cannot be done, say why in one line.';

/** The clone's prompt under the short set, in words of SHORT_SYSTEM_PROMPT (one token each for its tokenizer). */
export const SHORT_CLONE_SYSTEM = 'Solve the problem. End with a line "Answer: <value>".';

const checkTask = (task: string): TaskName => {
  if (!(task in REFERENCE_OBJECTIVE)) throw new Error(`prompts: no text rendering for task ${JSON.stringify(task)}`);
  return task as TaskName;
};

/** The chat with its last (user) message telling the limit, where there is one. */
const withLimit = (messages: ChatMessage[], limit: number | null | undefined, told: (content: string, limit: number) => string): ChatMessage[] =>
  limit === null || limit === undefined ? messages : messages.map((m, i) => (i === messages.length - 1 ? { ...m, content: told(m.content, limit) } : m));

const referenceTold = (content: string, limit: number) => `${content}\nWrite at most ${limit} tokens.`;
const shortTold = (content: string, limit: number) => `#${limit} ${content}`;

const REFERENCE: TextPrompts = {
  name: 'reference',
  root: (task, p, limit) => withLimit(rootChat(checkTask(task), p), limit, referenceTold),
  mono: (task, p, limit) => withLimit(monoChat(checkTask(task), p), limit, referenceTold),
  told: referenceTold,
  objective: (task, q) => REFERENCE_OBJECTIVE[checkTask(task)](q),
  cloneSystem: CLONE_SYSTEM,
  arithmeticSystem: ARITHMETIC_SYSTEM_PROMPT,
};

const SHORT: TextPrompts = {
  name: 'short',
  root: (task, p, limit) =>
    withLimit(
      [{ role: 'system', content: SHORT_SYSTEM_PROMPT }, checkTask(task) === 'arithmetic' ? { role: 'user', content: p.prompt } : rootChat(task, p)[1]],
      limit,
      shortTold,
    ),
  mono: (task, p, limit) => withLimit(checkTask(task) === 'arithmetic' ? [{ role: 'user', content: p.prompt }] : monoChat(task, p), limit, shortTold),
  told: shortTold,
  objective: (task, q) => (checkTask(task) === 'arithmetic' ? q : REFERENCE_OBJECTIVE[task](q)),
  cloneSystem: SHORT_CLONE_SYSTEM,
  arithmeticSystem: SHORT_SYSTEM_PROMPT,
};

const SETS: { readonly [N in PromptSetName]: TextPrompts } = { reference: REFERENCE, short: SHORT };

export const textPrompts = (name: PromptSetName): TextPrompts => SETS[name];
