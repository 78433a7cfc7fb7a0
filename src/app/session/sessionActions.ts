/**
 * The saved session at page start, and the controls of its note: restore it into the engine and
 * the store, Start fresh, delete one that could not be read. The unload warning lives here too.
 */
import { errorText, loadStartCheckpoint, pause, send, showModel } from '../state/actions';
import { addEpisodes } from '../state/events';
import { type PlaygroundState, getState, loopActive, setState } from '../state/store';
import { type SessionArchive, fileBuffers } from './archive';
import type { Autosave } from './autosave';
import { confirmDiscard } from './confirm';
import type { SavedSession } from './session';

let archive: SessionArchive | null = null;
let autosave: Autosave | null = null;

export function attachSession(a: SessionArchive | null, s: Autosave | null): void {
  archive = a;
  autosave = s;
}

/**
 * Loads a saved session: the engine resumes its weights at their counters, with its origin as
 * the KL reference and Reset target; the store gets its history. Null when done, else why not
 * (the engine refused the weights: the page then starts fresh and the save is kept).
 */
export async function restoreSession(session: SavedSession): Promise<string | null> {
  let why = 'unknown reason';
  // The engine's log gets the saved history, so that exports after the reload hold the earlier steps
  // (rows, and the saved rollouts oldest first); the weights' file set carries the optimizer moments.
  const log = { metrics: session.metrics.map((m) => m.metrics), traces: [...session.episodes].reverse() };
  const resume = {
    counters: session.counters,
    origin: { files: fileBuffers(session.origin.files), counters: session.origin.counters },
    source: session.model.source,
    log,
  };
  const model = await send({ kind: 'loadFiles', files: fileBuffers(session.weights), resume }, { replaces: true, onError: (message) => (why = message) });
  if (!model) return why;
  showModel(model, session.modelNote, session.provenance);
  setState({
    config: session.config,
    metrics: session.metrics,
    sftMetrics: session.sftMetrics,
    frontier: session.frontier,
    session: { kind: 'restored', savedAt: session.savedAt, step: session.counters.grpoSteps, policyVersion: model.policyVersion },
  });
  // Oldest first: each one goes on top, so the table ends newest first with fresh keys.
  for (const e of [...session.episodes].reverse()) addEpisodes(e.step, [e.trace]);
  return null;
}

/** A saved session that could not be restored: kept in the browser (listed, not deleted) and said so. */
export async function keepUnreadable(a: SessionArchive, savedAt: string | null, message: string): Promise<void> {
  await a.keepCurrent(message).catch(() => undefined);
  setState({ session: { kind: 'unreadable', savedAt, message } });
}

/** "Start fresh": the saved session is dropped and the config's start checkpoint loaded, after the question. */
export async function startFresh(): Promise<void> {
  if (!confirmDiscard('Start fresh')) return;
  if (loopActive(getState().engineState)) await pause();
  try {
    await archive?.clear();
  } catch (e) {
    setState({ error: `start fresh: ${errorText(e)}` });
  }
  setState({ session: null, saved: null });
  await loadStartCheckpoint(getState().config);
}

/** Deletes the sessions kept because they could not be read. */
export async function deleteKeptSessions(): Promise<void> {
  try {
    await archive?.deleteKept();
    setState({ session: null });
  } catch (e) {
    setState({ error: `delete saved session: ${errorText(e)}` });
  }
}

/** Work that a reload would lose: a loop, a Step, an evaluation or a warm start in flight. */
export function workInFlight(s: Pick<PlaygroundState, 'engineState' | 'pending'>): boolean {
  return loopActive(s.engineState) || s.pending === 'step' || s.pending === 'slowStep' || s.pending === 'frontier' || s.pending === 'sft';
}

/**
 * The unload warning: only while work is in flight or a change waits for its save (at most one
 * save interval); everything else is in the saved session and comes back on reload.
 */
export function onBeforeUnload(e: BeforeUnloadEvent): void {
  if (!workInFlight(getState()) && !(autosave?.unsaved() ?? false)) return;
  e.preventDefault();
  e.returnValue = ''; // older browsers show the prompt only with a returnValue set
}
