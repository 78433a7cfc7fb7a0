/**
 * The run history picked beside a checkpoint: a CLI run folder's metrics.jsonl (the curves) and
 * traces.jsonl (the rollouts), or the page's own Metrics and Traces exports. They are read with
 * the checks the Runs panel and the saved session use, so one bad line refuses the whole import,
 * naming the file and the line. A warm-start run's metrics.jsonl (sft rows) is set aside, not
 * refused: its checkpoint imports as before. Pure: picked bytes → history.
 */
import { CHECKPOINT_FILES } from '../../core/io/checkpoint';
import type { ModelCounters } from '../../core/io/provenance';
import { parseTracesJsonl } from '../../core/io/traces';
import type { EpisodeTrace } from '../../core/rollout/trace';
import { parseConfigFile, parseMetricsJsonl } from '../runs/cliRun';
import { episodesOf } from '../runs/metricsRows';
import { MAX_EPISODES, type MetricPoint } from '../state/store';
import type { CheckpointPick } from './checkpointTar';

export interface RunHistory {
  /** The curves, one point per GRPO row (empty without a GRPO metrics.jsonl). */
  metrics: MetricPoint[];
  /** The rollouts in file order (oldest first), each line's `step` taken off its trace. */
  traces: { step: number; trace: EpisodeTrace }[];
  /** The last step the rows or rollouts reach (0: none), and the file that reaches it. */
  lastStep: number;
  lastStepFrom: string | null;
  /** What was taken from which file, for the import note. */
  loaded: string[];
  /** The run files not used. */
  ignored: string[];
}

/** A run file that cannot be read; the message names the file and the line. */
export class RunFolderError extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const range = (a: number, b: number) => (a === b ? `step ${a}` : `steps ${a}–${b}`);

/** Whether a metrics file is a warm start's (its first row has loss and lr, no meanReward: the CLI sft's rows). */
function isWarmStartFile(text: string): boolean {
  const first = text.split('\n').find((l) => l.trim() !== '');
  try {
    const row: unknown = first === undefined ? null : JSON.parse(first);
    return isObject(row) && row.meanReward === undefined && 'loss' in row && 'lr' in row;
  } catch {
    return false; // parseMetricsJsonl names the line
  }
}

/** traces.jsonl → {step, trace} in file order; throws naming the file, the line and the field. */
export function parseRunTraces(text: string, file: string): { step: number; trace: EpisodeTrace }[] {
  let traces: EpisodeTrace[];
  try {
    traces = parseTracesJsonl(text);
  } catch (e) {
    throw new RunFolderError(`${file}: ${(e as Error).message.replace(/^traces: /, '')}`);
  }
  const lines = text.split('\n').flatMap((l, i) => (l.trim() === '' ? [] : [i + 1]));
  return traces.map((t, i) => {
    const { step, ...trace } = t as EpisodeTrace & { step?: unknown };
    if (!Number.isSafeInteger(step) || (step as number) < 0)
      throw new RunFolderError(`${file}: line ${lines[i]}: step must be a non-negative integer (got ${JSON.stringify(step)})`);
    return { step: step as number, trace: trace as EpisodeTrace };
  });
}

/**
 * Where the run's group size is written, for violation rates per episode: run.json or state.json
 * (the trainer config), else selfcest.json's `training` (the CLI train's config, or the page
 * export's `playground` config). Null when none says.
 */
function groupConfigOf(pick: CheckpointPick): { config: Record<string, unknown>; from: string } | null {
  const file = pick.run.get('run.json') ?? pick.run.get('state.json');
  if (file) return { config: parseConfigFile(decode(file.bytes), file.origin).config, from: file.origin };
  const selfcest = pick.files.get(CHECKPOINT_FILES.selfcest);
  let training: unknown;
  try {
    training = selfcest && (JSON.parse(decode(selfcest)) as Record<string, unknown>).training;
  } catch {
    return null; // the engine reports a bad selfcest.json
  }
  if (!isObject(training)) return null;
  const config = training.kind === 'train' ? training : training.playground;
  return isObject(config) && typeof config.group === 'number'
    ? { config, from: pick.origins.get(CHECKPOINT_FILES.selfcest) ?? CHECKPOINT_FILES.selfcest }
    : null;
}

/** The picked run files as curves and rollouts; throws RunFolderError (or the Runs panel's KeptRunError) naming the file and line. */
export function runHistoryOf(pick: CheckpointPick): RunHistory {
  const history: RunHistory = { metrics: [], traces: [], lastStep: 0, lastStepFrom: null, loaded: [], ignored: [] };
  const reach = (step: number, from: string) => {
    if (step > history.lastStep) [history.lastStep, history.lastStepFrom] = [step, from];
  };
  let configFiles = (['run.json', 'state.json'] as const).flatMap((name) => pick.run.get(name)?.origin ?? []);
  const metrics = pick.run.get('metrics.jsonl');
  const metricsText = metrics ? decode(metrics.bytes) : '';
  if (metrics && metricsText.trim() === '') history.ignored.push(`${metrics.origin} (no rows)`);
  else if (metrics && isWarmStartFile(metricsText)) history.ignored.push(`${metrics.origin} (warm-start rows: the page loads a GRPO run's)`);
  else if (metrics) {
    const rows = parseMetricsJsonl(metricsText, metrics.origin);
    const group = groupConfigOf(pick);
    history.metrics = rows.map((row) => ({ metrics: row, episodes: episodesOf(row, group?.config ?? null) }));
    const last = rows[rows.length - 1].step;
    reach(last, metrics.origin);
    const rates = group ? `, episodes per step from ${group.from}` : '; no run.json or state.json says its group size, so no violation rates';
    history.loaded.push(`curves of ${rows.length} GRPO step${rows.length === 1 ? '' : 's'} (${range(rows[0].step, last)}) from ${metrics.origin}${rates}`);
    configFiles = configFiles.filter((f) => f !== group?.from);
  }
  history.ignored.push(...configFiles);
  const traces = pick.run.get('traces.jsonl');
  if (traces) {
    history.traces = parseRunTraces(decode(traces.bytes), traces.origin);
    const n = history.traces.length;
    if (n === 0) history.ignored.push(`${traces.origin} (no rollouts)`);
    else {
      const first = history.traces.reduce((m, t) => Math.min(m, t.step), Infinity);
      const last = history.traces.reduce((m, t) => Math.max(m, t.step), 0);
      reach(last, traces.origin);
      const shown = n > MAX_EPISODES ? `, the newest ${MAX_EPISODES} in the table` : '';
      history.loaded.push(`${n} rollout${n === 1 ? '' : 's'} (${range(first, last)}) from ${traces.origin}${shown}`);
    }
  }
  return history;
}

/**
 * The counters the imported weights resume at. With provenance, its own, and the run's rows may
 * not reach past its GRPO steps (they would be of later weights, and the next steps would repeat
 * their numbers). Without, a run's last step as GRPO steps and policy version (a CLI train makes
 * one policy version a step; its selfcest.json `step` is that count), so the next step follows
 * the curve. Null without either: a plain checkpoint loads at v0, as it always has.
 */
export function resumeCounters(provenance: ModelCounters | null, history: RunHistory): { counters: ModelCounters | null; fromRun: boolean } {
  if (provenance) {
    if (history.lastStep > provenance.grpoSteps) {
      throw new RunFolderError(
        `${history.lastStepFrom}: reaches step ${history.lastStep}, but the weights' provenance.json counts ${provenance.grpoSteps} GRPO steps; pick the files of one run`,
      );
    }
    return { counters: { policyVersion: provenance.policyVersion, grpoSteps: provenance.grpoSteps, sftSteps: provenance.sftSteps }, fromRun: false };
  }
  if (history.lastStep === 0) return { counters: null, fromRun: false };
  return { counters: { policyVersion: history.lastStep, grpoSteps: history.lastStep, sftSteps: 0 }, fromRun: true };
}

/** Rollouts oldest first, one batch per run of equal steps (what addEpisodes takes). */
export function stepBatches(traces: readonly { step: number; trace: EpisodeTrace }[]): { step: number; traces: EpisodeTrace[] }[] {
  const out: { step: number; traces: EpisodeTrace[] }[] = [];
  for (const t of traces) {
    const last = out[out.length - 1];
    if (last?.step === t.step) last.traces.push(t.trace);
    else out.push({ step: t.step, traces: [t.trace] });
  }
  return out;
}
