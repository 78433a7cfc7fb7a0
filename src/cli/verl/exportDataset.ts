/**
 * A task's problems as verl's train and test files (`train.parquet`, `test.parquet`).
 *
 * Train problems are drawn from the playground's train split (`train-<seed>-<i>`), test problems
 * are the held-out set the playground's own evaluation uses (`heldOutProblems`: the final set by
 * default, or the monitored one), so a model trained in verl is scored on problems disjoint from
 * its training set and comparable with `eval`'s numbers for the same seed.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { heldOutProblems } from '../../core/eval/evaluate';
import { EVAL_SPLITS, type EvalSplit, drawProblem } from '../../core/eval/splits';
import { Rng, checkSeed } from '../../core/rng';
import type { Problem, TaskEntry } from '../../core/tasks';
import { defaultDataSource, verlRows, verlSchema } from '../../core/verl/dataset';
import { encodeParquet, writeFilesAtomically } from './parquet';

/** The most problems one file takes (the rows are built in memory). */
export const MAX_VERL_ROWS = 1_000_000;

export interface VerlExportOptions {
  entry: TaskEntry;
  /** Problems in train.parquet and test.parquet, each in [1, MAX_VERL_ROWS]. */
  train: number;
  test: number;
  seed: number;
  /** The held-out set test.parquet holds (default 'final'). */
  testSplit?: EvalSplit;
  /** Default `selfcest_<task>`. */
  dataSource?: string;
  outDir: string;
}

export interface VerlExportFile {
  path: string;
  rows: number;
}

export interface VerlExportResult {
  train: VerlExportFile;
  test: VerlExportFile;
  dataSource: string;
  testSplit: EvalSplit;
}

/** `n` problems of the train split for a seed, ids `train-<seed>-<i>` (the first n of a larger set are the same). */
export function verlTrainProblems(entry: TaskEntry, n: number, seed: number): Problem[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, (_, i) => drawProblem(entry.task, rng, entry.opts, `train-${seed}-${i}`, 'train'));
}

function checkOptions(o: VerlExportOptions): void {
  for (const field of ['train', 'test'] as const) {
    const v = o[field];
    if (!Number.isInteger(v) || v < 1 || v > MAX_VERL_ROWS) throw new Error(`export-verl: ${field} must be an integer in [1, ${MAX_VERL_ROWS}] (got ${v})`);
  }
  const seedProblem = checkSeed(o.seed, 'seed');
  if (seedProblem) throw new Error(`export-verl: ${seedProblem}`);
  if (o.testSplit !== undefined && !EVAL_SPLITS.includes(o.testSplit)) {
    throw new Error(`export-verl: testSplit must be one of ${EVAL_SPLITS.join(', ')} (got ${JSON.stringify(o.testSplit)})`);
  }
  if (o.dataSource !== undefined && (typeof o.dataSource !== 'string' || o.dataSource.trim() === '')) {
    throw new Error(`export-verl: dataSource must be a non-empty string (got ${JSON.stringify(o.dataSource)})`);
  }
  if (typeof o.outDir !== 'string' || o.outDir === '') throw new Error('export-verl: outDir must be a directory path');
}

/**
 * Writes `<outDir>/train.parquet` and `<outDir>/test.parquet`. Every option is checked and both
 * files are encoded before anything touches the disk; they are then renamed into place together.
 */
export async function exportVerlDataset(o: VerlExportOptions): Promise<VerlExportResult> {
  checkOptions(o);
  const testSplit = o.testSplit ?? 'final';
  const task = o.entry.task.name;
  const dataSource = o.dataSource ?? defaultDataSource(task);
  const columns = verlSchema(task);
  // Provenance for whoever opens the file: enough to regenerate the same problems here.
  const about = (split: string, n: number) => [
    {
      key: 'selfcest',
      value: JSON.stringify({ format: 'selfcest-verl-dataset', version: 1, task, options: o.entry.opts, seed: o.seed, split, problems: n, dataSource }),
    },
  ];
  const trainRows = verlRows(o.entry, verlTrainProblems(o.entry, o.train, o.seed), 'train', dataSource);
  const testRows = verlRows(o.entry, heldOutProblems(o.entry.task, o.entry.opts, o.test, o.seed, testSplit), 'test', dataSource);
  const train = { path: join(o.outDir, 'train.parquet'), bytes: encodeParquet(columns, trainRows, about('train', o.train)) };
  const test = { path: join(o.outDir, 'test.parquet'), bytes: encodeParquet(columns, testRows, about(testSplit, o.test)) };
  await mkdir(o.outDir, { recursive: true });
  await writeFilesAtomically([train, test]);
  return { train: { path: train.path, rows: trainRows.length }, test: { path: test.path, rows: testRows.length }, dataSource, testSplit };
}
