/**
 * What the slow-motion view shows of one prompt's group (core/rl/anatomy.ts), stage by stage:
 * rollouts → rewards with their terms → group advantages → clone credit and gates → the
 * update's effect on each generated token's log-prob. Pure: the panel only draws this.
 */
import type { StepAnatomy } from '../../core/rl/anatomy';
import { ratioFactor } from '../../core/rl/advantage';
import type { RewardBreakdown } from '../../core/rl/reward';
import type { ContextTrace } from '../../core/rollout/trace';
import { contextPieces } from '../tokens/tokenText';

export const STAGES = ['Rollouts', 'Rewards', 'Advantages', 'Credit & gates', 'Update'] as const;
export type Stage = 0 | 1 | 2 | 3 | 4;

/** The reward's terms in the order they add up: score − penalties = R. */
export function rewardTerms(b: RewardBreakdown): { label: string; value: number }[] {
  return [
    { label: 'score', value: b.score },
    { label: 'root length', value: -b.rootPenalty },
    { label: 'clone length', value: -b.clonePenalty },
    { label: 'calls', value: -b.callPenalty },
    { label: 'unused budget', value: -b.budgetPenalty },
    { label: 'tokens', value: -(b.tokenPenalty ?? 0) },
  ];
}

export interface TokenDelta {
  text: string;
  special: boolean;
  before: number;
  after: number;
}

export interface ContextRow {
  id: number;
  role: 'root' | 'clone';
  budget: number | null;
  answer: string | null;
  violation: string | null;
  generated: number;
  gated: boolean;
  /** The reward the context is credited with (R, or r_clone). */
  reward: number;
  advantage: number;
  weight: number;
  /** A clone's credit factor clamp(r_clone / R) under ratio credit; null for roots and broadcast credit. */
  factor: number | null;
  tokens: TokenDelta[];
  /** Mean of after − before over the generated tokens (0 without any). */
  meanDelta: number;
}

export interface EpisodeColumn {
  index: number;
  answer: string | null;
  correct: boolean;
  reward: RewardBreakdown;
  /** The root's advantage (0 in a skipped group). */
  advantage: number;
  contexts: ContextRow[];
}

/** The k-th generated token of a context with its log-prob before (behaviour) and after the update. */
function deltas(ctx: ContextTrace, after: readonly number[]): TokenDelta[] {
  const out: TokenDelta[] = [];
  // The model's own pieces where its tokens are subwords, else the toy's characters.
  const pieces = contextPieces(ctx);
  let k = 0;
  for (let p = 1; p < ctx.tokens.length; p++) {
    if (ctx.writers[p] !== 'g') continue;
    out.push({ text: pieces[p].text, special: pieces[p].special, before: ctx.logprobs[k], after: after[k] });
    k++;
  }
  return out;
}

export function groupColumns(a: StepAnatomy, group: number): EpisodeColumn[] {
  const g = a.groups[group];
  if (g === undefined) throw new Error(`slow motion: no prompt group ${group} (the step has ${a.groups.length})`);
  return g.episodes.map((i) => {
    const t = a.traces[i];
    const R = t.reward?.reward ?? 0;
    const contexts = t.contexts.map((ctx, j): ContextRow => {
      const credit = ctx.credit ?? { advantage: 0, weight: 0, gated: false, reward: R };
      const tokens = deltas(ctx, a.after[i][j]);
      const factor = ctx.role === 'clone' && a.settings.credit === 'ratio' && !credit.gated ? ratioFactor(credit.reward, R, a.settings.ratioClamp) : null;
      return {
        id: ctx.id,
        role: ctx.role,
        budget: ctx.budget,
        answer: ctx.answer,
        violation: ctx.violation,
        generated: ctx.generatedTokens,
        gated: credit.gated,
        reward: credit.reward,
        advantage: credit.advantage,
        weight: credit.weight,
        factor,
        tokens,
        meanDelta: tokens.length === 0 ? 0 : tokens.reduce((s, d) => s + (d.after - d.before), 0) / tokens.length,
      };
    });
    return {
      index: i,
      answer: t.answer,
      correct: t.correct,
      reward: t.reward ?? { reward: R, score: 0, rootPenalty: 0, clonePenalty: 0, callPenalty: 0, budgetPenalty: 0 },
      advantage: contexts[0]?.advantage ?? 0,
      contexts,
    };
  });
}

/** How a group's advantages were formed, in words with its numbers. */
export function baselineText(a: StepAnatomy, group: number): string {
  const g = a.groups[group];
  if (g.zeroVariance) return `every reward is ${g.mean.toFixed(3)}: no signal, the group is skipped (advantage 0, weight 0)`;
  const mean = `mean ${g.mean.toFixed(3)}`;
  if (!g.trained) return `${mean}, std ${g.std.toFixed(3)}; left out of the batch by dynamic sampling`;
  return a.settings.stdNormalize
    ? `A = (R − ${g.mean.toFixed(3)}) / (${g.std.toFixed(3)} + ${a.settings.eps})  (${mean}, sample std ${g.std.toFixed(3)})`
    : `A = R − ${g.mean.toFixed(3)}  (Dr. GRPO: no std normalisation)`;
}

/** The largest |after − before| over a group's generated tokens: the colour scale of stage 5 (0 when nothing moved). */
export function deltaScale(cols: readonly EpisodeColumn[]): number {
  let m = 0;
  for (const c of cols) for (const ctx of c.contexts) for (const t of ctx.tokens) m = Math.max(m, Math.abs(t.after - t.before));
  return m;
}

/** A colour for a log-prob change: green up, red down, full strength at ±`scale`. */
export function deltaColour(d: number, scale: number): string {
  const alpha = scale > 0 ? Math.round(Math.min(1, Math.abs(d) / scale) * 60) : 0;
  return `color-mix(in srgb, var(${d >= 0 ? '--ok' : '--error'}) ${alpha}%, transparent)`;
}
