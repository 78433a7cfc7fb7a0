/**
 * The SELFCEST episode reward, plus a budget cost of our own:
 *
 *   R = s − P(root generated; τr, ρr, Pr) − max over rounds P(longest clone of the round; τc, ρc, Pc)
 *         − max(0, callRate·#spawn calls − callFree) − budgetRate·Σ_clones max(0, budget − generated)
 *         − tokenRate·(tokens generated, root and every clone)
 *
 * with P(n; τ, ρ, Pmax) = 0 for n ≤ τ, else Pmax·(1 − exp(−(n − τ)/ρ)), and s = 1 for an
 * exact answer, else the partial credit 0.2 / log2(2 + |A − B| / sqrt(2 + max(|A|, |B|))).
 * The clone penalty is on the critical path (longest clone per round), not the sum.
 *
 * Partial credit: the reference divides by sqrt(|2 + max(A, B)|), which is 0 when the larger
 * number is −2 (the credit collapses to 0) and tiny near it, so it misranks negative answers.
 * sqrt(2 + max(|A|, |B|)) equals it whenever max(A, B) ≥ |min(A, B)| (so for every pair of
 * non-negative numbers, bit for bit), is never below √2, and scores (−A, −B) as (A, B).
 *
 * Budget cost (default rate 0, the reference has none): each clone's reserved budget that it
 * did not use, summed over the clones of the episode. A budget too small already fails (the
 * clone runs over it); with a rate > 0 a budget too large wastes, so the root's choice of
 * budget matters in both directions. The sum, not the critical path: a reservation holds
 * context (memory) whether or not it is on the longest path.
 *
 * Token cost (default rate 0, also our own): every generated token, root and clones, costs the
 * same. The length penalties are free up to their τ and price only the root and the critical
 * path, so they cannot tell a 13-token monolithic chain from a 45-token delegation of the same
 * short problem; a per-token cost can, and lets a root learn that delegation pays only where a
 * monolithic chain does not fit.
 */
import type { ContextTrace, EpisodeTrace, RewardBreakdown, TokenCounts } from '../rollout/trace';

export interface RewardConfig {
  rootTau: number;
  rootRho: number;
  rootPmax: number;
  cloneTau: number;
  cloneRho: number;
  clonePmax: number;
  /** Penalty per spawn call (round) beyond the free ones: max(0, rate·calls − free). */
  callRate: number;
  callFree: number;
  /** Cost per reserved clone-budget token the clone did not generate. */
  budgetRate: number;
  /** Cost per generated token (root and clones). */
  tokenRate: number;
  /** Partial numeric credit for wrong answers. */
  partialCredit: boolean;
}

/** Spawn calls whose penalty is forgiven: callRate·#calls − callFree (not a run setting). */
export const CALL_FREE = 0.2;

/** RewardConfig's fields, in the order the verl reward file's CONFIG block lists them. */
export const REWARD_FIELDS = [
  'rootTau',
  'rootRho',
  'rootPmax',
  'cloneTau',
  'cloneRho',
  'clonePmax',
  'callRate',
  'callFree',
  'budgetRate',
  'tokenRate',
  'partialCredit',
] as const satisfies readonly (keyof RewardConfig)[];

/** The length penalty P(n; τ, ρ, Pmax). */
export function lengthPenalty(n: number, tau: number, rho: number, pmax: number): number {
  return n <= tau ? 0 : pmax * (1 - Math.exp(-(n - tau) / rho));
}

/** Partial credit for a wrong numeric answer A against the truth B (scale: see the file comment). */
export function partialCredit(a: number, b: number): number {
  return 0.2 / Math.log2(2 + Math.abs(a - b) / Math.sqrt(2 + Math.max(Math.abs(a), Math.abs(b))));
}

/** Reserved clone-budget tokens the clones did not generate: Σ max(0, budget − generated). */
export function unusedBudget(contexts: readonly Pick<ContextTrace, 'role' | 'budget' | 'generatedTokens'>[]): number {
  return contexts.reduce((n, c) => n + (c.role === 'clone' && c.budget !== null ? Math.max(0, c.budget - c.generatedTokens) : 0), 0);
}

/** What the reward reads of an episode. */
export type RewardedEpisode = Pick<EpisodeTrace, 'correct' | 'rounds'> & {
  tokens: Pick<TokenCounts, 'root' | 'longestClonePerRound' | 'total'>;
  contexts: readonly Pick<ContextTrace, 'role' | 'budget' | 'generatedTokens'>[];
};

export type { RewardBreakdown };

/**
 * Reward of one episode. `value` and `truthValue` are the parsed numeric answer and truth
 * (null when not numeric); `correct` is exact match.
 */
export function episodeReward(trace: RewardedEpisode, verdict: { value: number | null; truthValue: number | null }, c: RewardConfig): RewardBreakdown {
  let score = 0;
  if (trace.correct) score = 1;
  else if (c.partialCredit && verdict.value !== null && verdict.truthValue !== null) {
    score = partialCredit(verdict.value, verdict.truthValue);
    if (!Number.isFinite(score)) score = 0;
  }
  const rootPenalty = lengthPenalty(trace.tokens.root, c.rootTau, c.rootRho, c.rootPmax);
  const clonePenalty = Math.max(0, ...trace.tokens.longestClonePerRound.map((n) => lengthPenalty(n, c.cloneTau, c.cloneRho, c.clonePmax)));
  const callPenalty = Math.max(0, c.callRate * trace.rounds - c.callFree);
  const budgetPenalty = c.budgetRate * unusedBudget(trace.contexts);
  const tokenPenalty = c.tokenRate * trace.tokens.total;
  return {
    reward: score - rootPenalty - clonePenalty - callPenalty - budgetPenalty - tokenPenalty,
    score,
    rootPenalty,
    clonePenalty,
    callPenalty,
    budgetPenalty,
    tokenPenalty,
  };
}
