/** The task registry: every task the playground and CLI can run, by name. */
import { arithmetic } from './arithmetic';
import { multihop } from './multihop';
import type { Task } from './types';

export type { Demonstration, DemoContext, Problem, Segment, Task, Verdict } from './types';

export const TASKS: Record<string, Task<never>> = {
  arithmetic: arithmetic as unknown as Task<never>,
  multihop: multihop as unknown as Task<never>,
};

export function getTask(name: string): Task<never> {
  const t = TASKS[name];
  if (!t) throw new Error(`unknown task ${JSON.stringify(name)} (available: ${Object.keys(TASKS).join(', ')})`);
  return t;
}
