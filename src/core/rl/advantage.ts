/**
 * Advantages for the root and clone contexts of a batch of episodes, as the
 * reference computes them (`_compute_grpo_advantage_with_clones`, clone_reward_2.py).
 *
 * - GRPO over each prompt's group of G episodes: A = (R − mean) / (std + ε), with the
 *   sample standard deviation (N − 1, as verl's torch.std); without std normalisation
 *   (Dr. GRPO) A = R − mean. A group whose rewards are all equal carries no signal: it is
 *   skipped (every context weight 0) and counted.
 * - Clone reward: r_clone = R (the episode reward) for a clone that is not gated, 0 for a
 *   gated one. Nothing else is subtracted (the reference's 0.05 "format penalty" is only the
 *   on/off switch of gating).
 * - Clone credit: 'broadcast' gives each ungated clone its root's advantage (APR); 'ratio'
 *   (SELFCEST) gives A_clone = A_root · clamp(r_clone / d, −1.5, 1.5) with
 *   d = sign(R) · max(|R|, 1e-8) and sign(0) taken as +1, as the reference does. So an
 *   ungated clone gets factor 1 when |R| ≥ 1e-8, and factor 0 when R = 0 (r_clone = 0 too).
 * - Rollout gating, two modes: 'reference' gates a clone that wrote no answer AND spent its
 *   budget (the reference: no answer marker and more than 192 tokens), whatever the violation
 *   class; 'protocol' gates a clone with any violation. Optionally (`gateRoots`) also roots
 *   whose episode broke the protocol (not merely a wrong or long answer).
 * - A gated context's effective advantage is 0: its policy-gradient term is exactly zero.
 *   With `gatedKl` (default, as the reference) it stays in the batch with weight 1 — its KL
 *   term acts and its tokens count in the token-mean — exactly like an ungated context with
 *   advantage 0; without it, weight 0: it leaves the batch and gives no gradient at all.
 */
import type { Violation } from '../protocol/violations';
import type { ContextCredit, ContextTrace } from '../rollout/trace';

export type CloneCredit = 'broadcast' | 'ratio';
export type GateMode = 'reference' | 'protocol';

export interface AdvantageConfig {
  stdNormalize: boolean;
  credit: CloneCredit;
  /** Rollout gating on or off (the ablation's switch). */
  gating: boolean;
  /** Which clones a gate catches: no answer and budget spent ('reference'), or any violation ('protocol'). */
  gateMode: GateMode;
  /** A gated context keeps its KL term (weight 1, advantage 0) instead of leaving the batch. */
  gatedKl: boolean;
  /** Also gate roots whose episode broke the protocol (not merely a wrong or long answer). */
  gateRoots: boolean;
  eps: number;
  ratioClamp: number;
}

/** Added to the group std before dividing (not a run setting). */
export const CREDIT_EPS = 1e-6;
/** The clamp k of the ratio credit clamp(r_clone / d, −k, k) (not a run setting). */
export const RATIO_CLAMP = 1.5;

/** The smallest |denominator| of the ratio credit (the reference's eps). */
const RATIO_EPS = 1e-8;

/** Root violations that are protocol breaks (gated with gateRoots), not just failures. */
const ROOT_PROTOCOL: ReadonlySet<Violation> = new Set(['malformed_spawn', 'too_many_clones', 'too_many_rounds', 'reserved_token']);

/** What the credit reads of a context. */
export type CreditedContext = Pick<ContextTrace, 'role' | 'answer' | 'violation' | 'budget' | 'generatedTokens'>;

/** Whether a gate catches this context under `c` (false with gating off). */
export function isGated(ctx: CreditedContext, c: Pick<AdvantageConfig, 'gating' | 'gateMode' | 'gateRoots'>): boolean {
  if (!c.gating) return false;
  if (ctx.role === 'root') return c.gateRoots && ctx.violation !== null && ROOT_PROTOCOL.has(ctx.violation);
  if (c.gateMode === 'protocol') return ctx.violation !== null;
  return ctx.answer === null && ctx.budget !== null && ctx.generatedTokens >= ctx.budget;
}

/** The ratio-credit factor clamp(r_clone / d, −k, k), d = sign(R)·max(|R|, 1e-8), sign(0) = +1. */
export function ratioFactor(rClone: number, R: number, clamp: number): number {
  const d = (R < 0 ? -1 : 1) * Math.max(Math.abs(R), RATIO_EPS);
  return Math.min(clamp, Math.max(-clamp, rClone / d));
}

export type { ContextCredit };

export interface GroupStats {
  groups: number;
  zeroVarianceGroups: number;
  gatedContexts: number;
  contexts: number;
  /**
   * Policy-gradient mass of the batch before gating: Σ |A| · generated tokens over the contexts of
   * groups with signal, each with the advantage it has ungated (the loss is a token mean, so a
   * context weighs by its tokens).
   */
  gradientMass: number;
  /** The part of gradientMass in contexts the gate catches (with gating off: would catch, under its mode). */
  gatedMass: number;
  /** Σ and count of the advantages gated clones would have had ungated (with gating off: the clones it would catch). */
  gatedCloneAdvantage: number;
  gatedClones: number;
}

/** A group's baseline: mean and sample standard deviation (N − 1) of its rewards, and whether they are all equal (the group is skipped). */
export function groupBaseline(rewards: readonly number[]): { mean: number; std: number; zeroVariance: boolean } {
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  const variance = rewards.length > 1 ? rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / (rewards.length - 1) : 0;
  return { mean, std: Math.sqrt(variance), zeroVariance: rewards.every((r) => r === rewards[0]) };
}

/**
 * Credit for every context of every episode. `groups` lists, for each prompt, the indices
 * of its episodes in `episodes`; `rewards[i]` is episode i's reward.
 */
export function computeAdvantages(
  episodes: readonly { contexts: readonly CreditedContext[] }[],
  rewards: readonly number[],
  groups: readonly number[][],
  c: AdvantageConfig,
): { credits: ContextCredit[][]; stats: GroupStats } {
  if (rewards.length !== episodes.length) throw new Error('one reward per episode is needed');
  const rootAdvantage = new Array<number>(episodes.length).fill(0);
  const skipped = new Array<boolean>(episodes.length).fill(false);
  let zeroVarianceGroups = 0;
  for (const g of groups) {
    const { mean, std, zeroVariance } = groupBaseline(g.map((i) => rewards[i]));
    if (zeroVariance) {
      zeroVarianceGroups++;
      g.forEach((i) => (skipped[i] = true));
      continue;
    }
    g.forEach((i) => (rootAdvantage[i] = c.stdNormalize ? (rewards[i] - mean) / (std + c.eps) : rewards[i] - mean));
  }
  let gatedContexts = 0;
  let contexts = 0;
  let gradientMass = 0;
  let gatedMass = 0;
  let gatedCloneAdvantage = 0;
  let gatedClones = 0;
  const credits = episodes.map((ep, i) =>
    ep.contexts.map((ctx): ContextCredit => {
      contexts++;
      const R = rewards[i];
      const A = rootAdvantage[i];
      const gated = isGated(ctx, c);
      if (gated) gatedContexts++;
      if (!skipped[i]) {
        // What gating takes from this step (or would, with gating off): the context's ungated advantage.
        const ungated = ctx.role === 'root' || c.credit !== 'ratio' ? A : A * ratioFactor(R, R, c.ratioClamp);
        const mass = Math.abs(ungated) * ctx.generatedTokens;
        gradientMass += mass;
        if (isGated(ctx, { ...c, gating: true })) {
          gatedMass += mass;
          if (ctx.role === 'clone') {
            gatedCloneAdvantage += ungated;
            gatedClones++;
          }
        }
      }
      const weight = skipped[i] || (gated && !c.gatedKl) ? 0 : 1;
      if (ctx.role === 'root') return { advantage: gated ? 0 : A, weight, gated, reward: R };
      const rClone = gated ? 0 : R;
      // `+ 0` turns a −0 (a negative A times factor 0) into 0 in the recorded trace.
      const advantage = gated ? 0 : c.credit === 'ratio' ? A * ratioFactor(rClone, R, c.ratioClamp) + 0 : A;
      return { advantage, weight, gated, reward: rClone };
    }),
  );
  return { credits, stats: { groups: groups.length, zeroVarianceGroups, gatedContexts, contexts, gradientMass, gatedMass, gatedCloneAdvantage, gatedClones } };
}
