/**
 * What the stepper says after an advance that did not do what its button names: "To next spawn"
 * on an episode that spawns no more runs to the end (the engine stops there), and says so.
 */
import type { StepperState } from '../../runtime/engine/messages';

export type Advance = 'token' | 'spawn' | 'end';

export function advanceNote(before: StepperState | null, after: StepperState | null, until: Advance): string | null {
  if (until !== 'spawn' || !before || !after || !after.done) return null;
  const spawned = after.trace.events.slice(before.trace.events.length).some((e) => e.kind === 'spawn' || e.kind === 'join');
  return spawned ? null : 'no further spawn in this episode: it ran to its end';
}
