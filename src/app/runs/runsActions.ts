/**
 * The Runs panel's controls → the kept-run store and the page state: keep the current run,
 * import a CLI run, rename, delete (after a question). Each writes the store first and changes
 * the list only once the write succeeded, so a refused import or a failed write leaves every
 * kept run as it was; `runsNote` says what happened.
 */
import { configToHash } from '../../core/runConfig';
import { download } from '../files/download';
import { confirmAction } from '../session/confirm';
import { applyConfig, machineDefaults } from '../state/actions';
import { getState, setState } from '../state/store';
import { cliRunOf } from './cliRun';
import { KEPT_RUN_FORMAT, type KeptRun, checkRunName, fromKeptRecord, pageRunOf, suggestedRunName, toKeptRecord, uniqueRunName } from './keptRun';
import type { KeptRunStore } from './keptRunStore';
import { clockDateTime } from '../session/clock';
import { type RecordedStudy, studyRunFiles } from './studies';

let shelf: KeptRunStore | null = null;
let newId = (): string => `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e));
const info = (message: string) => setState({ runsNote: { kind: 'info', message } });
const failed = (message: string) => setState({ runsNote: { kind: 'error', message } });
const NO_STORE = 'this browser offers no IndexedDB, so runs cannot be kept';
const steps = (run: KeptRun) => `${run.counters.grpoSteps} GRPO step${run.counters.grpoSteps === 1 ? '' : 's'}`;

/** Attaches the store and lists what it holds (once per page, and in tests with their own store and ids). */
export async function startKeptRuns(store: KeptRunStore | null, ids?: () => string): Promise<void> {
  shelf = store;
  if (ids) newId = ids;
  if (!store) return;
  try {
    const { runs, unreadable } = await store.list();
    // A run kept while the list was being read stays.
    setState((s) => ({ keptRuns: [...runs, ...s.keptRuns.filter((r) => !runs.some((x) => x.id === r.id))], unreadableRuns: unreadable }));
  } catch (e) {
    failed(`kept runs could not be read: ${errorText(e)}`);
  }
}

const takenNames = () => getState().keptRuns.map((r) => r.name);

/** Keeps the current run (curves, held-out readings, frontier, config, provenance) under `name`, or the suggested one. */
export async function keepCurrentRun(name: string): Promise<KeptRun | null> {
  if (!shelf) return (failed(`run not kept: ${NO_STORE}`), null);
  const s = getState();
  let run: KeptRun;
  try {
    const chosen = name.trim() === '' ? uniqueRunName(suggestedRunName(s), takenNames()) : checkRunName(name);
    if (takenNames().includes(chosen)) throw new Error(`another kept run is named "${chosen}"; choose another name`);
    run = pageRunOf(s, { id: newId(), name: chosen, keptAt: new Date().toISOString(), hash: configToHash(s.config, machineDefaults()) });
    await shelf.put(run);
  } catch (e) {
    return (failed(`run not kept: ${errorText(e)}`), null);
  }
  setState((st) => ({ keptRuns: [...st.keptRuns, run] }));
  info(`kept "${run.name}" (${steps(run)}). Reset or Start fresh begins a new run; kept runs stay.`);
  return run;
}

/** The file name a kept run is exported under: its name with every character a file name may not hold replaced. */
export function keptRunFileName(run: Pick<KeptRun, 'name'>): string {
  return `${run.name.replace(/[^\w.-]+/g, '_').replace(/^_+|_+$/g, '') || 'run'}.run.json`;
}

/** A kept run's export: its record as JSON (docs/FORMATS.md "Kept runs"), under keptRunFileName; null for an unknown id. */
export function keptRunExport(id: string): { name: string; text: string } | null {
  const run = getState().keptRuns.find((r) => r.id === id);
  return run ? { name: keptRunFileName(run), text: `${JSON.stringify(toKeptRecord(run), null, 1)}\n` } : null;
}

/** Downloads a kept run's record; the Runs import reads it back. */
export function exportKeptRun(id: string): void {
  const out = keptRunExport(id);
  if (!out) return failed(`export failed: no kept run ${id}`);
  download(out.name, out.text, 'application/json');
  info(`exported as ${out.name}`);
}

/** A kept page run's config back in the page (its weights were not kept: the config's start checkpoint loads, after the usual question). */
export async function reopenKeptRun(id: string): Promise<void> {
  const run = getState().keptRuns.find((r) => r.id === id);
  if (!run) return failed(`reopen failed: no kept run ${id}`);
  if (run.origin.kind !== 'page') return failed(`"${run.name}" is a CLI run: its config is the trainer's, not the page's (import its folder in the Checkpoint panel to continue it)`);
  await applyConfig(run.origin.config);
  info(`the config of "${run.name}" is applied (its weights were not kept: this is a new run from its start checkpoint)`);
}

/**
 * Imports a run from its picked files: a CLI run (metrics.jsonl, optionally run.json or
 * state.json), or a kept run's own export (one `*.run.json` record).
 */
export async function importCliRun(files: readonly File[]): Promise<KeptRun | null> {
  if (files.length === 0) return null;
  if (!shelf) return (failed(`import failed: ${NO_STORE}`), null);
  let run: KeptRun;
  let ignored: string[] = [];
  try {
    const texts = await Promise.all(files.map(async (f) => ({ name: f.name, text: await f.text() })));
    const record = texts.length === 1 ? keptRecordOf(texts[0].text) : null;
    if (record !== null) run = { ...fromKeptRecord(record, texts[0].name), id: newId(), keptAt: new Date().toISOString() };
    else ({ run, ignored } = cliRunOf(texts, { id: newId(), keptAt: new Date().toISOString() }));
    run = { ...run, name: uniqueRunName(run.name, takenNames()) };
    await shelf.put(run);
  } catch (e) {
    return (failed(`import failed, kept runs unchanged: ${errorText(e)}`), null);
  }
  setState((s) => ({ keptRuns: [...s.keptRuns, run] }));
  const o = run.origin;
  const config = o.kind === 'cli' && o.config === null ? '; no run.json, so its config is not known' : '';
  info(`imported "${run.name}" (${steps(run)}, ${run.heldOut.length} held-out reading${run.heldOut.length === 1 ? '' : 's'}${config})${ignored.length > 0 ? `; ignored ${ignored.join(', ')}` : ''}`);
  return run;
}

export async function renameKeptRun(id: string, name: string): Promise<boolean> {
  const run = getState().keptRuns.find((r) => r.id === id);
  if (!run || !shelf) return false;
  try {
    const chosen = checkRunName(name);
    if (chosen === run.name) return true;
    if (takenNames().includes(chosen)) throw new Error(`another kept run is named "${chosen}"`);
    const renamed = { ...run, name: chosen };
    await shelf.put(renamed);
    setState((s) => ({ keptRuns: s.keptRuns.map((r) => (r.id === id ? renamed : r)), runsNote: null }));
    return true;
  } catch (e) {
    failed(`not renamed: ${errorText(e)}`);
    return false;
  }
}

/** Deletes a kept run after the question; true when it is gone. */
export async function deleteKeptRun(id: string): Promise<boolean> {
  const run = getState().keptRuns.find((r) => r.id === id);
  if (!run || !shelf) return false;
  const from = run.origin.kind === 'cli' ? `imported from ${run.origin.files.join(' + ')}` : `kept ${clockDateTime(run.keptAt)}`;
  if (!confirmAction(`Delete the kept run "${run.name}" (${steps(run)}, ${from})? Its curves and config leave this browser; the current session is not affected.\n\nDelete it?`)) return false;
  try {
    await shelf.delete(id);
  } catch (e) {
    failed(`not deleted: ${errorText(e)}`);
    return false;
  }
  setState((s) => ({ keptRuns: s.keptRuns.filter((r) => r.id !== id), runsNote: { kind: 'info', message: `deleted "${run.name}"` } }));
  return true;
}

/** Deletes the stored runs that could not be read, after the question. */
export async function deleteUnreadableRuns(): Promise<void> {
  const { unreadableRuns } = getState();
  if (!shelf || unreadableRuns.length === 0) return;
  if (!confirmAction(`Delete ${unreadableRuns.length} kept run record${unreadableRuns.length === 1 ? '' : 's'} that could not be read?`)) return;
  try {
    await shelf.deleteKeys(unreadableRuns.map((u) => u.key));
    setState({ unreadableRuns: [] });
  } catch (e) {
    failed(`not deleted: ${errorText(e)}`);
  }
}

/** A kept run's exported record (a JSON object of KEPT_RUN_FORMAT), or null for any other file. */
function keptRecordOf(text: string): unknown {
  try {
    const raw = JSON.parse(text) as unknown;
    return raw !== null && typeof raw === 'object' && (raw as { format?: unknown }).format === KEPT_RUN_FORMAT ? raw : null;
  } catch {
    return null;
  }
}

/**
 * Opens a recorded study (studies.ts): its runs are imported as CLI runs under the study's names,
 * or found again when they were imported before; returns their ids, in the study's order, for the
 * panel to tick. Nothing is imported unless every run read.
 */
export async function openStudy(study: RecordedStudy): Promise<string[] | null> {
  if (!shelf) return (failed(`the study could not be opened: ${NO_STORE}`), null);
  const kept = new Map(getState().keptRuns.map((r) => [r.name, r]));
  let added: KeptRun[];
  try {
    const missing = study.runs.filter((r) => !kept.has(r.name));
    added = await Promise.all(missing.map(async (r) => cliRunOf(await studyRunFiles(r), { id: newId(), keptAt: new Date().toISOString(), name: r.name }).run));
    for (const run of added) await shelf.put(run);
  } catch (e) {
    return (failed(`the study could not be opened, kept runs unchanged: ${errorText(e)}`), null);
  }
  setState((s) => ({ keptRuns: [...s.keptRuns, ...added] }));
  const byName = new Map([...kept, ...added.map((r) => [r.name, r] as const)]);
  info(`${study.title}: ${study.runs.length} recorded runs${added.length < study.runs.length ? ` (${study.runs.length - added.length} kept before)` : ''}, overlaid below`);
  return study.runs.map((r) => byName.get(r.name)!.id);
}
