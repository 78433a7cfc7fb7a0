/**
 * A resumable run directory (sft, train):
 *
 *   model.safetensors config.json tokenizer.json selfcest.json   the latest weights (export format)
 *   optimizer.safetensors   AdamW moments
 *   state.json              step, run config, counters — written last, so it names a complete save
 *   metrics.jsonl           one line per logged step
 *
 * Every file is written under a temporary name and renamed into place. On load the
 * steps recorded in state.json, selfcest.json and the optimizer file must agree.
 */
import { existsSync } from 'node:fs';
import { appendFile, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { decodeSafetensors, encodeSafetensors } from '../core/io/safetensors';
import type { Policy } from '../core/policy';
import type { AdamW } from '../core/rl/optim';
import { loadPolicy, savePolicy } from './setup';

export interface RunState {
  kind: 'sft' | 'train';
  step: number;
  /** The run's configuration (everything but the step count must match on resume). */
  config: Record<string, unknown>;
  elapsedSec: number;
  tokensSeen: number;
  savedAt: string;
  /** Free-form counters a trainer keeps across resumes. */
  extra?: Record<string, unknown>;
}

async function writeAtomic(path: string, data: Uint8Array | string): Promise<void> {
  await writeFile(`${path}.tmp`, data);
  await rename(`${path}.tmp`, path);
}

export async function saveRun(dir: string, policy: Policy, optimizer: AdamW, state: RunState, preset: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const { step, tensors } = await optimizer.state();
  const opt = encodeSafetensors(
    [...tensors].map(([name, data]) => ({ name, shape: [data.length], data })),
    { step: String(step), runStep: String(state.step) },
  );
  await writeAtomic(join(dir, 'optimizer.safetensors'), opt);
  await savePolicy(dir, policy, { preset, step: state.step, training: { kind: state.kind, ...state.config } });
  await writeAtomic(join(dir, 'state.json'), JSON.stringify(state, null, 1) + '\n');
}

export interface LoadedRun {
  policy: Policy;
  state: RunState;
  optimizerStep: number;
  optimizerTensors: Map<string, Float32Array>;
}

/** The saved run in `dir`, or null when the directory holds none. */
export async function loadRun(dir: string): Promise<LoadedRun | null> {
  const statePath = join(dir, 'state.json');
  if (!existsSync(statePath)) return null;
  let state: RunState;
  try {
    state = JSON.parse(await readFile(statePath, 'utf8')) as RunState;
  } catch (e) {
    throw new Error(`${statePath} is not valid JSON (${(e as Error).message})`);
  }
  if (!Number.isInteger(state.step) || state.step < 0) throw new Error(`${statePath}: step must be a non-negative integer`);
  const { policy, meta } = await loadPolicy(dir);
  if (meta.step !== state.step) {
    throw new Error(`${dir}: weights are from step ${meta.step} but state.json says ${state.step} (interrupted save?)`);
  }
  const opt = decodeSafetensors(new Uint8Array(await readFile(join(dir, 'optimizer.safetensors'))));
  if (opt.metadata.runStep !== String(state.step)) {
    throw new Error(`${dir}: optimizer state is from step ${opt.metadata.runStep} but state.json says ${state.step}`);
  }
  const optimizerTensors = new Map([...opt.tensors].map(([k, t]) => [k, t.data]));
  return { policy, state, optimizerStep: Number(opt.metadata.step), optimizerTensors };
}

/** Refuse to resume with a different configuration (the step count may grow). */
export function checkResumeConfig(saved: Record<string, unknown>, current: Record<string, unknown>, ignore: string[]): void {
  for (const key of new Set([...Object.keys(saved), ...Object.keys(current)])) {
    if (ignore.includes(key)) continue;
    const a = JSON.stringify(saved[key]);
    const b = JSON.stringify(current[key]);
    if (a !== b) throw new Error(`cannot resume: ${key} was ${a} in the saved run, now ${b} (use a new --out)`);
  }
}

export async function appendJsonl(path: string, rows: readonly object[]): Promise<void> {
  if (rows.length === 0) return;
  await mkdir(dirname(path), { recursive: true });
  await appendFile(path, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
}

/** Drop lines logged after the last save (they will be produced again on resume). */
export async function truncateJsonl(path: string, maxStep: number): Promise<void> {
  if (!existsSync(path)) return;
  const kept = (await readFile(path, 'utf8'))
    .split('\n')
    .filter((l) => l.trim() !== '')
    .filter((l) => {
      try {
        return (JSON.parse(l) as { step?: number }).step! <= maxStep;
      } catch {
        return false;
      }
    });
  await writeAtomic(path, kept.length ? kept.join('\n') + '\n' : '');
}

export function formatDuration(sec: number): string {
  if (!Number.isFinite(sec) || sec < 0) return '?';
  const h = Math.floor(sec / 3600);
  const m = Math.floor((sec % 3600) / 60);
  const s = Math.floor(sec % 60);
  return h > 0 ? `${h}h${String(m).padStart(2, '0')}m` : `${m}m${String(s).padStart(2, '0')}s`;
}
