/**
 * The delegation strategy a set of episodes shows: how often the root delegates at each
 * problem size, how many clones it starts, which budgets it asks for, and how often a budget is
 * too small for its subtask (below the tokens the clone's chain needs, so the clone is cut).
 *
 * It tells a warm start with no strategy (the naive teacher's: the delegation rate flat across
 * sizes, budgets spread over the buckets, too-small budgets as often as the teacher draws them)
 * from one with a strategy, and shows what RL learned; with each size's accuracy and tokens it
 * shows where the accuracy and the tokens of a mean come from. Pure: traces in, counts out.
 */
import type { EpisodeTrace } from '../rollout/trace';
import { chainText, operandCount, parseSum, reductionChain, tokenLength } from '../tasks/arithmetic';
import { BUDGET_BUCKETS } from '../tokenizer/vocab';

/** What the summary needs to know of a task. Model output never throws here: unknown is null. */
export interface StrategyProbe {
  /** A problem's size from its prompt (arithmetic: the operand count). */
  size(prompt: string): number | null;
  /** Tokens a clone needs for a subtask as the root wrote it (arithmetic: its chain's length). */
  need(subtask: string): number | null;
}

export interface SizeRow {
  size: number;
  episodes: number;
  /** Episodes whose root started at least one clone. */
  delegated: number;
  rate: number;
  /** Episodes answered correctly, and their share. */
  correct: number;
  accuracy: number;
  /** Mean generated tokens (root and clones) of the size's episodes. */
  meanTokens: number;
}

export interface StrategySummary {
  episodes: number;
  delegated: number;
  /** By problem size, ascending; episodes whose size is unknown are left out of the rows. */
  bySize: SizeRow[];
  /** Delegating episodes by their number of clones (all rounds). */
  cloneCounts: Record<number, number>;
  clones: number;
  /** Clones by budget: every bucket of `budgets` (zeros included), then any other budget seen. */
  budgets: Record<number, number>;
  /** Clones whose need is known (a subtask that parses), and of those the budgets below it. */
  judged: number;
  tooSmall: number;
  /** tooSmall / judged (0 when nothing was judged). */
  tooSmallShare: number;
}

/** The arithmetic probe: size = operand count, need = the chain of thought's tokens with its answer. */
export const arithmeticProbe: StrategyProbe = {
  size(prompt) {
    try {
      return operandCount(parseSum(prompt));
    } catch {
      return null;
    }
  },
  need(subtask) {
    try {
      const s = parseSum(subtask);
      reductionChain(s); // throws on a subtask the reducer cannot write (a negative product not first)
      return tokenLength(chainText(s));
    } catch {
      return null;
    }
  },
};

export function strategyOf(traces: readonly EpisodeTrace[], probe: StrategyProbe, budgets: readonly number[] = BUDGET_BUCKETS): StrategySummary {
  const rows = new Map<number, SizeRow>();
  const cloneCounts: Record<number, number> = {};
  const budgetCounts: Record<number, number> = Object.fromEntries(budgets.map((b) => [b, 0]));
  let delegated = 0;
  let clones = 0;
  let judged = 0;
  let tooSmall = 0;
  for (const t of traces) {
    const cs = t.contexts.filter((c) => c.role === 'clone');
    if (cs.length > 0) {
      delegated++;
      cloneCounts[cs.length] = (cloneCounts[cs.length] ?? 0) + 1;
    }
    const size = probe.size(t.prompt);
    if (size !== null) {
      const row = rows.get(size) ?? { size, episodes: 0, delegated: 0, rate: 0, correct: 0, accuracy: 0, meanTokens: 0 };
      row.episodes++;
      if (cs.length > 0) row.delegated++;
      if (t.correct) row.correct++;
      row.meanTokens += t.tokens.total; // a sum until the rows are finished below
      rows.set(size, row);
    }
    for (const c of cs) {
      clones++;
      if (c.budget === null) continue;
      budgetCounts[c.budget] = (budgetCounts[c.budget] ?? 0) + 1;
      const need = c.subtask === null ? null : probe.need(c.subtask);
      if (need === null) continue;
      judged++;
      if (c.budget < need) tooSmall++;
    }
  }
  const bySize = [...rows.values()]
    .sort((a, b) => a.size - b.size)
    .map((r) => ({ ...r, rate: r.delegated / r.episodes, accuracy: r.correct / r.episodes, meanTokens: r.meanTokens / r.episodes }));
  return {
    episodes: traces.length,
    delegated,
    bySize,
    cloneCounts,
    clones,
    budgets: budgetCounts,
    judged,
    tooSmall,
    tooSmallShare: judged === 0 ? 0 : tooSmall / judged,
  };
}
