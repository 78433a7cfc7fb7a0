/**
 * The task registry: every task the playground and CLI can run, by name, each with the type of
 * its options. Code that handles "some task" takes a `TaskEntry` (a task and options it has
 * validated), so a task's generator never sees another task's options.
 */
import { type ArithmeticOptions, arithmetic } from './arithmetic';
import { type MultihopOptions, multihop } from './multihop';
import type { Task } from './types';

export type { Demonstration, DemoContext, OptionPreset, Problem, Segment, Task, TeacherStyle, Verdict } from './types';
export { TEACHER_STYLES } from './types';

/** Each task's options, by task name. */
export interface TaskOptions {
  arithmetic: ArithmeticOptions;
  multihop: MultihopOptions;
}

export type TaskName = keyof TaskOptions;

export const TASKS: { readonly [N in TaskName]: Task<TaskOptions[N]> } = { arithmetic, multihop };

export const TASK_NAMES: readonly TaskName[] = Object.keys(TASKS).filter(isTaskName);

/** The options of some registered task. */
export type AnyTaskOptions = TaskOptions[TaskName];
/** Some registered task, looked up by a name known only at run time. */
export type AnyTask = Task<AnyTaskOptions>;

/** A task bundled with options it has validated: what code that handles "some task" passes on. */
export interface TaskEntry<O = AnyTaskOptions> {
  readonly task: Task<O>;
  readonly opts: O;
}

/** Own entries only: a name such as 'constructor' must not find Object.prototype's. */
export function isTaskName(name: string): name is TaskName {
  return Object.hasOwn(TASKS, name);
}

export function getTask<N extends TaskName>(name: N): Task<TaskOptions[N]>;
export function getTask(name: string): AnyTask;
export function getTask(name: string): AnyTask {
  if (!isTaskName(name)) throw new Error(`unknown task ${JSON.stringify(name)} (available: ${TASK_NAMES.join(', ')})`);
  return TASKS[name];
}

/**
 * The task `name` with its options validated from `raw` (JSON from a file, the CLI or the page;
 * undefined: the defaults). Throws for an unknown task or a bad option, naming it.
 */
export function withOptions<N extends TaskName>(name: N, raw?: unknown): TaskEntry<TaskOptions[N]>;
export function withOptions(name: string, raw?: unknown): TaskEntry;
export function withOptions(name: string, raw?: unknown): TaskEntry {
  const task = getTask(name);
  return { task, opts: task.validateOptions(raw) };
}
