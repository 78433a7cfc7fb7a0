import { describe, expect, it } from 'vitest';
import type { EpisodeTrace } from '../../core/rollout/trace';
import { newestRollout } from './newestRollout';
import type { EpisodeRow } from './store';

const row = (key: number, step: number, clones: number): EpisodeRow => ({
  key,
  step,
  trace: { contexts: Array.from({ length: 1 + clones }, (_, id) => ({ id })) } as unknown as EpisodeTrace,
});

describe('the rollout the tree follows', () => {
  it("is the newest step's last delegating rollout, else its last one; none without rollouts", () => {
    expect(newestRollout([])).toBeNull();
    expect(newestRollout([row(1, 1, 2), row(2, 2, 0), row(3, 2, 1), row(4, 2, 0)])?.key).toBe(3);
    expect(newestRollout([row(1, 1, 2), row(2, 2, 0), row(3, 2, 0)])?.key).toBe(3);
    // Rows arrive in any order: the step decides, not the position.
    expect(newestRollout([row(5, 3, 0), row(6, 2, 4)])?.key).toBe(5);
  });
});
