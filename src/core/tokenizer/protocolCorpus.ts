/**
 * The text a model made for the tasks reads and writes in the reference's text protocol, as the
 * chat template renders it: for problems of both tasks (every preset), the root's chat with the
 * spawn_clone tool (under the verl prompts and the short one), a turn that calls the tool, the tool
 * response, the final "Answer:" line; each clone's chat (its system prompt, objective and expanded
 * shared context) and answer; and the monolithic chat. Calls and answers are written plainly, not
 * solved: they are the protocol's shapes, which is what a tokenizer is trained on. Seeded.
 */
import { SPAWN_CLONE, SPAWN_CLONE_TOOL, TOOL_CALL_END, TOOL_CALL_START, cloneUserMessage } from '../protocol/toolCalls';
import { Rng } from '../rng';
import { CLONE_SYSTEM } from '../protocol/prompts';
import { TASK_NAMES, type TaskName, withOptions } from '../tasks';
import type { Problem } from '../tasks/types';
import { SHORT_SYSTEM_PROMPT, monoChat, rootChat } from '../verl/dataset';
import type { ChatMessage } from './hfTokenizer';

/** A chat and whether it ends with the generation prompt. */
export interface CorpusChat {
  messages: ChatMessage[];
  tools: boolean;
}

/** JSON as Python's json.dumps writes it (", " and ": "), as the reference's models write tool calls. */
export function pythonJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pythonJson).join(', ')}]`;
  if (v !== null && typeof v === 'object')
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}: ${pythonJson(x)}`)
      .join(', ')}}`;
  return JSON.stringify(v);
}

/** A tool call as the protocol writes it. */
export const toolCallText = (objectives: readonly string[], sharedContext?: readonly string[]): string =>
  `${TOOL_CALL_START}\n${pythonJson({ name: SPAWN_CLONE, arguments: { objectives, ...(sharedContext ? { shared_context: sharedContext } : {}) } })}\n${TOOL_CALL_END}`;

/** The expression's top-level terms (a sign starts each but the first; parentheses stay whole). */
function terms(expr: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  [...expr].forEach((c, i) => {
    depth += c === '(' ? 1 : c === ')' ? -1 : 0;
    if (depth === 0 && i > start && (c === '+' || c === '-') && !'+-*('.includes(expr[i - 1])) {
      out.push(expr.slice(start, i));
      start = i;
    }
  });
  return [...out, expr.slice(start)];
}

/** Objectives of a root's call, with the keys they share (multihop): a plain split of the problem. */
function objectivesOf(task: TaskName, p: Problem, rng: Rng): { objectives: string[]; keys?: string[] } {
  if (task === 'arithmetic') {
    const t = terms(p.prompt);
    const cut = Math.max(1, Math.floor(t.length / 2));
    const parts = [t.slice(0, cut).join(''), t.slice(cut).join('')].filter((x) => x !== '');
    return { objectives: parts.map((x) => `Calculate the value of ${x}.`) };
  }
  const keys = Object.keys(p.context ?? {});
  const variable = /([a-z]+)\?$/.exec(p.prompt)?.[1] ?? 'x';
  const picked = keys.filter(() => rng.next() < 0.5);
  return { objectives: [`What is the value of ${variable}?`], keys: picked.length > 0 ? picked : keys.slice(0, 1) };
}

/** The chats of one problem: a delegating root (under `system`), its clones, and the monolithic chat. */
export function problemChats(task: TaskName, p: Problem, system: string, rng: Rng): CorpusChat[] {
  const value = () => String(rng.int(-999, 999));
  const { objectives, keys } = objectivesOf(task, p, rng);
  const answers = objectives.map(() => value());
  const root: ChatMessage[] = [
    { role: 'system', content: system },
    rootChat(task, p)[1],
    { role: 'assistant', content: toolCallText(objectives, keys) },
    { role: 'tool', content: JSON.stringify(answers) },
    { role: 'assistant', content: `The clones answered ${answers.join(' and ')}.\nAnswer: ${p.truth}` },
  ];
  const clones = objectives.map((objective, i) => ({
    messages: [
      { role: 'system', content: CLONE_SYSTEM },
      { role: 'user', content: cloneUserMessage({ instruction: objective, sharedContextKeys: keys ?? [] }, p.context ?? {}) },
      { role: 'assistant', content: `Answer: ${answers[i]}` },
    ],
    tools: false,
  }));
  const mono = [...monoChat(task, p), { role: 'assistant', content: `Answer: ${p.truth}` }];
  return [{ messages: root, tools: true }, ...clones, { messages: mono, tools: false }];
}

/** `perPreset` problems of every preset of every task, each under the task's verl prompt and the short one. */
export function protocolCorpusChats(perPreset = 40, seed = 50): CorpusChat[] {
  const rng = new Rng(seed);
  const chats: CorpusChat[] = [];
  for (const task of TASK_NAMES) {
    for (const preset of withOptions(task).task.presets) {
      const entry = withOptions(task, preset.options);
      for (let i = 0; i < perPreset; i++) {
        const p = entry.task.generate(rng, entry.opts, `corpus-${i}`);
        const system = i % 2 === 0 ? SHORT_SYSTEM_PROMPT : rootChat(task, p)[0].content;
        chats.push(...problemChats(task, p, system, rng));
      }
    }
  }
  return chats;
}

/** The tool list a corpus chat offers. */
export const corpusTools = (c: CorpusChat): object[] | undefined => (c.tools ? [SPAWN_CLONE_TOOL] : undefined);
