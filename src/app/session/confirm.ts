/**
 * The one question before work is thrown away: Reset, a preset or checkpoint switch, an import
 * and Start fresh replace the model, and with it the curves, rollouts and frontier of this
 * session. Asked only when there is something to lose (a step taken or a point evaluated);
 * `setConfirm` swaps window.confirm for tests.
 */
import { type PlaygroundState, getState } from '../state/store';

let ask: (message: string) => boolean = (message) => (typeof window === 'undefined' ? true : window.confirm(message));

export function setConfirm(fn: (message: string) => boolean): void {
  ask = fn;
}

/** What replacing the model would discard, in words; null when there is nothing to discard. */
export function discardSummary(s: Pick<PlaygroundState, 'metrics' | 'sftMetrics' | 'frontier' | 'episodes' | 'policyVersion'>): string | null {
  if (s.metrics.length === 0 && s.sftMetrics.length === 0 && s.frontier.length === 0) return null;
  const parts: string[] = [];
  if (s.metrics.length > 0) parts.push(`${s.metrics.length} GRPO step${s.metrics.length === 1 ? '' : 's'} of curves`);
  if (s.sftMetrics.length > 0) parts.push(`${s.sftMetrics.length} warm-start step${s.sftMetrics.length === 1 ? '' : 's'}`);
  if (s.episodes.length > 0) parts.push(`${s.episodes.length} rollout${s.episodes.length === 1 ? '' : 's'}`);
  if (s.frontier.length > 0) parts.push(`${s.frontier.length} frontier point${s.frontier.length === 1 ? '' : 's'}`);
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
