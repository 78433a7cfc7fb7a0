/**
 * The page's session as it is saved in the browser: the weights (and the origin they train
 * away from), their counters, the applied config, the curves, the warm-start rows, the frontier
 * points, the latest rollouts and the provenance. Pure: state → record → state, with every field
 * of a record read back checked, so a damaged or foreign save is refused with a message that
 * names the field instead of half-restoring a session. archive.ts stores records; this file
 * knows nothing of IndexedDB.
 */
import type { FrontierPoint } from '../../core/eval/frontier';
import { REQUIRED_CHECKPOINT_FILES } from '../../core/io/checkpoint';
import { type ModelCounters, type ProvenanceEvent, PROVENANCE_FORMAT, PROVENANCE_VERSION, parseProvenance } from '../../core/io/provenance';
import { parseTracesJsonl, tracesToJsonl } from '../../core/io/traces';
import type { SftMetricsRow } from '../../core/sft/sft';
import { type RunConfig, validateRunConfig } from '../../core/runConfig';
import type { EpisodeTrace } from '../../core/rollout/trace';
import type { ModelReport } from '../../runtime/engine/messages';
import type { MetricPoint } from '../runs/metricsRows';

export const SESSION_FORMAT = 'selfcest-page-session';
export const SESSION_VERSION = 1;
/** Rollouts a save keeps (the newest; the table keeps as many). */
export const SAVED_EPISODES = 200;

/** A checkpoint's files by name, as the engine exports and loads them. */
export type FileSet = Record<string, Uint8Array>;

/** One saved session, whole (archive.ts splits off the file sets when it stores it). */
export interface SavedSession {
  savedAt: string;
  config: RunConfig;
  model: ModelReport;
  modelNote: string | null;
  /** The current weights and their counters. */
  weights: FileSet;
  counters: ModelCounters;
  /** The model's origin: its KL reference and what Reset returns to. `id` names it in the archive. */
  origin: { id: string; files: FileSet; counters: ModelCounters };
  metrics: MetricPoint[];
  sftMetrics: SftMetricsRow[];
  frontier: FrontierPoint[];
  /** Newest first, at most SAVED_EPISODES. */
  episodes: { step: number; trace: EpisodeTrace }[];
  provenance: ProvenanceEvent[];
}

/** What archive.ts stores for a session: the session without its file sets, which it stores by key. */
export interface SessionRecord {
  format: typeof SESSION_FORMAT;
  version: typeof SESSION_VERSION;
  savedAt: string;
  config: RunConfig;
  model: ModelReport;
  modelNote: string | null;
  counters: ModelCounters;
  origin: { id: string; counters: ModelCounters };
  metrics: MetricPoint[];
  sftMetrics: SftMetricsRow[];
  frontier: FrontierPoint[];
  /** The rollouts as traces JSONL (docs/FORMATS.md), each line with its `step`: read back with the traces reader's checks. */
  episodes: string;
  provenance: ProvenanceEvent[];
}

export class SessionError extends Error {
  constructor(message: string) {
    super(`saved session: ${message}`);
    this.name = 'SessionError';
  }
}

function fail(message: string): never {
  throw new SessionError(message);
}

export function toRecord(s: SavedSession): SessionRecord {
  const episodes = s.episodes.slice(0, SAVED_EPISODES).map((e) => ({ ...e.trace, step: e.step }));
  return {
    format: SESSION_FORMAT,
    version: SESSION_VERSION,
    savedAt: s.savedAt,
    config: s.config,
    model: s.model,
    modelNote: s.modelNote,
    counters: s.counters,
    origin: { id: s.origin.id, counters: s.origin.counters },
    metrics: s.metrics,
    sftMetrics: s.sftMetrics,
    frontier: s.frontier,
    episodes: tracesToJsonl(episodes),
    provenance: s.provenance,
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;

/** The record and its two file sets as read back, checked; throws SessionError naming the first problem. */
export function fromRecord(raw: unknown, weights: unknown, origin: unknown): SavedSession {
  if (!isObject(raw)) fail('the record is not an object');
  if (raw.format !== SESSION_FORMAT) fail(`format must be "${SESSION_FORMAT}" (got ${JSON.stringify(raw.format)})`);
  if (raw.version !== SESSION_VERSION) fail(`version ${JSON.stringify(raw.version)} is not one this build reads (${SESSION_VERSION})`);
  if (typeof raw.savedAt !== 'string') fail('savedAt must be a string');
  let config: RunConfig;
  try {
    config = validateRunConfig(isObject(raw.config) ? (raw.config as Partial<RunConfig>) : fail('config must be an object'), 'page');
  } catch (e) {
    return fail(`config: ${(e as Error).message}`);
  }
  const model = checkModel(raw.model);
  if (raw.modelNote !== null && typeof raw.modelNote !== 'string') fail('modelNote must be a string or null');
  const counters = checkCounters(raw.counters, 'counters');
  if (!isObject(raw.origin) || typeof raw.origin.id !== 'string') fail('origin must be an object with a string id');
  const originCounters = checkCounters(raw.origin.counters, 'origin.counters');
  const metrics = checkRows<MetricPoint>(raw.metrics, 'metrics', (r) => isObject(r.metrics) && isCount(r.metrics.step) && typeof r.episodes === 'number');
  const sftMetrics = checkRows<SftMetricsRow>(raw.sftMetrics, 'sftMetrics', (r) => isCount(r.step) && typeof r.loss === 'number');
  const frontier = checkRows<FrontierPoint>(
    raw.frontier,
    'frontier',
    (r) => typeof r.method === 'string' && typeof r.limit === 'number' && typeof r.accuracy === 'number',
  );
  if (typeof raw.episodes !== 'string') fail('episodes must be traces JSONL text');
  let traces: EpisodeTrace[];
  try {
    traces = parseTracesJsonl(raw.episodes);
  } catch (e) {
    return fail(`episodes: ${(e as Error).message}`);
  }
  const episodes = traces.map((trace, i) => {
    const { step, ...rest } = trace as EpisodeTrace & { step?: unknown };
    if (!isCount(step)) fail(`episodes: line ${i + 1}: step must be a non-negative integer`);
    return { step, trace: rest as EpisodeTrace };
  });
  if (!Array.isArray(raw.provenance)) fail('provenance must be an array');
  let provenance: ProvenanceEvent[];
  try {
    provenance = parseProvenance({ format: PROVENANCE_FORMAT, version: PROVENANCE_VERSION, ...counters, events: raw.provenance }).events;
  } catch (e) {
    return fail((e as Error).message.replace(/^provenance\.json: /, 'provenance: '));
  }
  return {
    savedAt: raw.savedAt,
    config,
    model,
    modelNote: raw.modelNote as string | null,
    weights: checkFiles(weights, 'weights'),
    counters,
    origin: { id: raw.origin.id, files: checkFiles(origin, 'origin weights'), counters: originCounters },
    metrics,
    sftMetrics,
    frontier,
    episodes,
    provenance,
  };
}

function checkModel(v: unknown): ModelReport {
  if (!isObject(v)) fail('model must be an object');
  if (typeof v.preset !== 'string' || typeof v.source !== 'string' || !isCount(v.parameters) || !isCount(v.policyVersion)) {
    fail('model must hold preset and source (strings), parameters and policyVersion (non-negative integers)');
  }
  return { preset: v.preset, parameters: v.parameters, policyVersion: v.policyVersion, source: v.source };
}

function checkCounters(v: unknown, name: string): ModelCounters {
  if (!isObject(v)) fail(`${name} must be an object`);
  for (const k of ['policyVersion', 'grpoSteps', 'sftSteps']) {
    if (!isCount(v[k])) fail(`${name}.${k} must be a non-negative integer (got ${JSON.stringify(v[k])})`);
  }
  return { policyVersion: v.policyVersion as number, grpoSteps: v.grpoSteps as number, sftSteps: v.sftSteps as number };
}

function checkRows<T>(v: unknown, name: string, ok: (row: Record<string, unknown>) => boolean): T[] {
  if (!Array.isArray(v)) fail(`${name} must be an array`);
  v.forEach((row, i) => {
    if (!isObject(row) || !ok(row)) fail(`${name}[${i}] is not a ${name} row`);
  });
  return v as T[];
}

/**
 * The files a stored set must hold: a toy checkpoint's (with selfcest.json), a LoRA adapter's, or
 * a Hugging Face folder's (its weights in one file or an index of shards).
 */
function requiredFiles(v: Record<string, unknown>): string[] {
  if ('adapter_model.safetensors' in v) return ['adapter_config.json', 'adapter_model.safetensors'];
  if (!('selfcest.json' in v) && 'config.json' in v)
    return ['config.json', 'tokenizer.json', 'model.safetensors.index.json' in v ? 'model.safetensors.index.json' : 'model.safetensors'];
  return [...REQUIRED_CHECKPOINT_FILES];
}

/** A stored file set: the required files of its kind, each as bytes (the engine checks their content). */
function checkFiles(v: unknown, name: string): FileSet {
  if (v === undefined) fail(`the ${name} are missing from the archive`);
  if (!isObject(v)) fail(`the ${name} are not a set of files`);
  const missing = requiredFiles(v).filter((f) => !(v[f] instanceof Uint8Array));
  if (missing.length > 0) fail(`the ${name} lack ${missing.join(', ')}`);
  for (const [file, bytes] of Object.entries(v)) if (!(bytes instanceof Uint8Array)) fail(`the ${name}: ${file} is not bytes`);
  return v as FileSet;
}
