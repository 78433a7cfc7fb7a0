/**
 * Per-step rows from a run's traces alone (a verl run read back, or any traces.jsonl without its
 * metrics.jsonl): the episode means a GRPO metrics row holds, by the same definitions as the
 * trainer's (summarize), and NaN for what traces cannot tell (loss, KL, clipping, timing). Pure.
 */
import { type EpisodeTrace, recordedReward } from '../rollout/trace';
import type { StepMetrics } from '../rl/grpoStep';
import { summarize } from './evaluate';

/** A trace line as a run writes it: the episode and the training step that sampled it. */
export type SteppedTrace = EpisodeTrace & { step?: number };

const UNKNOWN = NaN;

/**
 * Rows count steps from 1 (the trainer's first step writes step 1); a source that counts from 0
 * is shifted by one. What to add to a trace's step to number it as its row (and its stored copy).
 */
export function stepShift(traces: readonly SteppedTrace[]): number {
  return traces.some((t) => t.step === 0) ? 1 : 0;
}

/**
 * One row per step, in step order. A trace without `step` counts as step 1 (a file of one batch);
 * steps counted from 0 are shown from 1.
 * Throws when no episode of a step carries a reward (the curves' first quantity).
 */
export function rowsFromTraces(traces: readonly SteppedTrace[]): (StepMetrics & { episodes: number })[] {
  const bySteps = new Map<number, SteppedTrace[]>();
  for (const t of traces) {
    const step = t.step ?? 1;
    const list = bySteps.get(step);
    if (list) list.push(t);
    else bySteps.set(step, [t]);
  }
  const shift = stepShift(traces);
  return [...bySteps.keys()]
    .sort((a, b) => a - b)
    .map((step) => {
      const episodes = bySteps.get(step)!;
      const rewards = episodes.map(recordedReward).filter((r): r is number => r !== null);
      if (rewards.length === 0) throw new Error(`traces of step ${step} carry no reward (neither reward nor sourceReward)`);
      const s = summarize(episodes);
      const clones = episodes.flatMap((t) => t.contexts.filter((c) => c.role === 'clone'));
      const credited = clones.filter((c) => c.credit);
      return {
        step: step + shift,
        /** The rollouts of this step the file holds (a sample, in a trainer's traces). */
        episodes: episodes.length,
        meanReward: rewards.reduce((a, b) => a + b, 0) / rewards.length,
        accuracy: s.accuracy,
        meanRootTokens: s.meanRootTokens,
        meanCloneTokens: s.meanTokens - s.meanRootTokens,
        meanCriticalPathTokens: s.meanCriticalPathTokens,
        meanTotalTokens: s.meanTokens,
        clonesPerEpisode: s.meanClones,
        delegationRate: s.delegationRate,
        violations: s.violations,
        gateRate: credited.length === 0 ? UNKNOWN : credited.filter((c) => c.credit!.gated).length / credited.length,
        gatedMassShare: UNKNOWN,
        gatedCloneAdvantage: UNKNOWN,
        zeroVarianceFraction: UNKNOWN,
        groupsSampled: UNKNOWN,
        groupsDropped: UNKNOWN,
        loss: UNKNOWN,
        kl: UNKNOWN,
        clipFraction: UNKNOWN,
        dualClipFraction: UNKNOWN,
        approxKl: UNKNOWN,
        entropy: UNKNOWN,
        clipOutOfReach: UNKNOWN,
        gradNorm: UNKNOWN,
        updates: UNKNOWN,
        nonFiniteSkips: UNKNOWN,
        trainedTokens: UNKNOWN,
        rolloutTokensPerSec: UNKNOWN,
        wallSec: UNKNOWN,
      };
    });
}
