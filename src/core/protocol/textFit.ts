/**
 * What a text run will not fit, said before it runs: a root's prompt with its limit and the tool
 * responses it reads, and a clone's prompt with its budget, against the model's window; and a chat
 * template that drops the tool list (the root would never be told of spawn_clone). Measured on a
 * sample of the task's problems in the folder's prompt set and chat template, the largest of each.
 */
import type { Problem } from '../tasks/types';
import type { TaskName } from '../tasks';
import { textPrompts } from './prompts';
import { SPAWN_CLONE, SPAWN_CLONE_TOOL, cloneUserMessage } from './toolCalls';
import { type ChatTokenizer, cloneChat } from './textProtocol';

export interface TextFitLimits {
  rootMaxTokens: number;
  cloneBudget: number;
  maxClonesPerRound: number;
  maxRounds: number;
}

export interface TextFit {
  window: number;
  /** The longest root prompt (system, problem, tool list) of the sample. */
  rootPrompt: number;
  /** The tool responses a root reads at most: every round's, each with its most clones. */
  toolResponses: number;
  /** The longest clone prompt of the sample. */
  clonePrompt: number;
  /** Whether the chat template writes the tool list into the root's prompt. */
  toolsShown: boolean;
  /** What will not fit, one sentence each; empty when everything does. */
  warnings: string[];
}

export function textFit(tokenizer: ChatTokenizer, window: number, task: TaskName, problems: readonly Problem[], limits: TextFitLimits): TextFit {
  if (problems.length === 0) throw new Error('textFit: no problems to measure');
  const prompts = textPrompts(tokenizer.prompts);
  const tools = [SPAWN_CLONE_TOOL];
  let rootPrompt = 0;
  let clonePrompt = 0;
  let toolsShown = true;
  for (const p of problems) {
    const chat = prompts.root(task, p);
    rootPrompt = Math.max(rootPrompt, tokenizer.chatIds(chat, true, tools).length);
    // A template that reads the tools renders them: with and without, the texts differ.
    if (tokenizer.chatText(chat, true, tools) === tokenizer.chatText(chat, true)) toolsShown = false;
    // A clone asked the whole question with the problem's largest chunk: as long as a clone's prompt gets.
    const context = p.context ?? {};
    const largest = Object.keys(context).sort((a, b) => context[b].length - context[a].length)[0];
    const message = cloneUserMessage({ instruction: p.prompt, sharedContextKeys: largest === undefined ? [] : [largest] }, context);
    clonePrompt = Math.max(clonePrompt, tokenizer.chatIds(cloneChat(prompts, message), true).length);
  }
  // One round's tool message with its most clones, each a short answer, and the next generation prompt.
  const head = prompts.root(task, problems[0]);
  const turn = [...head, { role: 'assistant', content: '' }];
  const answers = JSON.stringify(Array.from({ length: limits.maxClonesPerRound }, () => '-9999'));
  const withTool = tokenizer.chatIds([...turn, { role: 'tool', content: answers }], true, tools).length;
  const toolResponses = limits.maxRounds * Math.max(0, withTool - tokenizer.chatIds(turn, false, tools).length);
  const warnings: string[] = [];
  if (!toolsShown) warnings.push(`the chat template drops the tool list: the root's prompt reads the same with ${SPAWN_CLONE} offered and without`);
  const root = rootPrompt + limits.rootMaxTokens + toolResponses;
  if (root > window)
    warnings.push(
      `a root's prompt of up to ${rootPrompt} tokens, its limit of ${limits.rootMaxTokens} and up to ${toolResponses} tokens of tool responses make ${root}: past the model's ${window}-token window, so a long episode is cut by the window, not the limit`,
    );
  const clone = clonePrompt + limits.cloneBudget;
  if (clone > window)
    warnings.push(
      `a clone's prompt of up to ${clonePrompt} tokens and its budget of ${limits.cloneBudget} make ${clone}: past the model's ${window}-token window`,
    );
  return { window, rootPrompt, toolResponses, clonePrompt, toolsShown, warnings };
}
