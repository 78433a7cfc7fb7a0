/**
 * A kept run: what comparing runs needs of a finished or paused run, without its weights. The
 * page keeps its current run under a name (its config and URL hash, provenance, curves,
 * held-out readings, frontier points, counters); a CLI run directory is imported into the same
 * shape (cliRun.ts). Weights stay out: the current ones live in the saved session, and a
 * comparison reads curves, not parameters, so a kept run is a few hundred kB at most.
 *
 * Pure: page state → record, and a record read back → checked run, every field named when it is
 * wrong (a damaged record is reported, never half shown). keptRunStore.ts stores records.
 */
import type { FrontierPoint } from '../../core/eval/frontier';
import { type ProvenanceEvent, PROVENANCE_FORMAT, PROVENANCE_VERSION, originCounters, parseProvenance } from '../../core/io/provenance';
import { type RunConfig, validateRunConfig } from '../../core/runConfig';
import { TraceFormatError, parseTracesJsonl } from '../../core/io/traces';
import type { SteppedTrace } from '../../core/eval/traceRows';
import { type MetricPoint, MetricsRowError, checkMetricsRows } from './metricsRows';
import type { ModelReport } from '../../runtime/engine/messages';
import type { SftMetricsRow } from '../../core/sft/sft';

export const KEPT_RUN_FORMAT = 'selfcest-kept-run';
export const KEPT_RUN_VERSION = 1;
/** The longest name a run may have (the list shows it whole). */
export const MAX_NAME = 80;

/** One held-out evaluation during training: the delegating policy, greedy, on the monitor set. */
export interface HeldOutReading {
  step: number;
  accuracy: number;
  /** Problems evaluated; null where the run did not record it. */
  n: number | null;
  /** 95% interval (the page's Wilson interval), or null. */
  interval: [number, number] | null;
}

/** Where a kept run came from, and the configuration it ran with. */
export type RunOrigin =
  | {
      kind: 'page';
      /** The page's run config at the moment it was kept, and the URL hash that gives it. */
      config: RunConfig;
      hash: string;
      model: { preset: string; source: string };
      provenance: ProvenanceEvent[];
    }
  | {
      kind: 'cli';
      /** The files it was imported from. */
      files: string[];
      /** run.json's (or state.json's) `config`: the CLI's trainer config; null when only metrics were given. */
      config: Record<string, unknown> | null;
      /** run.json's command line, when given. */
      command: string[] | null;
      startedAt: string | null;
    };

export interface KeptRun {
  id: string;
  name: string;
  /** ISO 8601 time it was kept or imported. */
  keptAt: string;
  /** The task name ('' where no config says it). */
  task: string;
  origin: RunOrigin;
  /** policyVersion null: not known (a CLI run counts steps, not versions). */
  counters: { policyVersion: number | null; grpoSteps: number; sftSteps: number };
  /** The per-step rows, as the charts draw them. */
  metrics: MetricPoint[];
  heldOut: HeldOutReading[];
  frontier: FrontierPoint[];
  /**
   * A sample of the run's rollouts (at most MAX_KEPT_ROLLOUTS, the newest), each with its step,
   * when it was imported with its traces (a CLI run's traces.jsonl, a verl run read back).
   */
  rollouts?: SteppedTrace[];
}

/** The most rollouts a kept run holds (the page's rollout table also keeps 200). */
export const MAX_KEPT_ROLLOUTS = 200;

/** What is stored: the run and its format, so a later build can tell what it reads. */
export interface KeptRunRecord extends KeptRun {
  format: typeof KEPT_RUN_FORMAT;
  version: typeof KEPT_RUN_VERSION;
}

export class KeptRunError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeptRunError';
  }
}

/** A run's name, trimmed; throws naming the rule it breaks. */
export function checkRunName(name: string): string {
  const t = name.trim();
  if (t === '') throw new KeptRunError('a run needs a name (got an empty one)');
  if (t.length > MAX_NAME) throw new KeptRunError(`a run's name must be at most ${MAX_NAME} characters (got ${t.length})`);
  return t;
}

/**
 * The page's held-out readings: the periodic evaluations of the delegating policy (frontier
 * points with a step), as the CLI's monitor evaluation also lets the root delegate.
 */
export function pageHeldOut(frontier: readonly FrontierPoint[]): HeldOutReading[] {
  const byStep = new Map<number, HeldOutReading>();
  for (const p of frontier) {
    if (p.step === undefined || p.method !== 'delegate') continue;
    byStep.set(p.step, { step: p.step, accuracy: p.accuracy, n: p.n, interval: [p.interval[0], p.interval[1]] });
  }
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}

/** The page's state a kept run is made from (the store's PlaygroundState has these fields). */
export interface PageRunState {
  /** The config the engine runs with (and the URL hash shows). */
  config: RunConfig;
  model: ModelReport | null;
  metrics: MetricPoint[];
  /** Warm-start steps of this model (the CLI's sft rows). */
  sftMetrics: SftMetricsRow[];
  /** Accuracy–cost points of this model: its evaluations and the training run's periodic ones. */
  frontier: FrontierPoint[];
  /** What produced the current weights, oldest first (core/io/provenance.ts). */
  provenance: ProvenanceEvent[];
  policyVersion: number;
}

/** The page's current run as a kept run (copies: later steps do not change it). Throws without a model. */
export function pageRunOf(s: PageRunState, meta: { id: string; name: string; keptAt: string; hash: string }): KeptRun {
  if (s.model === null) throw new KeptRunError('there is no model loaded, so no run to keep');
  const origin = originCounters(s.provenance);
  return {
    id: meta.id,
    name: checkRunName(meta.name),
    keptAt: meta.keptAt,
    task: s.config.task,
    origin: { kind: 'page', config: structuredClone(s.config), hash: meta.hash, model: { preset: s.model.preset, source: s.model.source }, provenance: structuredClone(s.provenance) },
    counters: {
      policyVersion: s.policyVersion,
      grpoSteps: s.metrics.at(-1)?.metrics.step ?? origin.grpoSteps,
      sftSteps: s.sftMetrics.at(-1)?.step ?? origin.sftSteps,
    },
    metrics: s.metrics.map((p) => ({ metrics: structuredClone(p.metrics), episodes: p.episodes })),
    heldOut: pageHeldOut(s.frontier),
    frontier: structuredClone([...s.frontier]),
  };
}

export function toKeptRecord(run: KeptRun): KeptRunRecord {
  return { format: KEPT_RUN_FORMAT, version: KEPT_RUN_VERSION, ...run };
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/** A stored record, checked; throws a KeptRunError naming `key` and the first field that is wrong. */
export function fromKeptRecord(raw: unknown, key: string): KeptRun {
  const fail = (message: string): never => {
    throw new KeptRunError(`kept run ${key}: ${message}`);
  };
  if (!isObject(raw)) return fail('the record is not an object');
  if (raw.format !== KEPT_RUN_FORMAT) fail(`format must be "${KEPT_RUN_FORMAT}" (got ${JSON.stringify(raw.format)})`);
  if (raw.version !== KEPT_RUN_VERSION) fail(`version ${JSON.stringify(raw.version)} is not one this build reads (${KEPT_RUN_VERSION})`);
  for (const k of ['id', 'name', 'keptAt', 'task'] as const) if (typeof raw[k] !== 'string') fail(`${k} must be a string (got ${JSON.stringify(raw[k])})`);
  const c = raw.counters;
  if (!isObject(c) || !(c.policyVersion === null || isCount(c.policyVersion)) || !isCount(c.grpoSteps) || !isCount(c.sftSteps)) {
    fail('counters must hold grpoSteps and sftSteps (non-negative integers) and policyVersion (one, or null)');
  }
  const origin = checkOrigin(raw.origin, fail);
  if (!Array.isArray(raw.metrics)) fail('metrics must be an array');
  const points = raw.metrics as unknown[];
  points.forEach((p, i) => {
    if (!isObject(p) || typeof p.episodes !== 'number') fail(`metrics[${i}] must hold metrics and episodes (a number)`);
  });
  let rows;
  try {
    rows = checkMetricsRows(points.map((p) => (p as { metrics: unknown }).metrics), (i) => `metrics[${i}]`);
  } catch (e) {
    return fail(e instanceof MetricsRowError ? e.message : String(e));
  }
  const metrics: MetricPoint[] = rows.map((metrics, i) => ({ metrics, episodes: (points[i] as { episodes: number }).episodes }));
  if (!Array.isArray(raw.heldOut)) fail('heldOut must be an array');
  const heldOut = (raw.heldOut as unknown[]).map((h, i): HeldOutReading => {
    const ok = isObject(h) && isCount(h.step) && typeof h.accuracy === 'number' && (h.n === null || isCount(h.n)) && (h.interval === null || (Array.isArray(h.interval) && h.interval.length === 2 && h.interval.every((x) => typeof x === 'number')));
    if (!ok) fail(`heldOut[${i}] must hold step, accuracy, n (or null) and interval (two numbers, or null)`);
    return h as unknown as HeldOutReading;
  });
  if (!Array.isArray(raw.frontier)) fail('frontier must be an array');
  const frontier = (raw.frontier as unknown[]).map((p, i) => {
    if (!isObject(p) || typeof p.method !== 'string' || typeof p.limit !== 'number' || typeof p.accuracy !== 'number' || !Array.isArray(p.interval)) fail(`frontier[${i}] is not a frontier point`);
    return p as unknown as FrontierPoint;
  });
  const rollouts = raw.rollouts === undefined ? undefined : checkRollouts(raw.rollouts, fail);
  return {
    id: raw.id as string,
    name: raw.name as string,
    keptAt: raw.keptAt as string,
    task: raw.task as string,
    origin,
    counters: { policyVersion: (c as Record<string, unknown>).policyVersion as number | null, grpoSteps: (c as Record<string, number>).grpoSteps, sftSteps: (c as Record<string, number>).sftSteps },
    metrics,
    heldOut,
    frontier,
    ...(rollouts ? { rollouts } : {}),
  };
}

/** Stored rollouts: each a trace the traces reader takes, with an integer step ≥ 0. */
function checkRollouts(raw: unknown, fail: (message: string) => never): SteppedTrace[] {
  if (!Array.isArray(raw) || raw.length > MAX_KEPT_ROLLOUTS) return fail(`rollouts must be an array of at most ${MAX_KEPT_ROLLOUTS} traces`);
  let traces: SteppedTrace[];
  try {
    traces = parseTracesJsonl(raw.map((t) => JSON.stringify(t)).join('\n'));
  } catch (e) {
    return fail(e instanceof TraceFormatError ? e.message.replace(/^traces: line (\d+)/, (_, n) => `rollouts[${Number(n) - 1}]`) : String(e));
  }
  traces.forEach((t, i) => {
    if (t.step !== undefined && !isCount(t.step)) fail(`rollouts[${i}].step must be an integer ≥ 0`);
  });
  return traces;
}

function checkOrigin(o: unknown, fail: (message: string) => never): RunOrigin {
  if (!isObject(o)) return fail('origin must be an object');
  if (o.kind === 'page') {
    let config: RunConfig;
    try {
      config = validateRunConfig(isObject(o.config) ? (o.config as Partial<RunConfig>) : fail('origin.config must be an object'), 'page');
    } catch (e) {
      return fail(`origin.config: ${(e as Error).message}`);
    }
    if (typeof o.hash !== 'string') fail('origin.hash must be a string');
    if (!isObject(o.model) || typeof o.model.preset !== 'string' || typeof o.model.source !== 'string') fail('origin.model must hold preset and source (strings)');
    if (!Array.isArray(o.provenance)) fail('origin.provenance must be an array');
    let provenance: ProvenanceEvent[];
    try {
      provenance = parseProvenance({ format: PROVENANCE_FORMAT, version: PROVENANCE_VERSION, policyVersion: 0, grpoSteps: 0, sftSteps: 0, events: o.provenance }).events;
    } catch (e) {
      return fail((e as Error).message.replace(/^provenance\.json: /, 'origin.provenance: '));
    }
    const model = o.model as { preset: string; source: string };
    return { kind: 'page', config, hash: o.hash as string, model: { preset: model.preset, source: model.source }, provenance };
  }
  if (o.kind === 'cli') {
    if (!isStringList(o.files)) fail('origin.files must be a list of file names');
    if (o.config !== null && !isObject(o.config)) fail('origin.config must be an object or null');
    if (o.command !== null && !isStringList(o.command)) fail('origin.command must be a list of strings or null');
    if (o.startedAt !== null && typeof o.startedAt !== 'string') fail('origin.startedAt must be a string or null');
    return { kind: 'cli', files: o.files as string[], config: o.config as Record<string, unknown> | null, command: o.command as string[] | null, startedAt: o.startedAt as string | null };
  }
  return fail(`origin.kind must be "page" or "cli" (got ${JSON.stringify(o.kind)})`);
}

/** The name offered for the current run: what usually tells runs apart (model, task, lr, gating, steps). */
export function suggestedRunName(s: Pick<PageRunState, 'config' | 'model' | 'metrics'>): string {
  const c = s.config;
  const steps = s.metrics.at(-1)?.metrics.step ?? 0;
  return `${s.model?.preset ?? c.preset} ${c.task}, lr ${c.lr}${c.gating ? '' : ', no gating'}, step ${steps}`.slice(0, MAX_NAME);
}

/** `name`, or with " (2)", " (3)", … appended when a run of that name is kept already. */
export function uniqueRunName(name: string, taken: readonly string[]): string {
  const names = new Set(taken);
  if (!names.has(name)) return name;
  for (let i = 2; ; i++) {
    const suffix = ` (${i})`;
    const candidate = `${name.slice(0, MAX_NAME - suffix.length)}${suffix}`;
    if (!names.has(candidate)) return candidate;
  }
}
