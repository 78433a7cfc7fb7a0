/**
 * Controls → engine requests. Every action goes through `send`, which marks the request as
 * pending, drops replies from a superseded run, and turns failures into a message.
 */
import { type Method, frontierCsv } from '../../core/eval/frontier';
import { configToHash, defaultGradWorkerCount, defaultWorkerCount, type RunConfig, startCheckpoint } from '../../core/runConfig';
import type { EngineReplies, EngineRequestKind, ModelReport } from '../../runtime/engine/messages';
import type { EngineLink, RequestOf } from '../engine/engine';
import { download } from '../files/download';
import { checkpointFilesOf, provenanceOf, weightsTar, type CheckpointPick } from '../files/checkpointTar';
import { type RunHistory, resumeCounters, runHistoryOf, stepBatches } from '../files/runFolder';
import {
  PROVENANCE_FILE,
  type Provenance,
  type ProvenanceEvent,
  encodeProvenance,
  loadEvent,
  makeProvenance,
  originProvenance,
} from '../../core/io/provenance';
import { confirmAction, confirmDiscard } from '../session/confirm';
import { addEpisodes } from './events';
import { MAX_EPISODES, clearedHistory, getState, setState, type TreeSource } from './store';
import { warmStartPlan, warmStartQuestion } from './warmStartPlan';

let engine: EngineLink | null = null;

export function attachEngine(e: EngineLink): void {
  engine = e;
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

interface SendOptions {
  /**
   * The request replaces the model or its history: on success a new run starts, and replies to
   * requests sent before it are dropped (the engine answers in order, so none can be newer).
   */
  replaces?: boolean;
  /** Show the failure here instead of the status bar. */
  onError?: (message: string) => void;
  /** Long-lived requests (train) do not block the other controls. */
  blocking?: boolean;
}

/** Sends one request; resolves to the reply, or null when it failed or was superseded. */
export async function send<K extends EngineRequestKind>(req: RequestOf<K>, opts: SendOptions = {}): Promise<EngineReplies[K] | null> {
  if (!engine) return null;
  const run = getState().run;
  const blocking = opts.blocking ?? true;
  setState({ error: null, ...(blocking ? { pending: req.kind } : {}) });
  try {
    const reply = await engine.request(req);
    if (getState().run !== run) return null;
    if (opts.replaces) setState({ run: run + 1 });
    return reply;
  } catch (err) {
    if (getState().run === run) (opts.onError ?? ((message) => setState({ error: `${req.kind}: ${message}` })))(errorText(err));
    return null;
  } finally {
    if (blocking && getState().pending === req.kind) setState({ pending: null });
  }
}

/**
 * A new model (loaded, reset, re-initialised): its own history starts empty; its provenance is
 * the one given, or a load of its source.
 */
export function showModel(model: ModelReport, note: string | null = null, provenance?: ProvenanceEvent[]): void {
  const events = provenance ?? [
    loadEvent(model.source, model.preset, { policyVersion: model.policyVersion, grpoSteps: 0, sftSteps: 0 }, new Date(), model.trainedBy ?? null),
  ];
  // "restored session" no longer describes a replaced model; a note about an unreadable save stays.
  const session = getState().session?.kind === 'unreadable' ? getState().session : null;
  setState({ model, modelNote: note, importNote: null, policyVersion: model.policyVersion, ...clearedHistory(), provenance: events, session });
}

/** Whether applying `next` over `before` replaces the model (a preset or start-checkpoint switch). */
export function replacesModel(before: RunConfig, next: RunConfig): boolean {
  return next.preset !== before.preset || startCheckpoint(next) !== startCheckpoint(before);
}

/** Defaults of this machine: the rollout and gradient pools start at min(4, cores − 1) unless the link names a size. */
export function machineDefaults(): Partial<RunConfig> {
  const cores = navigator.hardwareConcurrency || 2;
  return { workers: defaultWorkerCount(cores), gradWorkers: defaultGradWorkerCount(cores) };
}

/** Writes the applied config into the URL without firing hashchange. */
export function writeHash(config: RunConfig): void {
  const hash = configToHash(config, machineDefaults());
  history.replaceState(null, '', `${location.pathname}${location.search}${hash ? `#${hash}` : ''}`);
}

export async function applyConfig(config: RunConfig): Promise<void> {
  const before = getState().config;
  if (
    replacesModel(before, config) &&
    !confirmDiscard(config.preset !== before.preset ? `Switching the model preset to ${config.preset}` : 'Switching the start checkpoint')
  ) {
    writeHash(before); // a link edited by hand goes back to the config that stays
    return;
  }
  const model = await send({ kind: 'setConfig', config }, { replaces: config.preset !== before.preset });
  if (!model) return;
  setState({ config, hashErrors: [], hashNotes: [] });
  writeHash(config);
  // A preset switch replaces the model (the engine random-inits it): load the new preset's start
  // checkpoint (auto: tiny → warmstart-tiny), or say why it is a random init.
  if (startCheckpoint(config) !== startCheckpoint(before) || config.preset !== before.preset) await loadStartCheckpoint(config);
  else setState({ model });
}

/** Where the page finds a shipped checkpoint. */
export const checkpointUrl = (name: string) => `${import.meta.env.BASE_URL}checkpoints/${name}/`;

/**
 * Loads the config's start checkpoint (see `checkpoint` in the run-config table); a random
 * init of the preset when it asks for one, or, labelled with the reason, when the checkpoint
 * cannot be loaded or is of another preset.
 */
export async function loadStartCheckpoint(config: RunConfig): Promise<void> {
  const name = startCheckpoint(config);
  let why = 'the config asks for a random init';
  if (name !== null) {
    const url = checkpointUrl(name);
    why = '';
    const loaded = await send({ kind: 'loadUrl', baseUrl: url }, { replaces: true, onError: (message) => (why = message) });
    // A Hugging Face folder is no preset's: it is the model whatever the preset says.
    if (loaded && (loaded.kind === 'hf' || loaded.preset === config.preset)) {
      showModel(loaded, null);
      return;
    }
    if (loaded) why = `it is preset ${loaded.preset}; this link asks for ${config.preset}`;
    why = `no usable checkpoint at ${url} (${why || 'unknown reason'})`;
  }
  // A fresh model of the configured preset; the note says why it is not a shipped checkpoint.
  const fresh = await send({ kind: 'randomInit' }, { replaces: true });
  if (fresh) showModel(fresh, `random init: ${why}`);
}

export async function train(): Promise<void> {
  setState({ engineState: 'training' });
  await send({ kind: 'train' }, { blocking: false });
}

/** "pausing…" at once: the engine stops only after its current step or evaluation, which can take minutes. */
export async function pause(): Promise<void> {
  setState({ engineState: 'pausing', finishing: null });
  const reply = await send({ kind: 'pause' }, { blocking: false });
  if (reply) setState({ policyVersion: reply.policyVersion });
}

/** One GRPO step. Its metrics row reaches the page once, by the engine's `metrics` event (sent before the reply). */
export async function step(): Promise<void> {
  await send({ kind: 'step' });
}

/** One real GRPO step of the run, kept stage by stage for the slow-motion view (its row comes by the `metrics` event, as Step's). */
export async function slowStep(): Promise<void> {
  const reply = await send({ kind: 'slowStep' });
  if (!reply) return;
  setState({ anatomy: reply });
}

export async function reset(): Promise<void> {
  if (!confirmDiscard('Reset')) return;
  if (getState().engineState === 'training' || getState().engineState === 'sft') await pause();
  const origin = originProvenance(getState().provenance);
  const model = await send({ kind: 'reset' }, { replaces: true });
  if (model) showModel(model, getState().modelNote, origin.length > 0 ? origin : undefined);
}

/** A warm start of `steps` steps; on weights that GRPO trained it asks first (warmStartQuestion). */
export async function warmStart(steps: number): Promise<void> {
  const { config, provenance } = getState();
  const plan = warmStartPlan(config, steps);
  const question = plan && warmStartQuestion(plan, provenance, config.lr);
  if (question !== null && !confirmAction(question)) return;
  setState({ engineState: 'sft', sft: null, warmStart: { steps, firstStep: null } });
  const reply = await send({ kind: 'sft', steps }, { blocking: false });
  if (reply) setState({ log: [...getState().log, { level: 'info', message: `warm start: ${reply.steps} steps, loss ${reply.loss.toFixed(4)}` }] });
}

/** Why run files picked without a checkpoint are not loaded: alone they have no model to belong to. */
export const RUN_FILES_ALONE =
  'metrics.jsonl and traces.jsonl load with the checkpoint of their run: pick them together with its files (or the run folder as a .tar). ' +
  "To compare a CLI run's curves without its weights, import its metrics.jsonl in the Runs panel.";

/**
 * Reads the chosen files (the exported .tar, a CLI run folder, or loose files), keeps the
 * checkpoint's own and hands them to the engine, which validates them. A run's metrics.jsonl and
 * traces.jsonl beside them are checked here first (a bad line refuses the whole import), then go
 * to the engine's run log (so exports hold them) and to the curves and the rollout table; the
 * weights resume at the run's counters (resumeCounters). The note names what was loaded from
 * which file, and what was ignored.
 */
/** Imports picked or dropped files; `folder`: the folder they were picked as, which names the model. */
export async function importFiles(files: readonly File[], folder?: string): Promise<void> {
  setState({ importError: null, importNote: null });
  if (files.length === 0) return;
  let pick: CheckpointPick;
  let history: RunHistory;
  let resumed: ReturnType<typeof resumeCounters>;
  let provenance: Provenance | null;
  let note: string | null;
  try {
    pick = checkpointFilesOf(await Promise.all(files.map(async (f) => ({ name: f.name, bytes: new Uint8Array(await f.arrayBuffer()) }))));
    if (pick.files.size === 0 && (pick.run.has('metrics.jsonl') || pick.run.has('traces.jsonl'))) throw new Error(RUN_FILES_ALONE);
    history = runHistoryOf(pick);
    // With its provenance the model resumes at its counters (policy version, steps), not at v0.
    ({ provenance, note } = provenanceOf(pick));
    resumed = resumeCounters(provenance, history);
  } catch (err) {
    setState({ importError: errorText(err) });
    return;
  }
  const ignoredFiles = [...pick.ignored, ...history.ignored];
  const ignored = ignoredFiles.length > 0 ? `; ignored (not part of a checkpoint): ${ignoredFiles.join(', ')}` : '';
  const archives = [...new Set([...pick.origins.values()].map((o) => o.split(': ')[0]))].join(', ');
  if (!confirmDiscard(`Importing ${archives}`)) return;
  // Each kept file owns its buffer (File.arrayBuffer, untar's copies), so it can be transferred whole.
  const buffers: Record<string, ArrayBuffer> = {};
  for (const [name, bytes] of pick.files) buffers[name] = bytes.byteLength === bytes.buffer.byteLength ? bytes.buffer : bytes.slice().buffer;
  const { counters } = resumed;
  const log = history.metrics.length > 0 || history.traces.length > 0 ? { metrics: history.metrics.map((p) => p.metrics), traces: history.traces } : null;
  const named = folder ? { source: folder } : {};
  const req = counters
    ? { kind: 'loadFiles' as const, files: buffers, resume: { counters, ...(log ? { log } : {}), ...named }, ...named }
    : { kind: 'loadFiles' as const, files: buffers, ...named };
  const model = await send(req, { replaces: true, onError: (message) => setState({ importError: `${message}${ignored}` }) });
  if (!model) return;
  const load = loadEvent(
    folder || archives,
    model.preset,
    counters ?? { policyVersion: model.policyVersion, grpoSteps: 0, sftSteps: 0 },
    new Date(),
    model.trainedBy ?? null,
  );
  showModel(model, null, [...(provenance?.events ?? []), load]);
  setState({ metrics: history.metrics });
  // Oldest first, a step at a time: the table ends newest first, as the engine's events build it.
  for (const batch of stepBatches(history.traces.slice(-MAX_EPISODES))) addEpisodes(batch.step, batch.traces);
  const resumes =
    resumed.fromRun && counters
      ? `; resumes at step ${counters.grpoSteps}, policy v${counters.policyVersion} (its last logged step: the weights carry no usable provenance)`
      : '';
  const run = history.loaded.map((l) => `; ${l}`).join('');
  const unused = note ? `; ${note}${counters ? '' : '; the model starts at v0'}` : '';
  setState({ importNote: `loaded ${[...pick.origins.values()].join(', ')}${run}${resumes}${ignored}${unused}` });
}

/** A Hugging Face model by its Hub id (owner/name), fetched by the engine; on failure the model loaded before stays. */
export async function loadHubModel(id: string): Promise<void> {
  setState({ importError: null, importNote: null });
  const trimmed = id.trim();
  if (trimmed === '') return;
  if (!confirmDiscard(`Loading ${trimmed}`)) return;
  const model = await send({ kind: 'loadHub', id: trimmed }, { replaces: true, onError: (message) => setState({ importError: message }) });
  if (!model) return;
  showModel(model);
  setState({ importNote: `loaded ${trimmed} from the Hugging Face Hub` });
}

/** The weights as a .tar: the engine's checkpoint files and provenance.json (also inside selfcest.json's `training`). */
export async function exportWeights(): Promise<void> {
  const { provenance: events } = getState();
  const reply = await send({ kind: 'exportWeights', provenance: events });
  if (!reply) return;
  // The counters of the exported weights are the engine's, read with them.
  const files = { ...reply.files, [PROVENANCE_FILE]: encodeProvenance(makeProvenance(reply.counters, events)) };
  const { filename, bytes } = weightsTar(getState().model?.preset ?? 'model', reply.counters.policyVersion, files);
  download(filename, bytes, 'application/x-tar');
}

export async function exportTraces(): Promise<void> {
  const reply = await send({ kind: 'exportTraces' });
  if (reply) download('traces.jsonl', reply.jsonl, 'application/jsonl');
}

export async function exportMetrics(format: 'jsonl' | 'csv'): Promise<void> {
  const reply = await send({ kind: 'exportMetrics', format });
  if (reply) download(`metrics.${format}`, reply.text, format === 'csv' ? 'text/csv' : 'application/jsonl');
}

/** Evaluates the current weights (points arrive as 'frontier' events while it runs). */
export async function evaluateFrontier(methods: Method[], limits: number[], n: number): Promise<void> {
  await send({ kind: 'frontier', methods, limits, n });
}

export function exportFrontierCsv(): void {
  download('frontier.csv', frontierCsv(getState().frontier), 'text/csv');
}

export async function stepperStart(seed: number, prompt: string, allowSpawn: boolean): Promise<void> {
  const stepperRun = getState().stepperRun + 1;
  setState({ stepperRun });
  const state = await send({ kind: 'stepperStart', seed, allowSpawn, ...(prompt.trim() ? { prompt: prompt.trim() } : {}) });
  if (state && getState().stepperRun === stepperRun) setState({ stepper: state });
}

export async function stepperAdvance(until: 'token' | 'spawn' | 'end'): Promise<void> {
  const { stepperRun } = getState();
  const state = await send({ kind: 'stepperAdvance', until });
  if (state && getState().stepperRun === stepperRun) setState({ stepper: state });
}

export function openTree(source: TreeSource): void {
  setState({ tree: source, context: 0 });
}

/** The tree panel follows the newest rollout again (nothing picked). */
export function followNewest(): void {
  setState({ tree: null, context: null });
}

export function openContext(id: number): void {
  setState({ context: id });
}

/** Logits of a text under the current weights (read-only; the console API and tests use it). */
export async function logits(text: string): Promise<EngineReplies['logits']> {
  if (!engine) throw new Error('the engine is not running yet');
  return engine.request({ kind: 'logits', text });
}
