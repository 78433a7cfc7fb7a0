/**
 * The one question before work is thrown away: Reset, a preset or checkpoint switch, an import
 * and Start fresh replace the model, and with it the curves, rollouts and frontier of this
 * session. Asked only when there is something to lose (a step taken or a point evaluated);
 * `setConfirm` swaps window.confirm for tests.
 */
import { originCounters } from '../../core/io/provenance';
import type { KeptRun } from '../runs/keptRun';
import { type PlaygroundState, getState } from '../state/store';

let ask: (message: string) => boolean = (message) => (typeof window === 'undefined' ? true : window.confirm(message));

export function setConfirm(fn: (message: string) => boolean): void {
  ask = fn;
}

type DiscardState = Pick<PlaygroundState, 'metrics' | 'sftMetrics' | 'frontier' | 'episodes' | 'policyVersion' | 'model' | 'keptRuns' | 'provenance'>;

/**
 * The kept run that holds exactly the current history (Keep run pressed, nothing since): same
 * model source, counters, rows and frontier points. Null when there is none.
 */
export function keptCurrentRun(s: DiscardState): KeptRun | null {
  if (s.model === null) return null;
  const origin = originCounters(s.provenance);
  const grpoSteps = s.metrics.at(-1)?.metrics.step ?? origin.grpoSteps;
  const sftSteps = s.sftMetrics.at(-1)?.step ?? origin.sftSteps;
  const source = s.model.source;
  return (
    s.keptRuns.find(
      (r) =>
        r.origin.kind === 'page' &&
        r.origin.model.source === source &&
        r.counters.policyVersion === s.policyVersion &&
        r.counters.grpoSteps === grpoSteps &&
        r.counters.sftSteps === sftSteps &&
        r.metrics.length === s.metrics.length &&
        r.frontier.length === s.frontier.length,
    ) ?? null
  );
}

/** What replacing the model would discard, in words; null when there is nothing to discard. */
export function discardSummary(s: DiscardState): string | null {
  if (s.metrics.length === 0 && s.sftMetrics.length === 0 && s.frontier.length === 0) return null;
  const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;
  const rollouts = s.episodes.length > 0 ? plural(s.episodes.length, 'rollout') : null;
  const kept = keptCurrentRun(s);
  // Curves and frontier already kept in the Runs panel are not lost: only the weights and the rollouts.
  if (kept !== null)
    return `the weights at policy v${s.policyVersion}${rollouts ? ` and ${rollouts}` : ''} (the curves and frontier points are kept as run "${kept.name}" in the Runs panel)`;
  const parts: string[] = [];
  if (s.metrics.length > 0) parts.push(`${plural(s.metrics.length, 'GRPO step')} of curves`);
  if (s.sftMetrics.length > 0) parts.push(plural(s.sftMetrics.length, 'warm-start step'));
  if (rollouts) parts.push(rollouts);
  if (s.frontier.length > 0) parts.push(plural(s.frontier.length, 'frontier point'));
  return `the weights at policy v${s.policyVersion} and ${parts.join(', ')}`;
}

/** True when `action` may go ahead: nothing to lose, or the user said yes. */
export function confirmDiscard(action: string): boolean {
  const lost = discardSummary(getState());
  if (lost === null) return true;
  return ask(`${action} discards ${lost}. Export the weights (Checkpoint panel) first to keep them.\n\nDiscard and continue?`);
}

/** Any other question before something is deleted for good (a kept run): the same dialog, the same test hook. */
export function confirmAction(message: string): boolean {
  return ask(message);
}
