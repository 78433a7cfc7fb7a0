/**
 * Provenance: what produced a model's weights, oldest first. A `load` event says where they came
 * from (a shipped checkpoint, an imported file, a random init); each training segment after it
 * says what ran on them — GRPO or the warm start (SFT), the settings it ran with (the run-config
 * fields its CLI command takes, so `train`/`sft` with these values reproduces it), the step
 * numbers it covered and the policy versions before and after.
 *
 * The page keeps the list, saves it with its session and writes it into the weights export as
 * provenance.json (docs/FORMATS.md); an import reads it back, with the counters, so the model
 * resumes at its policy version instead of v0. Pure: no DOM, no engine.
 */
import { RUN_CONFIG_FIELDS, type RunConfig, type Surface, type Target } from '../runConfig';

export const PROVENANCE_FILE = 'provenance.json';
export const PROVENANCE_FORMAT = 'selfcest-provenance';
export const PROVENANCE_VERSION = 1;

/** A model's counters: what the engine needs to resume it where it was. */
export interface ModelCounters {
  /** One more for every optimizer update (GRPO step, applied SFT step). */
  policyVersion: number;
  /** GRPO steps taken since the model's origin (they seed the next prompts). */
  grpoSteps: number;
  /** Warm-start steps taken since the model's origin. */
  sftSteps: number;
}

/** Weights loaded: their source and the counters they were loaded at (Reset returns to them). */
export interface LoadEvent extends ModelCounters {
  kind: 'load';
  /** A checkpoint URL, imported file names, or "random init (seed N)". */
  source: string;
  preset: string;
  /** ISO 8601 time. */
  at: string;
  /** What trained the loaded checkpoint, where its own record says (a CLI train run: grpo; sft); absent when unknown. */
  trainedBy?: 'grpo' | 'sft';
}

export type TrainingKind = 'grpo' | 'sft';

export interface TrainingSegment {
  kind: TrainingKind;
  /** Step numbers covered, inclusive (GRPO steps or warm-start steps, counted from the origin). */
  firstStep: number;
  lastStep: number;
  /** Policy version before the segment's first step and after its last. */
  fromVersion: number;
  toVersion: number;
  /** Run-config values the segment ran with (trainingSettings). */
  settings: Record<string, unknown>;
  startedAt: string;
  endedAt: string;
}

export type ProvenanceEvent = LoadEvent | TrainingSegment;

/** provenance.json. */
export interface Provenance extends ModelCounters {
  format: typeof PROVENANCE_FORMAT;
  version: typeof PROVENANCE_VERSION;
  events: ProvenanceEvent[];
}

/** The config targets that shape a segment, and the CLI command whose flags they are. */
const SEGMENT_FIELDS: Record<TrainingKind, { targets: readonly Target[]; command: Surface }> = {
  grpo: { targets: ['task', 'grpo', 'loss', 'advantage', 'reward', 'rollout'], command: 'train' },
  sft: { targets: ['task', 'sft', 'rollout'], command: 'sft' },
};

/** The settings a GRPO or SFT segment records: every field of its targets that its CLI command takes. */
export function trainingSettings(kind: TrainingKind, config: RunConfig): Record<string, unknown> {
  const { targets, command } = SEGMENT_FIELDS[kind];
  const out: Record<string, unknown> = {};
  for (const f of RUN_CONFIG_FIELDS) {
    if (targets.includes(f.target) && f.surfaces.includes(command)) out[f.key] = structuredClone(config[f.key]);
  }
  return out;
}

export const ZERO_COUNTERS: ModelCounters = { policyVersion: 0, grpoSteps: 0, sftSteps: 0 };

export function loadEvent(
  source: string,
  preset: string,
  counters: ModelCounters = ZERO_COUNTERS,
  at: Date = new Date(),
  trainedBy: 'grpo' | 'sft' | null = null,
): LoadEvent {
  const e: LoadEvent = {
    kind: 'load',
    source,
    preset,
    policyVersion: counters.policyVersion,
    grpoSteps: counters.grpoSteps,
    sftSteps: counters.sftSteps,
    at: at.toISOString(),
  };
  return trainedBy === null ? e : { ...e, trainedBy };
}

/** The policy version at the end of the list (that of its last event). */
export function provenanceVersion(events: readonly ProvenanceEvent[]): number {
  const last = events[events.length - 1];
  if (last === undefined) return 0;
  return last.kind === 'load' ? last.policyVersion : last.toVersion;
}

/** One finished step as the page sees it: its number, and whether it changed the weights. */
export interface StepDone {
  step: number;
  /** GRPO steps always count as one policy version; an SFT step only when its update was applied. */
  applied: boolean;
}

/**
 * The list with these finished steps added: a step extends the last segment when it is of the
 * same kind, with the same settings, and follows its last step; otherwise it opens a segment.
 */
export function recordSteps(
  events: readonly ProvenanceEvent[],
  kind: TrainingKind,
  steps: readonly StepDone[],
  settings: Record<string, unknown>,
  at: Date = new Date(),
): ProvenanceEvent[] {
  if (steps.length === 0) return [...events];
  const out = [...events];
  const when = at.toISOString();
  const key = JSON.stringify(settings);
  for (const s of steps) {
    const last = out[out.length - 1];
    const version = provenanceVersion(out);
    if (last !== undefined && last.kind === kind && s.step === last.lastStep + 1 && JSON.stringify(last.settings) === key) {
      out[out.length - 1] = { ...last, lastStep: s.step, toVersion: version + (s.applied ? 1 : 0), endedAt: when };
    } else {
      out.push({
        kind,
        firstStep: s.step,
        lastStep: s.step,
        fromVersion: version,
        toVersion: version + (s.applied ? 1 : 0),
        settings,
        startedAt: when,
        endedAt: when,
      });
    }
  }
  return out;
}

/** The provenance up to GRPO step `last`: later GRPO steps (one version each) cut off. */
export function provenanceUpTo(events: readonly ProvenanceEvent[], last: number): ProvenanceEvent[] {
  const out: ProvenanceEvent[] = [];
  for (const e of events) {
    if (e.kind !== 'grpo' || e.lastStep <= last) out.push(e);
    else if (e.firstStep <= last) out.push({ ...e, lastStep: last, toVersion: e.fromVersion + (last - e.firstStep + 1) });
  }
  return out;
}

/** What Reset returns to: the list up to and including the last load (the model's origin). */
export function originProvenance(events: readonly ProvenanceEvent[]): ProvenanceEvent[] {
  let i = events.length - 1;
  while (i >= 0 && events[i].kind !== 'load') i--;
  return events.slice(0, i + 1);
}

/** The counters of the model's origin (its last load); zeros when nothing says. */
export function originCounters(events: readonly ProvenanceEvent[]): ModelCounters {
  const load = originProvenance(events).at(-1);
  return load?.kind === 'load' ? { policyVersion: load.policyVersion, grpoSteps: load.grpoSteps, sftSteps: load.sftSteps } : { ...ZERO_COUNTERS };
}

/** The counters at the end of the list, and how the policy version got there from the origin. */
export interface CounterBreakdown extends ModelCounters {
  origin: ModelCounters;
  /** Since the origin: versions added by GRPO steps (one each) and by warm-start steps (one per applied step). */
  grpoVersions: number;
  sftVersions: number;
  /** Warm-start steps since the origin whose update was skipped (a non-finite loss or gradient). */
  sftSkipped: number;
}

/** policyVersion = origin.policyVersion + grpoVersions + sftVersions; steps count from the model's origin, as the engine's do. */
export function counterBreakdown(events: readonly ProvenanceEvent[]): CounterBreakdown {
  const origin = originCounters(events);
  const out: CounterBreakdown = { ...origin, origin, grpoVersions: 0, sftVersions: 0, sftSkipped: 0 };
  for (const e of events.slice(originProvenance(events).length)) {
    if (e.kind === 'load') continue;
    const versions = e.toVersion - e.fromVersion;
    if (e.kind === 'grpo') {
      out.grpoSteps = Math.max(out.grpoSteps, e.lastStep);
      out.grpoVersions += versions;
    } else {
      out.sftSteps = Math.max(out.sftSteps, e.lastStep);
      out.sftVersions += versions;
      out.sftSkipped += e.lastStep - e.firstStep + 1 - versions;
    }
  }
  out.policyVersion = provenanceVersion(events);
  return out;
}

/**
 * The GRPO training behind the weights, by their history: GRPO steps counted from the origin
 * (imported counters included), and the loads of checkpoints whose record says GRPO trained them.
 */
export function grpoHistory(events: readonly ProvenanceEvent[]): { steps: number; checkpoints: string[] } {
  const checkpoints = events.filter((e): e is LoadEvent => e.kind === 'load' && e.trainedBy === 'grpo').map((e) => e.source);
  return { steps: counterBreakdown(events).grpoSteps, checkpoints: [...new Set(checkpoints)] };
}

export function makeProvenance(counters: ModelCounters, events: readonly ProvenanceEvent[]): Provenance {
  return { format: PROVENANCE_FORMAT, version: PROVENANCE_VERSION, ...counters, events: [...events] };
}

export function encodeProvenance(p: Provenance): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(`${JSON.stringify(p, null, 2)}\n`);
}

export class ProvenanceError extends Error {
  constructor(message: string) {
    super(`${PROVENANCE_FILE}: ${message}`);
    this.name = 'ProvenanceError';
  }
}

function fail(message: string): never {
  throw new ProvenanceError(message);
}

const isCount = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** provenance.json's bytes, checked field by field; the first problem is reported by name. */
export function decodeProvenance(bytes: Uint8Array): Provenance {
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (e) {
    return fail(`not valid JSON (${(e as Error).message})`);
  }
  return parseProvenance(raw);
}

/** A parsed provenance object (from provenance.json, selfcest.json's `training`, or a saved session), checked. */
export function parseProvenance(raw: unknown): Provenance {
  if (!isObject(raw)) fail('must hold a JSON object');
  if (raw.format !== PROVENANCE_FORMAT) fail(`format must be "${PROVENANCE_FORMAT}" (got ${JSON.stringify(raw.format)})`);
  if (raw.version !== PROVENANCE_VERSION) fail(`unsupported version ${JSON.stringify(raw.version)} (this build reads ${PROVENANCE_VERSION})`);
  for (const k of ['policyVersion', 'grpoSteps', 'sftSteps'] as const) {
    if (!isCount(raw[k])) fail(`${k} must be a non-negative integer (got ${JSON.stringify(raw[k])})`);
  }
  if (!Array.isArray(raw.events)) fail('events must be an array');
  const events = raw.events.map((e, i) => parseEvent(e, i));
  return makeProvenance({ policyVersion: raw.policyVersion as number, grpoSteps: raw.grpoSteps as number, sftSteps: raw.sftSteps as number }, events);
}

function parseEvent(e: unknown, i: number): ProvenanceEvent {
  const where = `events[${i}]`;
  if (!isObject(e)) fail(`${where} must be an object`);
  const str = (k: string) => {
    if (typeof e[k] !== 'string') fail(`${where}.${k} must be a string (got ${JSON.stringify(e[k])})`);
    return e[k] as string;
  };
  const count = (k: string) => {
    if (!isCount(e[k])) fail(`${where}.${k} must be a non-negative integer (got ${JSON.stringify(e[k])})`);
    return e[k] as number;
  };
  if (e.kind === 'load') {
    const load: LoadEvent = {
      kind: 'load',
      source: str('source'),
      preset: str('preset'),
      policyVersion: count('policyVersion'),
      grpoSteps: count('grpoSteps'),
      sftSteps: count('sftSteps'),
      at: str('at'),
    };
    if (e.trainedBy === undefined) return load;
    if (e.trainedBy !== 'grpo' && e.trainedBy !== 'sft') fail(`${where}.trainedBy must be grpo or sft when given (got ${JSON.stringify(e.trainedBy)})`);
    return { ...load, trainedBy: e.trainedBy };
  }
  if (e.kind !== 'grpo' && e.kind !== 'sft') fail(`${where}.kind must be load, grpo or sft (got ${JSON.stringify(e.kind)})`);
  const seg: TrainingSegment = {
    kind: e.kind,
    firstStep: count('firstStep'),
    lastStep: count('lastStep'),
    fromVersion: count('fromVersion'),
    toVersion: count('toVersion'),
    settings: isObject(e.settings) ? e.settings : fail(`${where}.settings must be an object`),
    startedAt: str('startedAt'),
    endedAt: str('endedAt'),
  };
  if (seg.lastStep < seg.firstStep) fail(`${where}: lastStep ${seg.lastStep} is before firstStep ${seg.firstStep}`);
  if (seg.toVersion < seg.fromVersion) fail(`${where}: toVersion ${seg.toVersion} is before fromVersion ${seg.fromVersion}`);
  return seg;
}
