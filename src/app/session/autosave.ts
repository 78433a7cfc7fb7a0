/**
 * Saves the session after each change (a step, a warm-start row, a frontier point, a config or a
 * model), at most every `intervalMs`, and at once when a loop stops (Pause). One save at a time;
 * changes during a save are saved after it.
 *
 * What is saved must belong together: weights from the engine (with their counters, read in the
 * same turn), history from the store. The engine sends the rows of every step the weights took
 * before it replies with them (exportWeights), so they are on the page when the weights arrive;
 * a save whose rows do not reach the weights' step is not written but tried again shortly, and
 * rows of steps past the weights (finished while the reply travelled) are cut from the record with
 * their provenance: a record's weights, counters, curves, provenance and kept rollouts are always
 * of one step. The optimizers' moments are saved
 * with the weights (read in the same turn), so a restored run's Adam goes on where it was.
 */
import { type ModelCounters, provenanceUpTo } from '../../core/io/provenance';
import { startCheckpoint } from '../../core/runConfig';
import type { EngineRequestKind } from '../../runtime/engine/messages';
import type { EngineLink } from '../engine/engine';
import { type PlaygroundState, appendLog, getState, loopActive, setState, usePlayground } from '../state/store';
import type { SessionArchive } from './archive';
import { type FileSet, SAVED_EPISODES, type SavedSession } from './session';

/** Requests that replace the model: no save while one is in flight (its weights and history would not match). */
const REPLACING: ReadonlySet<EngineRequestKind> = new Set(['init', 'loadUrl', 'loadHub', 'loadFiles', 'setConfig', 'reset', 'randomInit']);
const RETRY_MS = 1200;

export interface Autosave {
  /** A change is waiting to be saved, or a save is being written. */
  unsaved(): boolean;
  /** Saves now (waits for a save in progress first). */
  flush(): Promise<void>;
  /** The origin of the current run is already stored under this id (a restored session's). */
  adoptOrigin(run: number, id: string, counters: ModelCounters): void;
  stop(): void;
}

interface OriginCache {
  run: number;
  id: string;
  counters: ModelCounters;
  /** Empty once stored. */
  files: FileSet;
}

export function startAutosave(engine: Pick<EngineLink, 'request'>, archive: SessionArchive, intervalMs = 5000): Autosave {
  let dirty = false;
  let saving: Promise<void> | null = null;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let lastStart = 0;
  let tries = 0;
  let origin: OriginCache | null = null;
  let stopped = false;

  const schedule = (delay: number) => {
    if (stopped || timer !== null) return;
    timer = setTimeout(
      () => {
        timer = null;
        void run();
      },
      Math.max(0, delay),
    );
  };

  const request = (urgent: boolean) => {
    dirty = true;
    if (saving) return; // saved after the one in progress
    if (urgent && timer !== null) {
      clearTimeout(timer);
      timer = null;
    }
    schedule(urgent ? 0 : lastStart + intervalMs - Date.now());
  };

  const run = async (): Promise<void> => {
    if (saving || stopped) return;
    dirty = false;
    lastStart = Date.now();
    saving = saveOnce()
      .then((outcome) => {
        if (outcome === 'retry') {
          dirty = true;
          tries++;
        } else tries = 0;
      })
      .catch((e: unknown) => {
        const message = e instanceof Error ? e.message : String(e);
        setState({ saved: { error: message } });
        appendLog({ level: 'warn', message: `session not saved in the browser: ${message}` });
      })
      .finally(() => {
        saving = null;
        if (dirty) schedule(tries > 0 ? RETRY_MS : lastStart + intervalMs - Date.now());
      });
    await saving;
  };

  const saveOnce = async (): Promise<'saved' | 'retry' | 'skip'> => {
    const before = getState();
    if (before.model === null || before.engineState === 'starting' || before.engineState === 'failed') return 'skip';
    if (before.pending !== null && REPLACING.has(before.pending)) return 'retry';
    if (pristine(before)) {
      // Nothing a reload would not give anyway (the config's start, no history): no saved session.
      await archive.clear();
      setState({ saved: null });
      return 'saved';
    }
    const { run: runId } = before;
    const current = await engine.request({ kind: 'exportWeights', optimizer: true });
    if (origin?.run !== runId || (Object.keys(origin.files).length === 0 && !archive.hasOrigin(origin.id))) {
      const o = await engine.request({ kind: 'exportWeights', origin: true });
      origin = { run: runId, id: `${runId}-${Date.now().toString(36)}`, counters: o.counters, files: o.files };
    }
    const s = getState();
    if (s.run !== runId || (s.pending !== null && REPLACING.has(s.pending))) return 'retry';
    if (!inStep(s, origin.counters, current.counters)) return 'retry';
    const session = sessionOf(s, current, origin);
    const t0 = performance.now();
    const bytes = [...Object.values(session.weights), ...Object.values(origin.files)].reduce((n, b) => n + b.byteLength, 0);
    try {
      await archive.save(session);
    } finally {
      // The store may have taken the bytes (KeyValueStore.setMany); an origin not stored is exported again.
      origin.files = {};
    }
    // For `bench page`: each save's wall time and size, beside the long tasks of the main thread.
    performance.measure('selfcest-save', { start: t0, end: performance.now(), detail: { bytes } });
    setState({ saved: { at: session.savedAt, step: current.counters.grpoSteps, policyVersion: current.counters.policyVersion } });
    return 'saved';
  };

  const unsubscribe = usePlayground.subscribe((s, prev) => {
    if (s.model === null || s.engineState === 'starting') return;
    const loopStopped = loopActive(prev.engineState) && !loopActive(s.engineState);
    const changed =
      s.model !== prev.model ||
      s.policyVersion !== prev.policyVersion ||
      s.metrics !== prev.metrics ||
      s.sftMetrics !== prev.sftMetrics ||
      s.frontier !== prev.frontier ||
      s.episodes !== prev.episodes ||
      s.provenance !== prev.provenance ||
      s.config !== prev.config;
    if (changed || loopStopped) request(loopStopped);
  });

  return {
    unsaved: () => dirty || saving !== null,
    flush: async () => {
      if (saving) await saving;
      if (timer !== null) clearTimeout(timer);
      timer = null;
      await run();
    },
    adoptOrigin: (run, id, counters) => {
      origin = { run, id, counters, files: {} };
    },
    stop: () => {
      stopped = true;
      unsubscribe();
      if (timer !== null) clearTimeout(timer);
    },
  };
}

/** The config's own start checkpoint (or seeded random init), untouched: what a plain page load gives. */
export function pristine(s: Pick<PlaygroundState, 'metrics' | 'sftMetrics' | 'frontier' | 'provenance' | 'config' | 'model'>): boolean {
  if (s.metrics.length > 0 || s.sftMetrics.length > 0 || s.frontier.length > 0 || s.provenance.length !== 1 || s.model === null) return false;
  const name = startCheckpoint(s.config);
  return name === null ? s.model.source.startsWith('random init') : s.model.source.replace(/\/?$/, '/').endsWith(`checkpoints/${name}/`);
}

/**
 * Whether the page has seen every step the saved weights took: its GRPO rows reach the weights'
 * step (rows of later steps, finished while the reply travelled, are cut from the record), its
 * warm-start rows end there.
 */
function inStep(s: PlaygroundState, origin: ModelCounters, counters: ModelCounters): boolean {
  const grpo = Math.max(origin.grpoSteps, s.metrics.at(-1)?.metrics.step ?? 0);
  const sft = Math.max(origin.sftSteps, s.sftMetrics.at(-1)?.step ?? 0);
  return grpo >= counters.grpoSteps && sft === counters.sftSteps;
}

function sessionOf(s: PlaygroundState, current: { files: FileSet; counters: ModelCounters }, origin: OriginCache): SavedSession {
  const model = s.model as NonNullable<PlaygroundState['model']>;
  return {
    savedAt: new Date().toISOString(),
    config: s.config,
    model: { ...model, policyVersion: current.counters.policyVersion },
    modelNote: s.modelNote,
    weights: current.files,
    counters: current.counters,
    origin: { id: origin.id, files: origin.files, counters: origin.counters },
    // Rows of steps past the weights (finished while the reply travelled) are left out.
    metrics: s.metrics.filter((m) => m.metrics.step <= current.counters.grpoSteps),
    sftMetrics: s.sftMetrics.filter((r) => r.step <= current.counters.sftSteps),
    frontier: s.frontier,
    episodes: s.episodes
      .filter((e) => e.step <= current.counters.grpoSteps)
      .slice(0, SAVED_EPISODES)
      .map((e) => ({ step: e.step, trace: e.trace })),
    provenance: provenanceUpTo(s.provenance, current.counters.grpoSteps),
  };
}
