import 'fake-indexeddb/auto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { idbStore } from '../session/idbStore';
import { cliRunOf } from './cliRun';
import { KeptRunStore } from './keptRunStore';

let dbCount = 0;
/** A fresh IndexedDB database (fake-indexeddb); `open` gives another handle on it, as a reload would. */
function freshDb() {
  const name = `selfcest-runs-test-${dbCount++}`;
  const open = () => idbStore(name, 'runs');
  return { open, store: () => new KeptRunStore(open()) };
}

const files = ['metrics.jsonl', 'run.json'].map((name) => ({ name, text: readFileSync(`runs/ablation-naive/gating-s1/${name}`, 'utf8') }));
const cliRun = (id: string, keptAt: string, name?: string) => cliRunOf(files, { id, keptAt, ...(name ? { name } : {}) }).run;

describe('kept runs in IndexedDB', () => {
  it('come back after a reload, equal and oldest first; a rename and a delete persist', async () => {
    const db = freshDb();
    const later = cliRun('b', '2026-01-02T00:00:00.000Z', 'second');
    const earlier = cliRun('a', '2026-01-01T00:00:00.000Z', 'first');
    earlier.metrics[0].metrics.approxKl = NaN; // a field an older CLI did not log
    await db.store().put(later);
    await db.store().put(earlier);
    const back = await db.store().list();
    expect(back.unreadable).toEqual([]);
    expect(back.runs.map((r) => r.name)).toEqual(['first', 'second']);
    expect(back.runs[1]).toEqual(later);
    // "Not recorded" survives the store as NaN (structured clone), not as null or 0.
    expect(back.runs[0]).toEqual(earlier);
    expect(back.runs[0].metrics[0].metrics.approxKl).toBeNaN();
    await db.store().put({ ...earlier, name: 'renamed' });
    await db.store().delete('b');
    const after = await db.store().list();
    expect(after.runs.map((r) => [r.id, r.name])).toEqual([['a', 'renamed']]);
    // One record per run, under its id; no weights anywhere.
    expect(await db.open().keys()).toEqual(['run-a']);
    expect(JSON.stringify(await db.open().get('run-a'))).not.toMatch(/safetensors/);
  });

  it('lists a damaged record as unreadable, with the reason, and still reads the others; deleting it removes only it', async () => {
    const db = freshDb();
    await db.store().put(cliRun('good', '2026-01-01T00:00:00.000Z'));
    const kv = db.open();
    await kv.set('run-bad', { format: 'selfcest-kept-run', version: 1, id: 'bad', name: 'x', keptAt: '', task: '', counters: {} });
    await kv.set('run-moved', { ...(await kv.get('run-good') as object), id: 'elsewhere' });
    await kv.set('not-a-run', 1);
    const { runs, unreadable } = await db.store().list();
    expect(runs.map((r) => r.id)).toEqual(['good']);
    expect(unreadable).toEqual([
      { key: 'run-bad', message: expect.stringMatching(/^kept run run-bad: counters must hold grpoSteps/) },
      { key: 'run-moved', message: 'kept run run-moved: its id "elsewhere" does not match its key' },
    ]);
    await db.store().deleteKeys(unreadable.map((u) => u.key).concat('not-a-run'));
    expect((await kv.keys()).sort()).toEqual(['not-a-run', 'run-good']);
  });
});
