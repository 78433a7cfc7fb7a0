/**
 * The playground's problems as rows of verl's RL dataset (the trainer of the SELFCEST
 * reference code), one parquet file per split. A row:
 *
 *   data_source   string                       `selfcest_<task>` unless told otherwise
 *   agent_name    string                       "tool_agent": verl's tool loop, with spawn_clone
 *   prompt        list<struct{role, content}>  system (how to delegate, how to answer), user (the problem)
 *   ability       string                       "math" / "multihop_qa"
 *   reward_model  struct{style, ground_truth, data_source}
 *   extra_info    struct{split, index, problem_id, task, prompt, answer, <task fields>, <meta>}
 *
 * Long-context tasks (multihop) add to extra_info the question, the whole context in one prompt
 * (`mono_prompt`, for the no-clone baseline), `context_keys` and `context_items` (the keyed
 * chunks): the delegating root sees only the keys, and spawn_clone's `shared_context` names keys
 * that the agent loop expands into their text for the clone.
 *
 * The schema is written out per task rather than inferred from the rows: every row of a file,
 * and the train and test files of one export, must have the same types, and a meta field that
 * happens to be integral in one sample must not turn int64 in one file and double in the next.
 * Pure: problems in, rows and their schema out (src/cli/verl/parquet.ts writes them).
 */
import { type TaskEntry, type TaskName, isTaskName } from '../tasks';
import type { Problem } from '../tasks/types';
import { problemNotation } from '../tasks/multihop';

export type VerlSplit = 'train' | 'test';

/** A column's type, in words both parquet and Arrow have. Every value is written non-null. */
export type VerlType = 'string' | 'int64' | 'double' | { readonly list: VerlType } | { readonly struct: readonly VerlField[] };

export interface VerlField {
  readonly name: string;
  readonly type: VerlType;
}

/** A value of a VerlType: int64 and double as numbers (the writer turns int64 into BigInt). */
export type VerlValue = string | number | readonly VerlValue[] | { readonly [field: string]: VerlValue };

export type VerlMessage = {
  role: 'system' | 'user';
  content: string;
};

export type VerlContextItem = {
  key: string;
  text: string;
};

// Type aliases, not interfaces: they must be assignable to VerlValue's index signature.
export type VerlRow = {
  data_source: string;
  agent_name: string;
  prompt: VerlMessage[];
  ability: string;
  reward_model: { style: 'rule'; ground_truth: string; data_source: string };
  /** The fields of `extraInfoFields(task)`, in that order. */
  extra_info: { [field: string]: VerlValue };
};

/** verl's agent loop that runs the tool calls (spawn_clone) of the root. */
export const VERL_AGENT_NAME = 'tool_agent';

export const ARITHMETIC_SYSTEM_PROMPT = [
  'You are the root of a delegation tree. You can hand sub-problems to clones of yourself with the tool `spawn_clone`:',
  'a clone starts fresh, sees only the sub-problem you give it, runs in parallel with the other clones and returns its answer to you.',
  'Split the expression when that is cheaper than working it out alone, then combine the answers the clones return.',
  'Give the final answer on the last line as `Answer: <value>`, the value an integer.',
].join(' ');

/**
 * One system prompt for both tasks, short enough for a model made from scratch (`init --family`):
 * about 30 tokens of its tokenizer where the prompts above take 80 to 130. It is part of the text
 * that tokenizer is trained on (tokenizer/protocolCorpus.ts), so each of its words is one token.
 */
export const SHORT_SYSTEM_PROMPT =
  'Solve the problem. You may call spawn_clone to give sub-problems to clones; pass context only as keys in shared_context. End with a line "Answer: <value>".';

/** How a multihop chunk's assignments read, by the problem's `names` option. */
const MULTIHOP_NOTATION: Record<1 | 2, string> = {
  1: 'Each chunk holds assignments such as `ac.` (a has the value of c) or `a7.` (a is 7): a one-letter name, then its value; the `#*_+` between them is filler.',
  2: 'Each chunk holds assignments such as `ab=cd.` (ab has the value of cd) or `ab=7.`.',
};

/** The system prompt of a multihop problem, in its notation (problems from before the option: two-letter). */
export const multihopSystemPrompt = (p: Pick<Problem, 'meta'>): string =>
  [
    'You are the root of a delegation tree. The context of the problem is a set of chunks stored under keys; you see only the keys.',
    MULTIHOP_NOTATION[problemNotation(p).names],
    'Ask clones of yourself with the tool `spawn_clone`, and pass each clone context only as keys in `shared_context`, never as text:',
    'the runtime expands every key into its chunk for that clone. A clone runs in parallel with the others and returns its answer to you.',
    "Follow the chain of assignments from the question's variable to a number.",
    'Give the final answer on the last line as `Answer: <value>`.',
  ].join(' ');

/** The data_source of a task's rows unless the export names one. */
export const defaultDataSource = (task: string): string => `selfcest_${task}`;

type MetaType = 'int64' | 'double' | 'string';

/** What differs between tasks; the rest of the row is common. */
interface TaskLayout {
  ability: string;
  systemPrompt: (p: Problem) => string;
  userContent(p: Problem): string;
  /** The question asked of a model with no tool (the monolithic baseline): everything it needs in one message. */
  monoContent(p: Problem): string;
  /** The task's own extra_info fields, after the common ones and before the meta fields. */
  fields: readonly VerlField[];
  values(p: Problem): Record<string, VerlValue>;
  /** Problem.meta's fields and their column types (every problem of the task has exactly these). */
  meta: Readonly<Record<string, MetaType>>;
}

const CONTEXT_ITEM: VerlType = {
  struct: [
    { name: 'key', type: 'string' },
    { name: 'text', type: 'string' },
  ],
};

/**
 * A multihop prompt, `keys k1 k2 … kN. xy?`: the chunk keys the root sees and the variable asked
 * for. Throws unless the keys are the problem's context keys, in order.
 */
function multihopQuestion(p: Problem): { keys: string[]; variable: string } {
  const m = /^keys ([^.]+)\. ([a-z]+)\?$/.exec(p.prompt);
  if (!m) throw new Error(`verl: multihop problem ${p.id}: prompt ${JSON.stringify(p.prompt)} is not "keys <k1 … kN>. <variable>?"`);
  const keys = m[1].split(' ');
  const contextKeys = Object.keys(p.context ?? {});
  if (keys.join(' ') !== contextKeys.join(' ')) {
    throw new Error(`verl: multihop problem ${p.id}: the prompt lists keys ${keys.join(' ')} but the context has ${contextKeys.join(' ') || 'none'}`);
  }
  return { keys, variable: m[2] };
}

const LAYOUTS: { readonly [N in TaskName]: TaskLayout } = {
  arithmetic: {
    ability: 'math',
    systemPrompt: () => ARITHMETIC_SYSTEM_PROMPT,
    userContent: (p) => `Calculate the value of ${p.prompt}.`,
    monoContent: (p) => `Calculate the value of ${p.prompt}. ${ANSWER_LINE}`,
    fields: [],
    values: () => ({}),
    meta: { operands: 'int64', terms: 'int64' },
  },
  multihop: {
    ability: 'multihop_qa',
    systemPrompt: multihopSystemPrompt,
    userContent(p) {
      const { keys, variable } = multihopQuestion(p);
      return [`Question: what is the value of ${variable}?`, '', 'Context keys:', ...keys.map((k) => `- ${k}`)].join('\n');
    },
    monoContent(p) {
      const { keys, variable } = multihopQuestion(p);
      const context = p.context ?? {};
      return [
        'Context:',
        ...keys.map((k) => `[${k}]\n${context[k]}`),
        '',
        `Question: what is the value of ${variable}? Follow the chain of assignments from ${variable} to a number. ${ANSWER_LINE}`,
      ].join('\n');
    },
    fields: [
      { name: 'question', type: 'string' },
      { name: 'mono_prompt', type: 'string' },
      { name: 'context_keys', type: { list: 'string' } },
      { name: 'context_items', type: { list: CONTEXT_ITEM } },
    ],
    values(p) {
      const { keys, variable } = multihopQuestion(p);
      if (p.monoPrompt === undefined) throw new Error(`verl: multihop problem ${p.id} has no monoPrompt`);
      const context = p.context ?? {};
      return {
        question: variable,
        mono_prompt: p.monoPrompt,
        context_keys: keys,
        context_items: keys.map((key): VerlContextItem => ({ key, text: context[key] })),
      };
    },
    meta: { chunks: 'int64', perChunk: 'int64', hops: 'int64', names: 'int64', filler: 'int64' },
  },
};

function layoutOf(task: string): TaskLayout {
  if (!isTaskName(task)) throw new Error(`verl: no row layout for task ${JSON.stringify(task)}`);
  return LAYOUTS[task];
}

const COMMON_EXTRA: readonly VerlField[] = [
  { name: 'split', type: 'string' },
  { name: 'index', type: 'int64' },
  { name: 'problem_id', type: 'string' },
  { name: 'task', type: 'string' },
  /** The playground's own root prompt (between `<root>` and `<sep>`). */
  { name: 'prompt', type: 'string' },
  { name: 'answer', type: 'string' },
];

/** extra_info's fields for a task, in column order: common, the task's own, then its meta. */
export function extraInfoFields(task: string): VerlField[] {
  const layout = layoutOf(task);
  const fields = [...COMMON_EXTRA, ...layout.fields, ...Object.entries(layout.meta).map(([name, type]) => ({ name, type }))];
  const seen = new Set<string>();
  for (const f of fields) {
    if (seen.has(f.name)) throw new Error(`verl: ${task}: extra_info field ${f.name} is defined twice`);
    seen.add(f.name);
  }
  return fields;
}

/** The columns of a task's rows, in order; every row of its files has exactly this schema. */
export function verlSchema(task: string): VerlField[] {
  const message: VerlType = {
    struct: [
      { name: 'role', type: 'string' },
      { name: 'content', type: 'string' },
    ],
  };
  return [
    { name: 'data_source', type: 'string' },
    { name: 'agent_name', type: 'string' },
    { name: 'prompt', type: { list: message } },
    { name: 'ability', type: 'string' },
    {
      name: 'reward_model',
      type: {
        struct: [
          { name: 'style', type: 'string' },
          { name: 'ground_truth', type: 'string' },
          { name: 'data_source', type: 'string' },
        ],
      },
    },
    { name: 'extra_info', type: { struct: extraInfoFields(task) } },
  ];
}

function metaValue(p: Problem, field: string, type: MetaType): string | number {
  const v = p.meta[field];
  const fits = type === 'string' ? typeof v === 'string' : type === 'int64' ? Number.isSafeInteger(v) : typeof v === 'number' && Number.isFinite(v);
  if (!fits)
    throw new Error(
      `verl: problem ${p.id}: meta.${field} must be ${type === 'int64' ? 'an integer' : type === 'double' ? 'a finite number' : 'a string'} (got ${JSON.stringify(v)})`,
    );
  return v;
}

/**
 * The rows of one file: `problems` (all of `entry`'s task) in order, `index` their position.
 * Throws, naming the problem, for a problem of another task or one whose meta fields are not
 * the task's declared ones.
 */
export function verlRows(entry: TaskEntry, problems: readonly Problem[], split: VerlSplit, dataSource: string): VerlRow[] {
  const task = entry.task.name;
  const layout = layoutOf(task);
  if (dataSource.trim() === '') throw new Error('verl: dataSource must be a non-empty string');
  const metaFields = Object.keys(layout.meta);
  return problems.map((p, index) => {
    if (p.task !== task) throw new Error(`verl: problem ${p.id} is of task ${p.task}, not ${task}`);
    const extra = Object.keys(p.meta).filter((f) => !Object.hasOwn(layout.meta, f));
    if (extra.length > 0) throw new Error(`verl: problem ${p.id}: meta field ${extra.join(', ')} has no column (${task} declares ${metaFields.join(', ')})`);
    const meta = Object.fromEntries(Object.entries(layout.meta).map(([f, type]) => [f, metaValue(p, f, type)]));
    return {
      data_source: dataSource,
      agent_name: VERL_AGENT_NAME,
      prompt: [
        { role: 'system', content: layout.systemPrompt(p) },
        { role: 'user', content: layout.userContent(p) },
      ],
      ability: layout.ability,
      reward_model: { style: 'rule', ground_truth: p.truth, data_source: dataSource },
      extra_info: { split, index, problem_id: p.id, task, prompt: p.prompt, answer: p.truth, ...layout.values(p), ...meta },
    };
  });
}

const ANSWER_LINE = 'Give the final answer on the last line as `Answer: <value>`.';

/** The chat of the monolithic baseline: one user message with the whole problem, no tool offered. */
export function monoChat(task: TaskName, p: Problem): { role: 'user'; content: string }[] {
  return [{ role: 'user', content: LAYOUTS[task].monoContent(p) }];
}

/** The root's chat for a problem (system prompt and user message), as the exported rows hold it and a text episode starts. */
export function rootChat(task: TaskName, p: Problem): { role: 'system' | 'user'; content: string }[] {
  const layout = LAYOUTS[task];
  return [
    { role: 'system', content: layout.systemPrompt(p) },
    { role: 'user', content: layout.userContent(p) },
  ];
}
