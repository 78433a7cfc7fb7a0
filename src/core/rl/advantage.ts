/**
 * Advantages for the root and clone contexts of a batch of episodes (DESIGN §1, §5).
 *
 * - GRPO over each prompt's group of G episodes: A = (R − mean) / (std + ε), with the
 *   sample standard deviation (N − 1, as verl's torch.std); without std normalisation
 *   (Dr. GRPO) A = R − mean. A group whose rewards are all equal carries no signal: it is
 *   skipped (every context weight 0) and counted.
 * - Clone credit: 'broadcast' gives each clone its root's advantage (APR); 'ratio' scales
 *   it by clamp(r_clone / r_root, −1.5, 1.5) with r_clone = R − the clone's format penalty
 *   (SELFCEST). When r_root is 0 the ratio is undefined and taken as 1.
 * - Rollout gating: a clone in a violation class gets weight 0 (r_clone = 0 in the paper):
 *   its tokens give exactly zero gradient. Optionally roots with protocol violations too.
 */
import type { Violation } from '../protocol/violations';
import type { ContextTrace } from '../rollout/trace';

export type CloneCredit = 'broadcast' | 'ratio';

export interface AdvantageConfig {
  stdNormalize: boolean;
  credit: CloneCredit;
  gating: boolean;
  /** Also gate roots whose episode broke the protocol (not merely a wrong or long answer). */
  gateRoots: boolean;
  eps: number;
  ratioClamp: number;
  cloneFormatPenalty: number;
}

export const ADVANTAGE_DEFAULTS: AdvantageConfig = {
  stdNormalize: true,
  credit: 'ratio',
  gating: true,
  gateRoots: false,
  eps: 1e-6,
  ratioClamp: 1.5,
  cloneFormatPenalty: 0.05,
};

/** Root violations that are protocol breaks (gated with gateRoots), not just failures. */
const ROOT_PROTOCOL: ReadonlySet<Violation> = new Set(['malformed_spawn', 'too_many_clones', 'too_many_rounds', 'reserved_token']);

export interface ContextCredit {
  advantage: number;
  /** 1 = trained on, 0 = gated or skipped. */
  weight: number;
  gated: boolean;
  /** The reward this context is credited with (R for roots, r_clone for clones). */
  reward: number;
}

export interface GroupStats {
  groups: number;
  zeroVarianceGroups: number;
  gatedContexts: number;
  contexts: number;
}

/**
 * Credit for every context of every episode. `groups` lists, for each prompt, the indices
 * of its episodes in `episodes`; `rewards[i]` is episode i's reward.
 */
export function computeAdvantages(
  episodes: readonly { contexts: readonly Pick<ContextTrace, 'role' | 'answer' | 'violation'>[] }[],
  rewards: readonly number[],
  groups: readonly number[][],
  c: AdvantageConfig,
): { credits: ContextCredit[][]; stats: GroupStats } {
  if (rewards.length !== episodes.length) throw new Error('one reward per episode is needed');
  const rootAdvantage = new Array<number>(episodes.length).fill(0);
  const skipped = new Array<boolean>(episodes.length).fill(false);
  let zeroVarianceGroups = 0;
  for (const g of groups) {
    const rs = g.map((i) => rewards[i]);
    const mean = rs.reduce((a, b) => a + b, 0) / rs.length;
    const variance = rs.length > 1 ? rs.reduce((a, r) => a + (r - mean) ** 2, 0) / (rs.length - 1) : 0;
    const std = Math.sqrt(variance);
    if (rs.every((r) => r === rs[0])) {
      zeroVarianceGroups++;
      g.forEach((i) => (skipped[i] = true));
      continue;
    }
    g.forEach((i) => (rootAdvantage[i] = c.stdNormalize ? (rewards[i] - mean) / (std + c.eps) : rewards[i] - mean));
  }
  let gatedContexts = 0;
  let contexts = 0;
  const credits = episodes.map((ep, i) =>
    ep.contexts.map((ctx): ContextCredit => {
      contexts++;
      const R = rewards[i];
      const A = rootAdvantage[i];
      if (ctx.role === 'root') {
        const gated = c.gating && c.gateRoots && ctx.violation !== null && ROOT_PROTOCOL.has(ctx.violation);
        if (gated) gatedContexts++;
        return { advantage: A, weight: skipped[i] || gated ? 0 : 1, gated, reward: R };
      }
      const rClone = R - (ctx.answer === null ? c.cloneFormatPenalty : 0);
      const gated = c.gating && ctx.violation !== null;
      if (gated) gatedContexts++;
      let advantage = A;
      if (c.credit === 'ratio') {
        const ratio = Math.abs(R) < 1e-12 ? 1 : rClone / R;
        advantage = A * Math.min(c.ratioClamp, Math.max(-c.ratioClamp, ratio));
      }
      return { advantage, weight: skipped[i] || gated ? 0 : 1, gated, reward: gated ? 0 : rClone };
    }),
  );
  return { credits, stats: { groups: groups.length, zeroVarianceGroups, gatedContexts, contexts } };
}
