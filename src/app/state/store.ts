/**
 * The page's one state table (zustand). Controls call actions (actions.ts), actions send engine
 * requests, replies and engine events land here, and panels render from here: one direction.
 */
import { create } from 'zustand';
import { PAGE_DEFAULTS } from '../../core/runConfig';
import type { StepAnatomy } from '../../core/rl/anatomy';
import type { EpisodeTrace } from '../../core/rollout/trace';
import type { BackendReport, EngineRequestKind, StepperState } from '../../runtime/engine/messages';
import type { KeptRun, PageRunState } from '../runs/keptRun';
import type { MetricPoint } from '../runs/metricsRows';

export type { MetricPoint };
import type { UnreadableRun } from '../runs/keptRunStore';

/** The engine's status, plus the page's own 'starting' and 'failed'; 'pausing' is set the moment Pause is pressed. */
export type EngineState = 'starting' | 'idle' | 'sft' | 'training' | 'pausing' | 'paused' | 'failed';

/** A loop runs or is still finishing after Pause: controls that start work wait until it is settled. */
export function loopActive(state: EngineState): boolean {
  return state === 'training' || state === 'sft' || state === 'pausing';
}

/** Whether Train, Step and Warm start may start work now. */
export function canStartWork(s: Pick<PlaygroundState, 'model' | 'engineState' | 'pending'>): boolean {
  return s.model !== null && s.engineState !== 'starting' && s.engineState !== 'failed' && !loopActive(s.engineState) && s.pending === null;
}

/** The status bar's state text. */
export function engineStateText(state: EngineState, finishing: string | null): string {
  return state === 'pausing' ? `pausing…${finishing ? ` (finishing ${finishing})` : ''}` : state;
}

export interface EpisodeRow {
  /** Unique over the page's life; stable across new arrivals. */
  key: number;
  step: number;
  trace: EpisodeTrace;
}

/** Which rollout the tree shows. */
/** Whose tree the tree panel shows: a rollout-table row, the stepper's rollout, or a kept run's stored rollout. */
export type TreeSource = { kind: 'episode'; key: number } | { kind: 'stepper' } | { kind: 'kept'; run: string; index: number };

export interface SftProgress {
  step: number;
  steps: number;
  loss: number;
  tokensPerSec: number;
  etaSec: number;
}

/** The saved session, as the page tells it: restored at start, unreadable (kept, not deleted), or the last save. */
export type SessionNote =
  { kind: 'restored'; savedAt: string; step: number; policyVersion: number } | { kind: 'unreadable'; savedAt: string | null; message: string };

export interface LogLine {
  level: 'info' | 'warn' | 'error';
  message: string;
}

/** The page's state; the fields a kept run is made from are PageRunState's (runs/keptRun.ts). */
export interface PlaygroundState extends PageRunState {
  /** Bumped whenever the model or its history is replaced; replies from older runs are dropped. */
  run: number;
  /** Bumped by every stepperStart; advances of an older rollout are dropped. */
  stepperRun: number;
  /** Problems with the URL hash: reported, the bad values not applied. */
  hashErrors: string[];
  /** What the page changed of a link so that it runs (a mini-batch that follows the link's batch), said beside the config. */
  hashNotes: string[];
  backend: BackendReport | null;
  /** Rollout and gradient workers the engine runs (null before it reports). */
  workers: { rollout: number; gradient: number } | null;
  /** Why the model is what it is, when that needs saying (e.g. no shipped warm start). */
  modelNote: string | null;
  engineState: EngineState;
  /** While pausing: what the engine finishes before it stops (e.g. "step 12"), once it has said. */
  finishing: string | null;
  /** Where the running step or evaluation is ('progress' events); null once the engine settles. */
  progress: { what: string; done: number; total: number } | null;
  /** The control request in flight, if any (buttons wait for it). */
  pending: EngineRequestKind | null;
  /** The last failed request, shown in the status bar. */
  error: string | null;
  importError: string | null;
  /** What the last import loaded and which picked files it ignored. */
  importNote: string | null;
  /** Newest first. */
  episodes: EpisodeRow[];
  tree: TreeSource | null;
  /** Context id opened in the context view. */
  context: number | null;
  stepper: StepperState | null;
  sft: SftProgress | null;
  /** The warm start in progress: its steps (one cosine schedule) and the step it began at, once known (provenance records both). */
  warmStart: { steps: number; firstStep: number | null } | null;
  /** The last slow-motion step of this model, stage by stage (core/rl/anatomy.ts). */
  anatomy: StepAnatomy | null;
  log: LogLine[];
  /** The note about the saved session shown under the checkpoint (null: nothing to say). */
  session: SessionNote | null;
  /** The last completed save of this session in the browser (null: none yet), or why saving failed. */
  saved: { at: string; step: number; policyVersion: number } | { error: string } | null;
  /** Runs kept for comparison (src/app/runs/), oldest first; they outlive model changes and reloads. */
  keptRuns: KeptRun[];
  /** Stored runs that could not be read (kept until deleted). */
  unreadableRuns: UnreadableRun[];
  /** What the last keep, import, rename or delete did, or why it failed (nothing kept was changed then). */
  runsNote: { kind: 'info' | 'error'; message: string } | null;
}

export const MAX_EPISODES = 200;
export const MAX_LOG = 60;

export const INITIAL_STATE: PlaygroundState = {
  run: 0,
  stepperRun: 0,
  config: { ...PAGE_DEFAULTS, budgets: [...PAGE_DEFAULTS.budgets] },
  hashErrors: [],
  hashNotes: [],
  backend: null,
  workers: null,
  model: null,
  modelNote: null,
  engineState: 'starting',
  finishing: null,
  progress: null,
  policyVersion: 0,
  pending: null,
  error: null,
  importError: null,
  importNote: null,
  metrics: [],
  episodes: [],
  tree: null,
  context: null,
  stepper: null,
  sft: null,
  warmStart: null,
  sftMetrics: [],
  frontier: [],
  anatomy: null,
  log: [],
  provenance: [],
  session: null,
  saved: null,
  keptRuns: [],
  unreadableRuns: [],
  runsNote: null,
};

export const usePlayground = create<PlaygroundState>()(() => ({ ...INITIAL_STATE }));

/** Shorthands for actions and event handlers (never called from render). */
export const getState = usePlayground.getState;
export const setState = usePlayground.setState;

/** The history that belongs to one model: cleared when the model is replaced or reset. */
export function clearedHistory(): Pick<
  PlaygroundState,
  'metrics' | 'episodes' | 'tree' | 'context' | 'stepper' | 'sft' | 'sftMetrics' | 'frontier' | 'anatomy'
> {
  return { metrics: [], episodes: [], tree: null, context: null, stepper: null, sft: null, sftMetrics: [], frontier: [], anatomy: null };
}

export function appendLog(line: LogLine): void {
  setState((s) => ({ log: [...s.log, line].slice(-MAX_LOG) }));
}
