/**
 * Held-out evaluation of a real model under the text protocol: greedy episodes on held-out
 * problems (splits.ts: disjoint from every training problem), as frontier points.
 */
import { type TextModel, runTextEpisode } from '../rollout/textEpisode';
import type { TextLimits } from '../rollout/textLimits';
import type { Problem, Task } from '../tasks/types';
import type { TaskName } from '../tasks';
import { monoChat, rootChat } from '../verl/dataset';
import { type FrontierPoint, type PointEpisode, pointOf } from './frontier';
import { textTokenCounts } from '../rollout/textTrace';

/**
 * One accuracy–cost point of a real model: `method` (delegate: the spawn_clone tool offered;
 * mono: one message with the whole problem, no tool) at a root token limit, greedy, on
 * `problems`, with the Wilson interval and the costs a frontier compares (frontier.ts's
 * FrontierPoint, so the same tables, charts and Pareto sets read it).
 */
export async function textFrontierPoint<O>(
  model: TextModel,
  task: Task<O>,
  problems: readonly Problem[],
  method: 'delegate' | 'mono',
  limit: number,
  limits: Omit<TextLimits, 'rootMaxTokens'>,
  onEpisode?: (done: number, total: number) => void,
): Promise<FrontierPoint> {
  const groups: PointEpisode[][] = [];
  for (const [i, problem] of problems.entries()) {
    const name = task.name as TaskName;
    const e = await runTextEpisode(
      model,
      method === 'delegate' ? rootChat(name, problem) : monoChat(name, problem),
      { ...limits, rootMaxTokens: limit },
      {
        context: problem.context ?? {},
        offerTool: method === 'delegate',
      },
    );
    groups.push([{ answer: e.answer, contexts: e.contexts, tokens: textTokenCounts(e.contexts, e.rounds) }]);
    onEpisode?.(i + 1, problems.length);
  }
  return pointOf(task, problems, method, limit, groups);
}
