import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ModelCounters } from '../../core/io/provenance';
import type { StepMetrics } from '../../core/rl/grpoStep';
import type { EngineReplies, EngineRequest, EngineRequestKind } from '../../runtime/engine/messages';
import type { RequestOf } from '../engine/engine';
import { addMetrics } from '../state/events';
import { INITIAL_STATE, getState, setState } from '../state/store';
import type { SessionArchive } from './archive';
import { startAutosave } from './autosave';
import type { SavedSession } from './session';
import { onBeforeUnload } from './sessionActions';

/** An engine whose weights are at `counters`; an archive that only counts what it is given. */
let counters: ModelCounters;
const requests: EngineRequest[] = [];
const engine = {
  async request<K extends EngineRequestKind>(req: RequestOf<K>): Promise<EngineReplies[K]> {
    const r: EngineRequest = req;
    requests.push(r);
    // The origin is the imported weights at v0.
    const origin = r.kind === 'exportWeights' && r.origin === true;
    const reply: EngineReplies['exportWeights'] = {
      files: { 'model.safetensors': new Uint8Array([origin ? 0 : counters.policyVersion]) },
      counters: origin ? { policyVersion: 0, grpoSteps: 0, sftSteps: 0 } : { ...counters },
    };
    return reply as EngineReplies[K];
  },
};
const saves: SavedSession[] = [];
const archive = { save: async (s: SavedSession) => void saves.push(s), clear: async () => undefined, hasOrigin: () => true } as unknown as SessionArchive;

const row = (step: number) => ({ step }) as StepMetrics;
/** A GRPO step done by the engine and, `arrived`, its metrics row on the page. */
function engineStep(arrived = true): void {
  counters = { ...counters, policyVersion: counters.policyVersion + 1, grpoSteps: counters.grpoSteps + 1 };
  if (arrived) addMetrics([row(counters.grpoSteps)]);
}
const settle = async (ms: number) => {
  await vi.advanceTimersByTimeAsync(ms);
};

beforeEach(() => {
  vi.useFakeTimers();
  counters = { policyVersion: 0, grpoSteps: 0, sftSteps: 0 };
  requests.length = 0;
  saves.length = 0;
  setState({ ...INITIAL_STATE, engineState: 'idle', model: { preset: 'tiny', parameters: 1, policyVersion: 0, source: 'imported.tar' } }, true);
});
afterEach(() => vi.useRealTimers());

describe('autosave', () => {
  it('saves after a step, then at most every interval while steps go on, and at once when the loop stops', async () => {
    const autosave = startAutosave(engine, archive, 5000);
    setState({ engineState: 'training' });
    engineStep();
    await settle(10);
    expect(saves.map((s) => s.counters.grpoSteps)).toEqual([1]);
    // The first save also exported the origin (once per model).
    expect(requests.map((r) => r.kind === 'exportWeights' && (r.origin ?? false))).toEqual([false, true]);
    for (let i = 0; i < 3; i++) {
      await settle(1000);
      engineStep();
    }
    await settle(10);
    expect(saves).toHaveLength(1);
    await settle(2000);
    expect(saves.map((s) => s.counters.grpoSteps)).toEqual([1, 4]);
    await settle(500);
    engineStep();
    setState({ engineState: 'paused' });
    await settle(10);
    expect(saves.map((s) => s.counters.grpoSteps)).toEqual([1, 4, 5]);
    expect(saves[2].metrics.map((m) => m.metrics.step)).toEqual([1, 2, 3, 4, 5]);
    expect(requests.filter((r) => r.kind === 'exportWeights' && r.origin)).toHaveLength(1);
    autosave.stop();
  });

  it('waits for the rows of the saved weights (a metrics batch behind), and never saves rows beyond them', async () => {
    const autosave = startAutosave(engine, archive, 5000);
    engineStep();
    engineStep(false); // step 2 done in the engine, its row not yet on the page
    await settle(10);
    expect(saves).toHaveLength(0);
    expect(autosave.unsaved()).toBe(true);
    addMetrics([row(2)]);
    await settle(1300);
    expect(saves.map((s) => [s.counters.grpoSteps, s.metrics.length])).toEqual([[2, 2]]);
    // A row of a step the saved weights do not have yet is left out of the save, with its provenance.
    addMetrics([row(3)]);
    await settle(5000);
    expect(saves.at(-1)?.counters.grpoSteps).toBe(2);
    expect(saves.at(-1)?.metrics.map((m) => m.metrics.step) ?? []).not.toContain(3);
    const last = saves.at(-1)!.provenance.at(-1)!;
    expect(last.kind === 'grpo' ? last.lastStep : null).toBe(2);
    autosave.stop();
  });

  it('never writes weights ahead of the rows the page has, however many tries: the record is of one step', async () => {
    const autosave = startAutosave(engine, archive, 5000);
    setState({ engineState: 'training' });
    engineStep();
    engineStep(false);
    for (let i = 0; i < 10; i++) await settle(1300);
    expect(saves).toHaveLength(0);
    addMetrics([row(2)]);
    await settle(1300);
    for (const s of saves) {
      expect(s.metrics.at(-1)?.metrics.step).toBe(s.counters.grpoSteps);
      const lastSegment = s.provenance.at(-1);
      expect(lastSegment?.kind === 'grpo' ? lastSegment.lastStep : null).toBe(s.counters.grpoSteps);
    }
    expect(saves.map((s) => s.counters.grpoSteps)).toEqual([2]);
    autosave.stop();
  });

  it('warns before unload only while work is in flight or a change waits for its save', async () => {
    const autosave = startAutosave(engine, archive, 5000);
    const { attachSession } = await import('./sessionActions');
    attachSession(archive, autosave);
    const warned = () => {
      const e = { preventDefault: vi.fn(), returnValue: 'x' } as unknown as BeforeUnloadEvent;
      onBeforeUnload(e);
      return (e.preventDefault as ReturnType<typeof vi.fn>).mock.calls.length > 0;
    };
    expect(warned()).toBe(false);
    setState({ engineState: 'training' });
    expect(warned()).toBe(true);
    setState({ engineState: 'paused' });
    setState({ pending: 'step' });
    expect(warned()).toBe(true);
    setState({ pending: null });
    engineStep();
    expect(warned()).toBe(true); // the step's save is not written yet
    await settle(10);
    expect(getState().saved).toMatchObject({ step: 1 });
    expect(warned()).toBe(false);
    autosave.stop();
    attachSession(null, null);
  });
});
