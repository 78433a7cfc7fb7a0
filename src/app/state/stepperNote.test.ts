import { describe, expect, it } from 'vitest';
import { TRACE_SCHEMA, type EpisodeEvent } from '../../core/rollout/trace';
import type { StepperState } from '../../runtime/engine/messages';
import { advanceNote } from './stepperNote';

function state(events: EpisodeEvent[], done: boolean): StepperState {
  const tokens = { root: 0, clonesTotal: 0, longestClonePerRound: [], criticalPath: 0, total: 0 };
  return {
    trace: {
      schema: TRACE_SCHEMA,
      policyVersion: 0,
      task: 'arithmetic',
      problemId: 'p',
      prompt: '1+2',
      truth: '3',
      method: 'delegate',
      answer: null,
      correct: false,
      rounds: 0,
      contexts: [],
      events,
      violations: [],
      tokens,
    },
    live: [],
    done,
  };
}

const spawn: EpisodeEvent = { kind: 'spawn', round: 0, atToken: 5, clones: [1] };
const join: EpisodeEvent = { kind: 'join', round: 0, atToken: 9, answers: ['3'] };

describe('the stepper note', () => {
  it('says so when "To next spawn" ran to the end without one', () => {
    expect(advanceNote(state([], false), state([], true), 'spawn')).toBe('no further spawn in this episode: it ran to its end');
    // After an earlier spawn and join, none further.
    expect(advanceNote(state([spawn, join], false), state([spawn, join], true), 'spawn')).toMatch(/^no further spawn/);
  });

  it('is silent when a spawn or join stopped it, when it did not end, or for the other buttons', () => {
    expect(advanceNote(state([], false), state([spawn], false), 'spawn')).toBeNull();
    expect(advanceNote(state([spawn], false), state([spawn, join], true), 'spawn')).toBeNull();
    expect(advanceNote(state([], false), state([], true), 'end')).toBeNull();
    expect(advanceNote(state([], false), state([], true), 'token')).toBeNull();
    expect(advanceNote(null, state([], true), 'spawn')).toBeNull();
  });
});
