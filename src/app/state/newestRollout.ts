/**
 * The rollout the tree panel follows while nothing is picked: of the newest step's rollouts, the
 * last that started a clone (the idea on screen), else the last one.
 */
import type { EpisodeRow } from './store';

export function newestRollout(episodes: readonly EpisodeRow[]): EpisodeRow | null {
  if (episodes.length === 0) return null;
  const step = Math.max(...episodes.map((e) => e.step));
  const newest = episodes.filter((e) => e.step === step);
  const delegating = newest.filter((e) => e.trace.contexts.length > 1);
  return delegating[delegating.length - 1] ?? newest[newest.length - 1];
}
