/**
 * Chooses this thread's tfjs backend: WebGPU, then wasm, then cpu. Used by the engine (trainer)
 * and by every rollout worker, each of which has a backend of its own.
 *
 * A backend counts only after a small matMul reads back the right numbers: a misconfigured
 * (software) WebGPU can initialise fine and still return zeros. A preference starts the search
 * at that backend; if it fails, the later ones are still tried, and the notes say why.
 */
import * as tf from '@tensorflow/tfjs';
import type { BackendReport } from './protocol';
import { initBackend } from './backend';

export type BackendName = BackendReport['backend'];
export type BackendPreference = 'auto' | BackendName;

export const BACKEND_ORDER: readonly BackendName[] = ['webgpu', 'wasm', 'cpu'];

export interface SelectOptions {
  /** Folder URL of the tfjs wasm binaries (needed in the browser, ignored by Node). */
  wasmPaths?: string;
  /** Readback check timeout; a lost WebGPU device can hang a readback. */
  checkTimeoutMs?: number;
}

type AdapterInfo = NonNullable<BackendReport['adapter']>;

// The WebGPU types tfjs pulls in predate adapter.info; these are the members read here.
interface GpuAdapterInfoLike {
  vendor?: string;
  architecture?: string;
  description?: string;
  device?: string;
}
interface GpuAdapterLike {
  info?: GpuAdapterInfoLike;
  requestAdapterInfo?: () => Promise<GpuAdapterInfoLike>;
}
interface GpuLike {
  requestAdapter(): Promise<GpuAdapterLike | null>;
}

function navigatorGpu(): GpuLike | undefined {
  const nav = (globalThis as { navigator?: { gpu?: GpuLike } }).navigator;
  return nav?.gpu;
}

async function adapterInfo(adapter: GpuAdapterLike): Promise<AdapterInfo> {
  const info = adapter.info ?? (adapter.requestAdapterInfo ? await adapter.requestAdapterInfo() : {});
  return { vendor: info.vendor ?? '', architecture: info.architecture ?? '', description: info.description || info.device || '' };
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** 2×3 · 3×2 on the active backend; a reason when the numbers are wrong. */
async function checkMatMul(timeoutMs: number): Promise<string | null> {
  const a = tf.tensor2d([1, 2, 3, 4, 5, 6], [2, 3]);
  const b = tf.tensor2d([7, 8, 9, 10, 11, 12], [3, 2]);
  const c = tf.matMul(a, b);
  try {
    const got = Array.from(await withTimeout(c.data(), timeoutMs, 'matMul readback'));
    const want = [58, 64, 139, 154];
    const ok = got.length === 4 && got.every((v, i) => Math.abs(v - want[i]) < 1e-3);
    return ok ? null : `matMul check read back [${got.join(', ')}], expected [${want.join(', ')}]`;
  } finally {
    tf.dispose([a, b, c]);
  }
}

async function tryBackend(name: BackendName, opts: SelectOptions): Promise<{ reason: string | null; adapter: AdapterInfo | null }> {
  let adapter: AdapterInfo | null = null;
  try {
    if (name === 'webgpu') {
      const gpu = navigatorGpu();
      if (!gpu) return { reason: 'navigator.gpu is missing', adapter: null };
      const found = await gpu.requestAdapter();
      if (!found) return { reason: 'no WebGPU adapter', adapter: null };
      adapter = await adapterInfo(found);
    }
    await initBackend(name, opts.wasmPaths === undefined ? {} : { wasmPaths: opts.wasmPaths });
    const reason = await checkMatMul(opts.checkTimeoutMs ?? 30_000);
    if (reason !== null && tf.findBackend(name)) tf.removeBackend(name);
    return { reason, adapter };
  } catch (e) {
    if (name !== 'cpu' && tf.findBackend(name)) tf.removeBackend(name);
    return { reason: e instanceof Error ? e.message : String(e), adapter: null };
  }
}

/** Selects, initialises and checks a backend; throws only when none works. */
export async function selectBackend(pref: BackendPreference, opts: SelectOptions = {}): Promise<BackendReport> {
  const start = pref === 'auto' ? 0 : BACKEND_ORDER.indexOf(pref);
  if (start < 0) throw new Error(`backend must be one of auto, ${BACKEND_ORDER.join(', ')} (got ${JSON.stringify(pref)})`);
  const notes: string[] = [];
  for (const name of BACKEND_ORDER.slice(start)) {
    const { reason, adapter } = await tryBackend(name, opts);
    if (reason === null) return { backend: name, adapter, notes };
    notes.push(`${name}: ${reason}`);
  }
  throw new Error(`no tfjs backend works here (${notes.join('; ')})`);
}

/**
 * After a lost WebGPU device: drop the backend (its tensors are gone anyway) and select wasm,
 * then cpu. The caller re-creates its tensors from a host copy.
 */
export async function fallBackAfterLoss(reason: string, opts: SelectOptions = {}): Promise<BackendReport> {
  const lost = tf.getBackend();
  if (lost === 'webgpu' && tf.findBackend('webgpu')) {
    try {
      tf.removeBackend('webgpu');
    } catch {
      // Disposing buffers of a lost device may throw; the backend is unusable either way.
    }
  }
  const report = await selectBackend('wasm', opts);
  return { ...report, notes: [`${lost}: device lost (${reason}), fell back to ${report.backend}`, ...report.notes] };
}

/**
 * Calls `onLost` once if the active backend's WebGPU device is lost. No-op on other backends.
 * Returns a function that stops watching.
 */
export function watchDeviceLoss(onLost: (reason: string) => void): () => void {
  if (tf.getBackend() !== 'webgpu') return () => {};
  const device = (tf.backend() as unknown as { device?: { lost?: Promise<{ message?: string; reason?: string }> } }).device;
  let active = true;
  device?.lost?.then((info) => {
    if (active) onLost([info.reason, info.message].filter(Boolean).join(': ') || 'unknown reason');
  });
  return () => {
    active = false;
  };
}
