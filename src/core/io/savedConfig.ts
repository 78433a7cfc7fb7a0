/**
 * Configs saved by an older build: what they lack is filled in with what that build did, so the
 * resume check (src/cli/runDir.ts) and the Runs panel's config comparison (src/app/runs/configDiff.ts)
 * read an old run the same way. Pure.
 */

export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `saved` with every key it lacks (at any depth) taken from `implied`. */
export function withImplied(saved: Record<string, unknown>, implied: Record<string, unknown>): Record<string, unknown> {
  const out = { ...saved };
  for (const [k, v] of Object.entries(implied)) {
    if (!(k in out)) out[k] = v;
    else if (isRecord(out[k]) && isRecord(v)) out[k] = withImplied(out[k] as Record<string, unknown>, v);
  }
  return out;
}

/** What a GRPO run saved before the token cost, its schedule and the restart at the switch had: none (a rate of 0, from the first step, one optimizer). */
export const GRPO_IMPLIED = { reward: { tokenRate: 0 }, tokenRateAfter: 0, restartOptimizer: false } as const;

/** What a warm start saved before its limits and teacher were recorded had: the full budget menu, 4 clones a round, 3 rounds, the expert teacher. */
export const SFT_IMPLIED = { limits: { budgets: [8, 16, 32, 64, 128], maxClonesPerRound: 4, maxRounds: 3 }, teacher: 'expert' } as const;
