/**
 * A resumable run directory (sft, train), crash-safe as a whole:
 *
 *   LATEST                the name of the committed save ("save-000040"); replacing it by a
 *                         rename is the one instant a new save becomes the run's state
 *   save-000040/          one complete save, never changed after it is committed:
 *     model.safetensors config.json tokenizer.json tokenizer_config.json selfcest.json
 *                         the weights (export format: `--checkpoint RUN` reads this save)
 *     optimizer.safetensors   AdamW moments and step
 *     state.json              step, run config, counters
 *     metrics.jsonl traces.jsonl   every row up to the save's step
 *   metrics.jsonl traces.jsonl    copies of the committed save's files, for people, git and
 *                         plots; never read back (`committedRows` reads the save's own)
 *   run.json              the command line and run config of the run's first start (a
 *                         document for people and git; never read back)
 *
 * A save is written into `save-N.tmp-<pid>/`, flushed, renamed to `save-N/`, and committed by
 * renaming `LATEST.tmp-<pid>` over LATEST. A kill at any instant leaves LATEST naming one
 * complete save (or no LATEST: no save yet), whatever was half written next to it. Opening a
 * directory with LATEST removes what is not the committed save (temporaries, uncommitted or older
 * saves) and re-links the views; opening one without LATEST removes nothing but temporaries whose
 * process is gone, and continues from its newest save that loads (RunDir.open). Directories written before this layout (files at the top level,
 * state.json written last) are still read, and converted by their first new save.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync } from 'node:fs';
import { access, copyFile, link, mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import { join } from 'node:path';
import { encodeCheckpoint } from '../core/io';
import { decodeOptimizerFile, encodeOptimizerFile } from '../core/io/optimizerFile';
import { isRecord, withImplied } from '../core/io/savedConfig';
import { type Policy, policyToCheckpoint } from '../core/policy';
import type { AdamW } from '../core/optim/adamw';
import { taskPartsOf } from '../core/runConfig';
import { MULTIHOP_BEFORE_NOTATION } from '../core/tasks/multihop';
import { UsageError } from './args';
import { loadPolicy } from './setup';

export interface RunState {
  /** sft and train: the toy model's runs; train-lm: GRPO with LoRA on a Hugging Face model (train-lm). */
  kind: 'sft' | 'train' | 'train-lm';
  step: number;
  /** The run's configuration (everything but the step count must match on resume). */
  config: Record<string, unknown>;
  elapsedSec: number;
  tokensSeen: number;
  savedAt: string;
}

export interface LoadedRun<W = Policy> {
  weights: W;
  state: RunState;
  optimizerStep: number;
  optimizerTensors: Map<string, Float32Array>;
}

/**
 * What a run saves of its model besides the optimizer and the state, and how it reads it back: the
 * toy model's checkpoint (policyWeights), or a real model's LoRA adapter (train-lm).
 */
export interface RunWeights<W> {
  /** The files of `w` in a save at `state`. */
  files(w: W, state: RunState): Promise<Iterable<readonly [string, Uint8Array]>>;
  /** The weights of the save in `dir` (its state.json already read); throws naming what is wrong. */
  load(dir: string): Promise<W>;
  /** Why a save with this state cannot be read by this command (another kind of weights), or null. */
  mismatch?(state: RunState): string | null;
}

/** A run directory written by another command or with other weights: not damaged, only not this run's (exit 2). */
export class RunMismatchError extends UsageError {}

/** Why a save of a toy run (`init`) or a Hugging Face run (`model`) is not the other's, or null. */
export function otherModelKind(state: RunState, wants: 'toy' | 'hf'): string | null {
  const { model } = state.config;
  if (wants === 'toy' && typeof model === 'string') return `it trains the Hugging Face model ${model} (--model), not a toy checkpoint`;
  if (wants === 'hf' && typeof model !== 'string') return 'it trains a toy checkpoint (--init), not a Hugging Face model';
  return null;
}

/** The toy model's weights as a checkpoint (`--checkpoint RUN` reads the committed save), recorded as `preset`. */
export function policyWeights(preset: string): RunWeights<Policy> {
  return {
    mismatch: (state) => otherModelKind(state, 'toy'),
    files: async (policy, state) =>
      encodeCheckpoint(await policyToCheckpoint(policy, { preset, step: state.step, training: { kind: state.kind, ...state.config } })),
    load: async (dir) => (await loadPolicy(dir)).policy,
  };
}

export const LATEST = 'LATEST';
export const RUN_JSON = 'run.json';
export const ROW_FILES = ['metrics.jsonl', 'traces.jsonl'] as const;
type RowFile = (typeof ROW_FILES)[number];
const LEGACY_FILES = ['model.safetensors', 'config.json', 'tokenizer.json', 'tokenizer_config.json', 'selfcest.json', 'optimizer.safetensors', 'state.json'];
const SAVE_NAME = /^save-(\d+)$/;
/** Temporaries this module writes: `<save, LATEST, run.json or a row file>.tmp-<pid>`, a stale lock moved aside `LOCK.stale-<pid>`. */
const OUR_TMP = /^(save-\d+\.tmp|LATEST\.tmp|LOCK\.(?:tmp|stale)|run\.json\.tmp|metrics\.jsonl\.tmp|traces\.jsonl\.tmp)-(\d+)$/;
/** The row files a kind of run keeps (sft logs no traces). */
const rowFilesOf = (kind: RunState['kind']): readonly RowFile[] => (kind === 'sft' ? ['metrics.jsonl'] : ROW_FILES);

export const saveName = (step: number) => `save-${String(step).padStart(6, '0')}`;

/**
 * Test hook: `SELFCEST_TEST_KILL_AT=S:P` SIGKILLs this process at point P of its S-th save
 * (1-based saves, 0-based points: before each file operation and after the last);
 * `SELFCEST_TEST_SAVE_POINTS=1` prints the points to stderr. Used by test/crash.test.ts.
 */
let savesThisProcess = 0;
let pointInSave = 0;
function savePoint(label: string): void {
  const here = `${savesThisProcess}:${pointInSave++}`;
  if (process.env.SELFCEST_TEST_SAVE_POINTS) process.stderr.write(`save-point ${here} ${label}\n`);
  if (process.env.SELFCEST_TEST_KILL_AT === here) {
    process.kill(process.pid, 'SIGKILL');
    // The signal is delivered before the next instruction in practice; make sure nothing runs on.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  }
}

/** Writes and flushes a file (a rename after this cannot expose a half-written one). */
async function writeDurable(path: string, data: Uint8Array | string): Promise<void> {
  await writeFile(path, data);
  syncPath(path);
}

function syncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * `--out` checked before any work: a non-empty path that is a directory (or can be made one)
 * and is writable. Throws a UsageError naming the flag.
 */
export async function checkOutDir(path: string, flag = '--out'): Promise<void> {
  if (path.trim() === '') throw new UsageError(`${flag} must name a directory (got an empty path)`);
  try {
    const s = await stat(path);
    if (!s.isDirectory()) throw new UsageError(`${flag} ${path} exists and is not a directory`);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new UsageError(`${flag} ${path}: ${(e as Error).message}`);
    try {
      await mkdir(path, { recursive: true });
    } catch (err) {
      throw new UsageError(`${flag} ${path} cannot be created: ${(err as Error).message}`);
    }
  }
  try {
    await access(path, constants.W_OK);
  } catch {
    throw new UsageError(`${flag} ${path} is not writable`);
  }
}

function parseState(text: string, file: string): RunState {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(`${file} is not valid JSON (${(e as Error).message})`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error(`${file}: expected a JSON object, got ${JSON.stringify(raw)}`);
  const s = raw as Record<string, unknown>;
  const need = (ok: boolean, what: string) => {
    if (!ok) throw new Error(`${file}: ${what}`);
  };
  need(s.kind === 'sft' || s.kind === 'train' || s.kind === 'train-lm', `kind must be "sft", "train" or "train-lm" (got ${JSON.stringify(s.kind)})`);
  need(Number.isSafeInteger(s.step) && (s.step as number) >= 0, `step must be a non-negative integer (got ${JSON.stringify(s.step)})`);
  need(typeof s.config === 'object' && s.config !== null && !Array.isArray(s.config), 'config must be an object (the run configuration)');
  for (const k of ['elapsedSec', 'tokensSeen'] as const) {
    need(typeof s[k] === 'number' && Number.isFinite(s[k]) && (s[k] as number) >= 0, `${k} must be a finite number ≥ 0 (got ${JSON.stringify(s[k])})`);
  }
  return raw as RunState;
}

/** Rows of a jsonl file whose `step` is at most `maxStep` (legacy directories appended before saving). */
function rowsUpTo(text: string, maxStep: number): string {
  const kept = text.split('\n').filter((l) => {
    if (l.trim() === '') return false;
    try {
      const step = (JSON.parse(l) as { step?: unknown }).step;
      return typeof step === 'number' && step <= maxStep;
    } catch {
      return false;
    }
  });
  return kept.length ? kept.join('\n') + '\n' : '';
}

/** The files of one save (a save directory, or the top level of a legacy run). */
async function loadSave<W>(dir: string, what: string, weights: RunWeights<W>, kind: RunState['kind'], runDir: string): Promise<LoadedRun<W>> {
  const statePath = join(dir, 'state.json');
  let text: string;
  try {
    text = await readFile(statePath, 'utf8');
  } catch (e) {
    throw new Error(`${what}: ${statePath} cannot be read (${(e as Error).message})`);
  }
  const state = parseState(text, statePath);
  // Another command's run, or other weights, before reading any (its files are not damaged).
  if (state.kind !== kind) throw new RunMismatchError(`${runDir} holds a ${state.kind} run, not a ${kind} run; use a new --out`);
  const other = weights.mismatch?.(state) ?? null;
  if (other !== null) throw new RunMismatchError(`cannot resume ${runDir}: ${other}; use a new --out`);
  // The toy model's readCheckpointDir also checks that selfcest.json and state.json name the same step.
  const loaded = await weights.load(dir);
  const optPath = join(dir, 'optimizer.safetensors');
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(await readFile(optPath));
  } catch (e) {
    throw new Error(`${optPath}: ${(e as Error).message}`);
  }
  const opt = decodeOptimizerFile(bytes, optPath);
  if (opt.metadata.runStep !== String(state.step)) {
    throw new Error(
      `${what}: ${optPath} is from step ${opt.metadata.runStep} but ${statePath} says ${state.step} (the optimizer and the state are from different saves)`,
    );
  }
  // Updates per run step: one for sft, mini-batches × epochs (at most 1024 × 16) for train.
  if (opt.step > state.step * 16_384) {
    throw new Error(
      `${optPath}: the optimizer step must be an integer in [0, ${state.step * 16_384}] for run step ${state.step} (got ${JSON.stringify(opt.metadata.step)})`,
    );
  }
  return { weights: loaded, state, optimizerStep: opt.step, optimizerTensors: opt.tensors };
}

/** The run directory of `sft` or `train`: what it holds, its recovery, and its saves. */
export class RunDir<W = Policy> {
  private constructor(
    readonly dir: string,
    private readonly weights: RunWeights<W>,
    /** The committed save, or null for a new run. */
    readonly saved: LoadedRun<W> | null,
    /** Where the committed rows are: a save directory, or legacy text already cut to the step. */
    private rows: { dir: string } | { legacy: Record<RowFile, string> } | null,
    private committedName: string | null,
    private readonly rowFiles: readonly RowFile[],
  ) {}

  /**
   * Recovers `dir` (see the file comment) and loads its committed save, if any. With LATEST the
   * state is clear, and what is not the committed save is removed. Without it (LATEST removed, a
   * partial copy, a kill between a first save and its commit) nothing is removed: the newest save
   * that loads is committed again by writing LATEST, and said so; none loading is refused.
   */
  static async open<W>(dir: string, kind: RunState['kind'], weights: RunWeights<W>): Promise<RunDir<W>> {
    await checkOutDir(dir);
    await takeLock(dir);
    const entries = await readdir(dir);
    const latestPath = join(dir, LATEST);
    const recoverHint = `to start over, remove ${dir} or use a new --out`;
    if (entries.includes(LATEST)) {
      if (!(await stat(latestPath)).isFile())
        throw new UsageError(`${latestPath} is not a file: LATEST must hold the name of the committed save (e.g. save-000040); move it away`);
      const name = (await readFile(latestPath, 'utf8')).trim();
      if (!SAVE_NAME.test(name) || !entries.includes(name)) {
        throw new Error(`${latestPath} names ${JSON.stringify(name)}, which is not a save in ${dir}; ${recoverHint}`);
      }
      let saved: LoadedRun<W>;
      try {
        saved = await loadCommitted(dir, name, kind, weights);
      } catch (e) {
        if (e instanceof RunMismatchError) throw e;
        throw new Error(`${(e as Error).message}; the committed save ${join(dir, name)} is damaged; ${recoverHint}`);
      }
      // Everything but the committed save and its views is left over from an interrupted save; the
      // old layout's files only while its state.json (removed last) says a conversion was cut short,
      // so a file a user put at the top level stays.
      const legacy = entries.includes('state.json');
      for (const e of entries) {
        if (e === LATEST || e === name || e === RUN_JSON || e === LOCK || (rowFilesOf(kind) as readonly string[]).includes(e)) continue;
        if (SAVE_NAME.test(e) || (legacy && LEGACY_FILES.includes(e)) || deadTemporary(e)) await rm(join(dir, e), { recursive: true, force: true });
      }
      const run = new RunDir(dir, weights, saved, { dir: join(dir, name) }, name, rowFilesOf(kind));
      await run.linkViews();
      return run;
    }
    // No LATEST: only temporaries whose writer is gone are removed.
    for (const e of entries) if (deadTemporary(e)) await rm(join(dir, e), { recursive: true, force: true });
    const saves = entries.filter((e) => SAVE_NAME.test(e)).sort((a, b) => b.localeCompare(a));
    if (saves.length > 0) return RunDir.adopt(dir, saves, kind, weights);
    if (entries.includes('state.json')) {
      // A run written before this layout: its top level is the save, rows past it are dropped.
      const saved = await loadSave(dir, `cannot resume ${dir}`, weights, kind, dir);
      const legacy = {} as Record<RowFile, string>;
      for (const f of rowFilesOf(kind)) legacy[f] = existsSync(join(dir, f)) ? rowsUpTo(await readFile(join(dir, f), 'utf8'), saved.state.step) : '';
      return new RunDir(dir, weights, saved, { legacy }, null, rowFilesOf(kind));
    }
    const stray = entries.filter((e) => (ROW_FILES as readonly string[]).includes(e) || LEGACY_FILES.includes(e));
    if (stray.length > 0) {
      throw new Error(`${dir} holds ${stray.join(', ')} but no committed save (${LATEST}); a new run would mix with them: move them away or use a new --out`);
    }
    return new RunDir(dir, weights, null, null, null, rowFilesOf(kind));
  }

  /** A directory without LATEST but with saves: the newest that loads becomes the committed one again; nothing is removed. */
  private static async adopt<W>(dir: string, saves: readonly string[], kind: RunState['kind'], weights: RunWeights<W>): Promise<RunDir<W>> {
    const refused: string[] = [];
    for (const name of saves) {
      let saved: LoadedRun<W>;
      try {
        saved = await loadCommitted(dir, name, kind, weights);
      } catch (e) {
        if (e instanceof RunMismatchError) throw e;
        refused.push(`${name}: ${(e as Error).message}`);
        continue;
      }
      const tmp = join(dir, `${LATEST}.tmp-${process.pid}`);
      await writeDurable(tmp, name + '\n');
      await rename(tmp, join(dir, LATEST));
      syncPath(dir);
      console.warn(
        `${dir} had no ${LATEST} (the name of its committed save): continuing from ${name}, its newest save that loads, which ${LATEST} now names; nothing was removed${saves.length > 1 ? ` (the other saves, ${saves.filter((n) => n !== name).join(', ')}, are kept)` : ''}`,
      );
      const run = new RunDir(dir, weights, saved, { dir: join(dir, name) }, name, rowFilesOf(kind));
      await run.linkViews();
      return run;
    }
    throw new UsageError(
      `${dir} has no ${LATEST} (the name of its committed save), and none of its saves can be resumed:\n  ${refused.join('\n  ')}\n` +
        `nothing was removed; restore LATEST (echo save-NNNNNN > ${join(dir, LATEST)}), or use a new --out`,
    );
  }

  /**
   * Commits a complete save at `state.step`: weights, optimizer, state, and the rows so far
   * plus `newRows` (per row file). Validation (e.g. non-finite weights) fails before anything
   * is committed, leaving the previous save in place.
   */
  async save(weights: W, optimizer: AdamW, state: RunState, newRows: Partial<Record<RowFile, readonly object[]>>): Promise<void> {
    savesThisProcess++;
    pointInSave = 0;
    const name = saveName(state.step);
    const tmp = join(this.dir, `${name}.tmp-${process.pid}`);
    const files = await this.weights.files(weights, state);
    const optBytes = encodeOptimizerFile(await optimizer.state(), { runStep: String(state.step) });
    if (name === this.committedName) throw new Error(`cannot save ${this.dir} at step ${state.step}: that step is already the committed save`);
    savePoint('remove stale temporary');
    await rm(tmp, { recursive: true, force: true });
    savePoint('mkdir');
    await mkdir(tmp);
    try {
      for (const [n, bytes] of files) {
        savePoint(`write ${n}`);
        await writeDurable(join(tmp, n), bytes);
      }
      savePoint('write optimizer.safetensors');
      await writeDurable(join(tmp, 'optimizer.safetensors'), optBytes);
      savePoint('write state.json');
      await writeDurable(join(tmp, 'state.json'), JSON.stringify(state, null, 1) + '\n');
      for (const f of this.rowFiles) {
        savePoint(`write ${f}`);
        const added = (newRows[f] ?? []).map((r) => JSON.stringify(r) + '\n').join('');
        const target = join(tmp, f);
        if (this.rows && 'dir' in this.rows) {
          await copyFile(join(this.rows.dir, f), target);
          if (added) await writeFile(target, added, { flag: 'a' });
          syncPath(target);
        } else {
          await writeDurable(target, (this.rows ? this.rows.legacy[f] : '') + added);
        }
      }
      syncPath(tmp);
      savePoint('remove uncommitted save of this step');
      await rm(join(this.dir, name), { recursive: true, force: true });
      savePoint('rename save');
      await rename(tmp, join(this.dir, name));
      syncPath(this.dir);
    } catch (e) {
      await rm(tmp, { recursive: true, force: true });
      throw new Error(`cannot save ${this.dir} at step ${state.step}: ${(e as Error).message} (${this.keptNote()})`);
    }
    const latestTmp = join(this.dir, `${LATEST}.tmp-${process.pid}`);
    try {
      savePoint('write LATEST');
      await writeDurable(latestTmp, name + '\n');
      savePoint('commit LATEST');
      await rename(latestTmp, join(this.dir, LATEST));
      syncPath(this.dir);
    } catch (e) {
      throw new Error(`cannot commit the save of step ${state.step} in ${this.dir}: ${(e as Error).message} (${this.keptNote()})`);
    }
    const previous = this.committedName;
    this.committedName = name;
    this.rows = { dir: join(this.dir, name) };
    await this.linkViews(savePoint);
    savePoint('remove previous save');
    if (previous && previous !== name) await rm(join(this.dir, previous), { recursive: true, force: true });
    // The old layout's files go once the first new save is committed; state.json, its mark, goes last.
    const legacy = existsSync(join(this.dir, 'state.json'));
    for (const f of LEGACY_FILES) {
      if (!legacy || !existsSync(join(this.dir, f))) continue;
      savePoint(`remove legacy ${f}`);
      await rm(join(this.dir, f), { force: true });
    }
    savePoint('done');
  }

  /** What a failed save leaves: the committed save, or nothing committed yet. */
  private keptNote(): string {
    return this.committedName
      ? `the previous save, ${this.committedName}, is kept`
      : this.saved
        ? 'the run as it was is kept'
        : 'nothing was committed: this run has no save yet';
  }

  /**
   * Loads the committed save's optimizer state into `optimizer`. A state no optimizer step could
   * have written (AdamW.load) is bad input: refused naming the file and the tensor (exit 2), before
   * any update, so nothing is committed from it.
   */
  restoreOptimizer(optimizer: AdamW): void {
    if (!this.saved) return;
    const file = this.committedName ? join(this.dir, this.committedName, 'optimizer.safetensors') : join(this.dir, 'optimizer.safetensors');
    try {
      optimizer.load(this.saved.optimizerStep, this.saved.optimizerTensors);
    } catch (e) {
      throw new UsageError(`${file}: ${(e as Error).message}; the run cannot resume from this save (remove ${this.dir} or use a new --out to start over)`);
    }
  }

  /** Writes run.json (command line, config) for a new run; a resumed run keeps the first one. */
  async describe(argv: readonly string[], config: Record<string, unknown>): Promise<void> {
    if (this.saved) return;
    const tmp = join(this.dir, `${RUN_JSON}.tmp-${process.pid}`);
    await writeDurable(tmp, JSON.stringify({ command: ['npm', 'run', 'cli', '--', ...argv], config, startedAt: new Date().toISOString() }, null, 1) + '\n');
    await rename(tmp, join(this.dir, RUN_JSON));
  }

  /** Top-level metrics.jsonl / traces.jsonl: copies of the committed save's files. */
  private async linkViews(point: (label: string) => void = () => undefined): Promise<void> {
    if (!this.committedName) return;
    for (const f of this.rowFiles) {
      const tmp = join(this.dir, `${f}.tmp-${process.pid}`);
      point(`copy ${f} view`);
      await copyFile(join(this.dir, this.committedName, f), tmp);
      point(`rename ${f} view`);
      await rename(tmp, join(this.dir, f));
    }
  }
}

/** A save named by LATEST (or about to be): loads, is of this kind and step, and has its row files. */
async function loadCommitted<W>(dir: string, name: string, kind: RunState['kind'], weights: RunWeights<W>): Promise<LoadedRun<W>> {
  const saved = await loadSave(join(dir, name), `cannot resume ${dir}`, weights, kind, dir);
  if (name !== saveName(saved.state.step)) throw new Error(`${join(dir, name)} holds step ${saved.state.step}`);
  const missing = rowFilesOf(kind).filter((f) => !existsSync(join(dir, name, f)));
  if (missing.length > 0) throw new Error(`${join(dir, name)} has no ${missing.join(', ')}`);
  for (const f of rowFilesOf(kind)) checkRows(join(dir, name, f), await readFile(join(dir, name, f), 'utf8'), f, saved.state.step);
  return saved;
}

/**
 * A save's row file against its step: metrics.jsonl one JSON object per step 1..step, in order;
 * traces.jsonl JSON objects (traces) of steps ≤ step, in order; no blank or cut-off line. What
 * fails is named by file and line.
 */
export function checkRows(path: string, text: string, file: RowFile, step: number): void {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  else if (lines.length > 0) throw new Error(`${path}: line ${lines.length} has no line end (a cut-off write)`);
  let last = 0;
  lines.forEach((l, i) => {
    const at = `${path}: line ${i + 1}`;
    let row: unknown;
    try {
      row = JSON.parse(l);
    } catch {
      throw new Error(`${at} is not JSON${l.trim() === '' ? ' (blank)' : ''}`);
    }
    if (!isRecord(row)) throw new Error(`${at} is not a JSON object`);
    const s = row.step;
    if (!Number.isSafeInteger(s) || (s as number) < 1 || (s as number) > step)
      throw new Error(`${at}: step must be an integer in [1, ${step}] (the save's step; got ${JSON.stringify(s)})`);
    if (file === 'metrics.jsonl' && s !== last + 1) throw new Error(`${at}: step ${s} where ${last + 1} comes next (one row per step)`);
    if (file === 'traces.jsonl' && (s as number) < last) throw new Error(`${at}: step ${s} after step ${last} (rows are in step order)`);
    if (file === 'traces.jsonl' && typeof row.schema !== 'string') throw new Error(`${at} is not a trace (no schema)`);
    last = s as number;
  });
  if (file === 'metrics.jsonl' && last !== step) throw new Error(`${path} ends at step ${last}, the save is at step ${step}: rows are missing`);
}

/** A temporary this module writes (`<name>.tmp-<pid>`, `LOCK.stale-<pid>`) whose process is gone: no one can still be writing it. */
function deadTemporary(entry: string): boolean {
  const m = OUR_TMP.exec(entry);
  if (!m) return false;
  const pid = Number(m[2]);
  return pid !== process.pid && !processAlive(pid);
}

export const LOCK = 'LOCK';

/**
 * One process per run directory: LOCK holds the owner's pid and is created exclusively (a hard
 * link of a file already holding the pid, which fails when LOCK exists), so of two processes
 * opening the directory at once exactly one gets it. A lock whose process is
 * gone (a crash, a kill) is moved aside under a name of this process's own (only one taker can
 * move it) and the exclusive create tried again; a live one is refused.
 */
async function takeLock(dir: string): Promise<void> {
  const path = join(dir, LOCK);
  for (let attempt = 0; attempt < 5; attempt++) {
    // The pid is written first and the file linked into place: a LOCK is never seen empty (a
    // half-written one read as stale let two processes in), and the link fails if LOCK exists.
    const tmp = join(dir, `${LOCK}.tmp-${process.pid}`);
    await writeFile(tmp, `${process.pid}\n`);
    try {
      await link(tmp, path);
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw new UsageError(`${path} cannot be created: ${(e as Error).message}`);
    } finally {
      await rm(tmp, { force: true });
    }
    const owner = await lockOwner(path);
    if (owner === process.pid) return;
    if (owner !== null && processAlive(owner))
      throw new UsageError(`${dir} is in use by process ${owner} (${path}); wait for it or stop it, or use another --out`);
    // Stale (its process is gone) or unreadable: move it aside; of several takers one succeeds.
    const aside = join(dir, `${LOCK}.stale-${process.pid}`);
    try {
      await rename(path, aside);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // another taker moved it first
      throw e;
    }
    const moved = await lockOwner(aside);
    if (moved !== owner && moved !== null && processAlive(moved)) {
      // Between the read and the move the lock was taken afresh: that process keeps the directory.
      await rename(aside, path).catch(() => undefined);
      throw new UsageError(`${dir} is in use by process ${moved} (${path}); wait for it or stop it, or use another --out`);
    }
    await rm(aside, { force: true });
  }
  throw new UsageError(`${path}: could not take the lock after 5 tries (other processes keep taking it); use another --out`);
}

/** The pid a lock file holds, or null when it holds none. */
async function lockOwner(path: string): Promise<number | null> {
  try {
    const pid = Number((await readFile(path, 'utf8')).trim());
    return Number.isSafeInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The path of a run's committed rows (`metrics.jsonl`, `traces.jsonl`): the committed save's
 * file in a run directory, else the file at the top (a directory of the older layout, or rows
 * written by other tools).
 */
export function committedRows(dir: string, file: RowFile): string {
  try {
    const name = readFileSync(join(dir, LATEST), 'utf8').trim();
    if (SAVE_NAME.test(name) && existsSync(join(dir, name, file))) return join(dir, name, file);
  } catch {
    // no LATEST: not a run directory of this layout
  }
  return join(dir, file);
}

/** Fields older runs recorded that no longer exist (they had no effect: RewardConfig.cloneFormatPenalty was never read). */
const RETIRED: readonly (readonly [string, string])[] = [['reward', 'cloneFormatPenalty']];

/**
 * Fields whose meaning changed: a run that recorded them trained under other rules, and a
 * resume under today's would silently mix the two. The message says what to do instead.
 */
const CHANGED: readonly (readonly [string, string, string])[] = [
  [
    'advantage',
    'cloneFormatPenalty',
    'the run was trained with the clone credit of before the reference fix (r_clone = R − 0.05 for an answerless clone, protocol gating); resume it at commit 25f3c14 (docs/TRAINING.md) or start a new run with a new --out',
  ],
];

function withoutRetired(config: Record<string, unknown>): Record<string, unknown> {
  const out = { ...config };
  for (const [parent, field] of RETIRED) {
    const inner = out[parent];
    if (typeof inner === 'object' && inner !== null && field in inner) {
      const { [field]: _, ...rest } = inner as Record<string, unknown>;
      out[parent] = rest;
    }
  }
  return out;
}

/** JSON with object keys in sorted order: a field added to a config (or implied for an old one) compares wherever it sits. */
const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    isRecord(x)
      ? Object.fromEntries(
          Object.keys(x)
            .sort()
            .map((k) => [k, x[k]]),
        )
      : x,
  );

/**
 * Refuse to resume with a different configuration (the step count may grow). A key that a
 * saved run does not record, at any depth (it predates the field), counts as the value in
 * `implied`; retired keys are ignored; keys whose meaning changed refuse with what to do.
 */
export function checkResumeConfig(
  saved: Record<string, unknown>,
  current: Record<string, unknown>,
  ignore: string[],
  implied: Record<string, unknown> = {},
): void {
  for (const [parent, field, why] of CHANGED) {
    const inner = saved[parent];
    if (isRecord(inner) && field in inner) throw new Error(`cannot resume: ${why}`);
  }
  const s = withImplied(withImplied(withoutRetired(saved), implied), impliedTaskOptions(saved));
  for (const key of new Set([...Object.keys(s), ...Object.keys(current)])) {
    if (ignore.includes(key)) continue;
    if (canonical(s[key]) !== canonical(current[key]))
      throw new Error(`cannot resume: ${key} was ${JSON.stringify(s[key])} in the saved run, now ${JSON.stringify(current[key])} (use a new --out)`);
  }
}

/**
 * Task options a saved run predates: multihop runs from before the `names` and `filler` options
 * were taught the two-letter notation without filler, so they resume only as `names: 2` (the
 * mismatch message then names it) and never silently in today's default notation.
 */
function impliedTaskOptions(saved: Record<string, unknown>): Record<string, unknown> {
  if (typeof saved.task !== 'string') return {};
  const names = taskPartsOf(saved.task, {}).map((p) => p.taskName);
  if (!names.includes('multihop')) return {};
  return { taskOptions: names.length === 1 ? MULTIHOP_BEFORE_NOTATION : { multihop: MULTIHOP_BEFORE_NOTATION } };
}

/** A session whose every step was skipped as non-finite did nothing: its error, or null. */
export function allSkippedError(applied: number, skipped: number): string | null {
  if (skipped === 0 || applied > 0) return null;
  return `every step of this session (${skipped}) was skipped: the loss or the gradient was not finite (see the step lines); the weights did not change`;
}

export function formatDuration(sec: number): string {
  if (!Number.isFinite(sec) || sec < 0) return '?';
  const h = Math.floor(sec / 3600);
  const m = Math.floor((sec % 3600) / 60);
  const s = Math.floor(sec % 60);
  return h > 0 ? `${h}h${String(m).padStart(2, '0')}m` : `${m}m${String(s).padStart(2, '0')}s`;
}
