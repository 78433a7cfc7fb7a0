/**
 * A CLI run directory (src/cli/runDir.ts) imported for comparison: its `metrics.jsonl` (one GRPO
 * step per line; on evaluation steps also evalAccuracy, evalTokens, evalReward) and, optionally,
 * its `run.json` (command line and trainer config of the first start) or, for directories of
 * the older layout, `state.json` (step and the same config). Every problem is named by file and
 * line; nothing is half imported. Pure: file texts → kept run.
 */
import type { MetricPoint } from '../state/store';
import { TraceFormatError, looksLikeTraces, parseTracesJsonl } from '../../core/io/traces';
import { firstJsonObject, jsonLines } from '../../core/io/jsonl';
import { type SteppedTrace, rowsFromTraces, stepShift } from '../../core/eval/traceRows';
import { type HeldOutReading, type KeptRun, KeptRunError, checkRunName, MAX_KEPT_ROLLOUTS, MAX_NAME } from './keptRun';
import { type MetricsRow, MetricsRowError, checkMetricsRows, episodesOf } from './metricsRows';
import { VerlRecordError, isVerlRecord, parseVerlFiles, stepFileOrder, verlRecordsToTraces } from '../../core/verl/readback';

export interface PickedText {
  name: string;
  text: string;
}

/** A config file's contents: the trainer config and, from run.json, the command line. */
export interface CliConfigFile {
  config: Record<string, unknown>;
  command: string[] | null;
  startedAt: string | null;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** metrics.jsonl → rows; throws naming the file, the line and the field. Blank lines are skipped (they still count). */
export function parseMetricsJsonl(text: string, file: string): MetricsRow[] {
  const lines = jsonLines(text, (line, m) => new KeptRunError(`${file}: line ${line}: ${m.replace('not valid JSON', 'not JSON')}`)).map(({ line, value }) => ({ line, raw: value }));
  if (lines.length === 0) throw new KeptRunError(`${file}: no rows (an empty file, or a run that has not finished a step)`);
  try {
    return checkMetricsRows(
      lines.map((l) => l.raw),
      (i) => `${file}: line ${lines[i].line}`,
    );
  } catch (e) {
    if (e instanceof MetricsRowError) throw new KeptRunError(e.message);
    throw e;
  }
}

/** run.json or state.json → its config (and run.json's command line); throws naming the file and the field. */
export function parseConfigFile(text: string, file: string): CliConfigFile {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new KeptRunError(`${file}: not valid JSON (${(e as Error).message})`);
  }
  const fail = (message: string): never => {
    throw new KeptRunError(`${file}: ${message}`);
  };
  if (!isObject(raw)) return fail('must hold a JSON object');
  if ('kind' in raw && raw.kind !== 'train') fail(`kind is ${JSON.stringify(raw.kind)}: only GRPO train runs compare here`);
  if (!isObject(raw.config)) fail(`config must be an object (the run's trainer config; got ${JSON.stringify(raw.config)})`);
  if (raw.command !== undefined && !(Array.isArray(raw.command) && raw.command.every((x) => typeof x === 'string'))) fail('command must be a list of strings');
  if (raw.startedAt !== undefined && typeof raw.startedAt !== 'string') fail('startedAt must be a string');
  return { config: raw.config as Record<string, unknown>, command: (raw.command as string[] | undefined) ?? null, startedAt: (raw.startedAt as string | undefined) ?? null };
}

/** The value of `--flag` in a command line, or null. */
export function flagValue(command: readonly string[] | null, flag: string): string | null {
  if (command === null) return null;
  const i = command.indexOf(flag);
  return i >= 0 && i + 1 < command.length ? command[i + 1] : null;
}

/** Whether a picked .jsonl is a traces file (its first row names a schema), whatever its name; empty: by its name. */
export function isTracesFile(f: PickedText): boolean {
  return f.text.trim() === '' ? f.name.startsWith('traces') : looksLikeTraces(f.text);
}

/** A verl run's rollout records (selfcest_dump.py's <step>.jsonl, or the older layout): read as the run's traces. */
function isVerlRecords(f: PickedText): boolean {
  const row = firstJsonObject(f.text);
  return row !== null && isVerlRecord(row);
}

/**
 * The files of one run among those picked: one metrics file (a `.jsonl` that is not a traces
 * file) or, without one, one traces file (a run known by its rollouts alone, e.g. a verl run read
 * back by `import-verl`: its curves are the per-step means of its episodes); at most one run.json
 * or state.json (run.json wins: it is the first start's); the rest is ignored and said so.
 */
export function pickRunFiles(files: readonly PickedText[]): { metrics: PickedText | null; traces: PickedText | null; verl: PickedText[]; config: PickedText | null; ignored: string[] } {
  const all = files.filter((f) => f.name.endsWith('.jsonl'));
  // A verl run's dump: its step files together are the run (in step order), read as import-verl reads them.
  const verl = all.filter(isVerlRecords).sort((a, b) => stepFileOrder(a.name, b.name));
  if (verl.length > 0) {
    const others = all.filter((f) => !verl.includes(f) && f.text.trim() !== '');
    if (others.length > 0) throw new KeptRunError(`pick one run at a time: ${verl[0].name} holds verl rollout records, ${others[0].name} does not`);
    return { metrics: null, traces: null, verl, config: null, ignored: files.filter((f) => !verl.includes(f)).map((f) => f.name) };
  }
  const jsonl = all;
  const traces = jsonl.filter(isTracesFile);
  const metrics = jsonl.filter((f) => !traces.includes(f));
  if (metrics.length === 0 && traces.length === 0) throw new KeptRunError(`no metrics file among ${files.map((f) => f.name).join(', ') || 'the picked files'}: pick the run's metrics.jsonl (and run.json if you have it), or a traces file`);
  if (metrics.length > 1) throw new KeptRunError(`pick one run at a time: ${metrics.map((f) => f.name).join(' and ')} are both metrics files`);
  if (traces.length > 1) throw new KeptRunError(`pick one run at a time: ${traces.map((f) => f.name).join(' and ')} are both traces files`);
  const config = files.find((f) => f.name === 'run.json') ?? files.find((f) => f.name === 'state.json') ?? null;
  const used = [metrics[0], traces[0], config];
  const ignored = files.filter((f) => !used.includes(f)).map((f) => f.name);
  return { metrics: metrics[0] ?? null, traces: traces[0] ?? null, verl: [], config, ignored };
}

/** A verl dump's step files as traces (src/core/verl/readback.ts); throws naming the file, the line and the field. */
function verlTraces(files: readonly PickedText[]): SteppedTrace[] {
  try {
    const traces = verlRecordsToTraces(parseVerlFiles(files));
    if (traces.length === 0) throw new KeptRunError(`${files.map((f) => f.name).join(', ')}: no root record (a record with parent_request_id null)`);
    return traces;
  } catch (e) {
    if (e instanceof VerlRecordError) throw new KeptRunError(e.message.replace(/^verl rollouts: /, ''));
    throw e;
  }
}

/** A verl dump's name: "verl steps 1–6" from its step files' names, else the first file's. */
function verlRunName(files: readonly PickedText[]): string {
  const steps = files.map((f) => /^(\d+)\.jsonl$/.exec(f.name)?.[1]).filter((x): x is string => x !== undefined);
  return steps.length === files.length && steps.length > 0 ? `verl steps ${steps[0]}–${steps[steps.length - 1]}.jsonl` : files[0].name;
}

/** A traces file's episodes; throws naming the file, the line and the field. */
function parseTracesFile(f: PickedText): SteppedTrace[] {
  try {
    const traces = parseTracesJsonl(f.text) as SteppedTrace[];
    if (traces.length === 0) throw new KeptRunError(`${f.name}: no rollouts`);
    traces.forEach((t, i) => {
      if (t.step !== undefined && !(Number.isSafeInteger(t.step) && t.step >= 0)) throw new KeptRunError(`${f.name}: rollout ${i + 1}: step must be an integer ≥ 0`);
    });
    return traces;
  } catch (e) {
    if (e instanceof TraceFormatError) throw new KeptRunError(`${f.name}: ${e.message.replace(/^traces: /, '')}`);
    throw e;
  }
}

/** A name for the run: the last two parts of run.json's `--out` (e.g. "ablation-naive/gating-s1"), else the metrics file's. */
export function defaultCliName(command: readonly string[] | null, metricsFile: string): string {
  const out = flagValue(command, '--out');
  const parts = (out ?? '').split('/').filter((p) => p !== '' && p !== '.');
  const name = parts.length > 0 ? parts.slice(-2).join('/') : `${metricsFile.replace(/\.jsonl$/, '')} (CLI run)`;
  return name.slice(0, MAX_NAME);
}


/** The picked files of one CLI run as a kept run, with the names of the files it did not use. */
export function cliRunOf(files: readonly PickedText[], meta: { id: string; keptAt: string; name?: string }): { run: KeptRun; ignored: string[] } {
  const picked = pickRunFiles(files);
  const traces = picked.verl.length > 0 ? verlTraces(picked.verl) : picked.traces && parseTracesFile(picked.traces);
  let rows: MetricsRow[];
  // From traces alone, a step's episodes are the rollouts the file holds of it.
  let counts: number[] = [];
  if (picked.metrics) rows = parseMetricsJsonl(picked.metrics.text, picked.metrics.name);
  else {
    try {
      const fromTraces = rowsFromTraces(traces!);
      rows = fromTraces.map(({ episodes: _, ...row }) => row);
      counts = fromTraces.map((r) => r.episodes);
    } catch (e) {
      throw new KeptRunError(`${picked.verl.length > 0 ? picked.verl.map((f) => f.name).join(', ') : picked.traces!.name}: ${(e as Error).message}`);
    }
  }
  const named = picked.metrics ?? picked.traces ?? { name: verlRunName(picked.verl), text: '' };
  const cfg = picked.config && parseConfigFile(picked.config.text, picked.config.name);
  const config = cfg?.config ?? null;
  const evalN = Number(flagValue(cfg?.command ?? null, '--eval-n'));
  const metrics: MetricPoint[] = rows.map((metrics, i) => ({ metrics, episodes: picked.metrics ? episodesOf(metrics, config) : counts[i] }));
  const heldOut: HeldOutReading[] = rows
    .filter((r) => Number.isFinite(r.evalAccuracy))
    .map((r) => ({ step: r.step, accuracy: r.evalAccuracy as number, n: Number.isInteger(r.evalN) ? (r.evalN as number) : Number.isInteger(evalN) && evalN > 0 ? evalN : null, interval: null }));
  const task = typeof config?.task === 'string' ? config.task : (traces?.[0]?.task ?? '');
  const run: KeptRun = {
    id: meta.id,
    name: checkRunName(meta.name ?? defaultCliName(cfg?.command ?? null, named.name)),
    keptAt: meta.keptAt,
    task,
    origin: {
      kind: 'cli',
      files: picked.verl.length > 0 ? picked.verl.map((f) => f.name) : [named.name, ...(picked.metrics && picked.traces ? [picked.traces.name] : []), ...(picked.config ? [picked.config.name] : [])],
      config,
      command: cfg?.command ?? null,
      startedAt: cfg?.startedAt ?? null,
    },
    counters: { policyVersion: null, grpoSteps: rows[rows.length - 1].step, sftSteps: 0 },
    metrics,
    heldOut,
    frontier: [],
    // Numbered as the curves number their steps (a source counting from 0 starts at 1).
    ...(traces ? { rollouts: shiftedRollouts(traces) } : {}),
  };
  return { run, ignored: picked.ignored };
}

/** The newest rollouts, numbered as the curves number their steps (the shift computed once). */
function shiftedRollouts(traces: readonly SteppedTrace[]): SteppedTrace[] {
  const shift = stepShift(traces);
  return traces.slice(-MAX_KEPT_ROLLOUTS).map((t) => (t.step === undefined ? t : { ...t, step: t.step + shift }));
}
