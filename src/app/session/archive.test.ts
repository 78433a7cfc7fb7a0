import 'fake-indexeddb/auto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sampleTrace } from '../../core/rollout/traceFixture';
import { loadEvent, recordSteps, trainingSettings } from '../../core/io/provenance';
import type { StepMetrics } from '../../core/rl/grpoStep';
import { PAGE_DEFAULTS } from '../../core/runConfig';
import { type KeyValueStore, SessionArchive } from './archive';
import { idbStore } from './idbStore';
import type { SavedSession } from './session';

const SHIPPED = 'public/checkpoints/warmstart-tiny';
const shippedFiles = () => Object.fromEntries(readdirSync(SHIPPED).map((name) => [name, new Uint8Array(readFileSync(join(SHIPPED, name)))]));

const trace = sampleTrace({ problemId: 'train-1-0' });

let dbCount = 0;
/** A fresh IndexedDB database (fake-indexeddb) per test; `open` gives another handle on it, as a reload would. */
function freshDb(): { open: () => KeyValueStore } {
  const name = `selfcest-test-${dbCount++}`;
  return { open: () => idbStore(name, 'session') };
}

/** A session after `steps` GRPO steps of a tiny model started from the shipped warm start. */
function sessionAt(steps: number, savedAt = `2026-01-01T00:0${steps}:00.000Z`): SavedSession {
  const config = { ...PAGE_DEFAULTS, preset: 'tiny' as const };
  const rows = Array.from({ length: steps }, (_, i) => ({ step: i + 1, applied: true }));
  const weights = shippedFiles();
  // Different bytes per save: the last weight value stands for the training.
  weights['model.safetensors'][weights['model.safetensors'].length - 1] = steps;
  return {
    savedAt,
    config,
    model: { preset: 'tiny', parameters: 1234, policyVersion: steps, source: 'checkpoints/warmstart-tiny/' },
    modelNote: null,
    weights,
    counters: { policyVersion: steps, grpoSteps: steps, sftSteps: 0 },
    origin: { id: 'o1', files: shippedFiles(), counters: { policyVersion: 0, grpoSteps: 0, sftSteps: 0 } },
    metrics: rows.map((r) => ({ metrics: { step: r.step, meanReward: 0.5 + r.step / 100 } as StepMetrics, episodes: 8 })),
    sftMetrics: [],
    frontier: [{ method: 'delegate', limit: 48, n: 32, accuracy: 0.5, meanTokens: 30, meanCriticalPathTokens: 20, interval: [0.3, 0.7], step: 0 }],
    episodes: rows.map((r) => ({ step: r.step, trace: { ...trace, policyVersion: r.step - 1 } })).reverse(),
    provenance: recordSteps([loadEvent('checkpoints/warmstart-tiny/', 'tiny')], 'grpo', rows, trainingSettings('grpo', config)),
  };
}

describe('session archive (IndexedDB)', () => {
  it('a saved session reads back equal after a reload', async () => {
    const db = freshDb();
    const saved = sessionAt(3);
    await new SessionArchive(db.open()).save(saved);
    const back = await new SessionArchive(db.open()).load();
    expect(back.kind).toBe('ok');
    if (back.kind !== 'ok') return;
    expect(back.session).toEqual(saved);
    expect(back.session.weights['model.safetensors']).toBeInstanceOf(Uint8Array);
    expect(back.session.episodes.map((e) => e.step)).toEqual([3, 2, 1]);
    expect(await new SessionArchive(freshDb().open()).load()).toEqual({ kind: 'none' });
  });

  it('a save interrupted before its pointer flips leaves the previous complete save; the next save clears the debris', async () => {
    const db = freshDb();
    await new SessionArchive(db.open()).save(sessionAt(2));
    // The page is closed after the new weights and record are written, before `current` moves.
    const crashing: KeyValueStore = {
      ...db.open(),
      set: async (key) => {
        if (key === 'current') throw new Error('page closed');
      },
    };
    await expect(new SessionArchive(crashing).save(sessionAt(3))).rejects.toThrow('page closed');
    const kv = db.open();
    expect((await kv.keys()).filter((k) => k.startsWith('session-'))).toHaveLength(2);

    const reloaded = new SessionArchive(db.open());
    const back = await reloaded.load();
    expect(back.kind === 'ok' && back.session.counters.grpoSteps).toBe(2);
    expect(back.kind === 'ok' && back.session.weights['model.safetensors'].at(-1)).toBe(2);

    await reloaded.save(sessionAt(4));
    const keys = await kv.keys();
    expect(keys.filter((k) => k.startsWith('session-'))).toHaveLength(1);
    // One origin, one set of weights, the record and the pointer: nothing of the lost save.
    expect(keys.filter((k) => k.startsWith('files-')).sort()).toEqual([expect.stringMatching(/^files-[^o]/), 'files-origin-o1']);
    const last = await new SessionArchive(db.open()).load();
    expect(last.kind === 'ok' && last.session.counters.grpoSteps).toBe(4);
  });

  it('writes a model origin once, not with every save', async () => {
    const db = freshDb();
    const written: string[] = [];
    const kv = db.open();
    const counting: KeyValueStore = { ...kv, setMany: async (entries) => (written.push(...entries.map(([k]) => k)), kv.setMany(entries)) };
    const archive = new SessionArchive(counting);
    await archive.save(sessionAt(1));
    await archive.save({ ...sessionAt(2), origin: { ...sessionAt(2).origin, files: {} } });
    expect(written.filter((k) => k === 'files-origin-o1')).toHaveLength(1);
    const back = await new SessionArchive(db.open()).load();
    expect(back.kind === 'ok' && Object.keys(back.session.origin.files).sort()).toEqual(Object.keys(shippedFiles()).sort());
  });

  it('a damaged save is reported with what is wrong, and kept (not deleted) while the page starts fresh', async () => {
    const db = freshDb();
    await new SessionArchive(db.open()).save(sessionAt(2));
    const kv = db.open();
    const recordKey = (await kv.keys()).find((k) => k.startsWith('session-')) as string;
    const record = (await kv.get(recordKey)) as Record<string, unknown>;
    await kv.set(recordKey, { ...record, config: { ...(record.config as object), batch: 0 } });

    const archive = new SessionArchive(db.open());
    const back = await archive.load();
    expect(back).toEqual({
      kind: 'unreadable',
      savedAt: '2026-01-01T00:02:00.000Z',
      message: 'saved session: config: batch must be an integer in [1, 1024] (got 0)',
    });

    await archive.keepCurrent(back.kind === 'unreadable' ? back.message : '');
    expect(await archive.load()).toEqual({ kind: 'none' });
    // The fresh session's saves do not delete it.
    await archive.save({ ...sessionAt(1), origin: { ...sessionAt(1).origin, id: 'o2' } });
    expect(await kv.get(recordKey)).toBeDefined();
    expect(await archive.kept()).toEqual([
      {
        keys: [recordKey, expect.stringMatching(/^files-/), 'files-origin-o1'],
        savedAt: '2026-01-01T00:02:00.000Z',
        message: expect.stringContaining('batch must be'),
      },
    ]);
    const fresh = await new SessionArchive(db.open()).load();
    expect(fresh.kind === 'ok' && fresh.session.counters.grpoSteps).toBe(1);

    // Until the user deletes it.
    await archive.deleteKept();
    expect(await kv.get(recordKey)).toBeUndefined();
    expect((await kv.keys()).filter((k) => k.startsWith('session-'))).toHaveLength(1);
  });

  it('names missing weights and broken rollouts', async () => {
    const db = freshDb();
    await new SessionArchive(db.open()).save(sessionAt(2));
    const kv = db.open();
    const keys = await kv.keys();
    const recordKey = keys.find((k) => k.startsWith('session-')) as string;
    const weightsKey = keys.find((k) => k.startsWith('files-') && !k.startsWith('files-origin')) as string;
    const weights = (await kv.get(weightsKey)) as Record<string, Uint8Array>;
    const { ['model.safetensors']: _dropped, ...rest } = weights;
    await kv.set(weightsKey, rest);
    expect(await new SessionArchive(kv).load()).toMatchObject({ kind: 'unreadable', message: 'saved session: the weights lack model.safetensors' });
    await kv.set(weightsKey, weights);
    const record = (await kv.get(recordKey)) as Record<string, unknown>;
    await kv.set(recordKey, { ...record, episodes: (record.episodes as string).replace('"schema":"selfcest-episode/1"', '"schema":"x"') });
    expect(await new SessionArchive(kv).load()).toMatchObject({
      kind: 'unreadable',
      message: expect.stringMatching(/^saved session: episodes: traces: line 1: schema is "x"/),
    });
    await kv.set('current', 'garbage');
    expect(await new SessionArchive(kv).load()).toEqual({
      kind: 'unreadable',
      savedAt: null,
      message: 'saved session: the pointer to the current save is damaged',
    });
  });
});
