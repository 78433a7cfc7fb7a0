/**
 * Chooses this thread's tfjs backend: WebGPU, then wasm, then cpu. Used by the engine (trainer)
 * and by every rollout worker, each of which has a backend of its own.
 *
 * A backend counts only after a small matMul reads back the right numbers: a misconfigured
 * (software) WebGPU can initialise fine and still return zeros. A preference starts the search
 * at that backend; if it fails, the later ones are still tried, and the notes say why.
 * 'auto' passes over a software WebGPU adapter (softwareAdapter.ts) and says so in `reason`.
 */
import * as tf from '@tensorflow/tfjs';
import type { BackendReport } from './engine/messages';
import { type BackendPreference, initBackend } from './backend';
import { type AdapterFacts, webgpuPassedOver } from './softwareAdapter';
import { fastBatchMatMulActive } from './wasmKernels/batchMatMul';

export type BackendName = BackendReport['backend'];
export type { BackendPreference };

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
  isFallbackAdapter?: boolean;
}
interface GpuAdapterLike {
  info?: GpuAdapterInfoLike;
  requestAdapterInfo?: () => Promise<GpuAdapterInfoLike>;
  /** Deprecated in favour of info.isFallbackAdapter; older Chromium has only this one. */
  isFallbackAdapter?: boolean;
}
interface GpuLike {
  requestAdapter(): Promise<GpuAdapterLike | null>;
}

function navigatorGpu(): GpuLike | undefined {
  const nav = (globalThis as { navigator?: { gpu?: GpuLike } }).navigator;
  return nav?.gpu;
}

/** The adapter's facts, or why there is none. GPUAdapterInfo's members are getters: read them one by one. */
async function findAdapter(): Promise<AdapterFacts | string> {
  try {
    const gpu = navigatorGpu();
    if (!gpu) return 'navigator.gpu is missing';
    const adapter = await gpu.requestAdapter();
    if (!adapter) return 'no WebGPU adapter';
    const info = adapter.info ?? (adapter.requestAdapterInfo ? await adapter.requestAdapterInfo() : {});
    const facts: AdapterFacts = {};
    for (const key of ['vendor', 'architecture', 'device', 'description'] as const) {
      const value = info[key];
      if (typeof value === 'string') facts[key] = value;
    }
    const fallback = adapter.isFallbackAdapter ?? info.isFallbackAdapter;
    if (typeof fallback === 'boolean') facts.isFallbackAdapter = fallback;
    return facts;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

function adapterInfo(facts: AdapterFacts): AdapterInfo {
  return { vendor: facts.vendor ?? '', architecture: facts.architecture ?? '', description: facts.description || facts.device || '' };
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

/** Initialises and checks one backend; the reason it cannot be used, or null. */
async function tryBackend(name: BackendName, opts: SelectOptions): Promise<string | null> {
  try {
    await initBackend(name, opts.wasmPaths === undefined ? {} : { wasmPaths: opts.wasmPaths });
    const reason = await checkMatMul(opts.checkTimeoutMs ?? 30_000);
    if (reason !== null && tf.findBackend(name)) tf.removeBackend(name);
    return reason;
  } catch (e) {
    if (name !== 'cpu' && tf.findBackend(name)) tf.removeBackend(name);
    return e instanceof Error ? e.message : String(e);
  }
}

/** The note a wasm backend carries when the project's matMul kernel could not be installed. */
export const WASM_KERNEL_MISSING =
  "wasm: the project's SIMD matMul kernel is not installed here (no WebAssembly SIMD, or the backend's memory is out of reach): tfjs's own kernels, several times slower";

/** Selects, initialises and checks a backend; throws only when none works. */
export async function selectBackend(pref: BackendPreference, opts: SelectOptions = {}): Promise<BackendReport> {
  const start = pref === 'auto' ? 0 : BACKEND_ORDER.indexOf(pref);
  if (start < 0) throw new Error(`backend must be one of auto, ${BACKEND_ORDER.join(', ')} (got ${JSON.stringify(pref)})`);
  const notes: string[] = [];
  let passedOver: string | null = null;
  for (const name of BACKEND_ORDER.slice(start)) {
    let adapter: AdapterInfo | null = null;
    if (name === 'webgpu') {
      const found = await findAdapter();
      if (typeof found === 'string') {
        notes.push(`webgpu: ${found}`);
        continue;
      }
      passedOver = webgpuPassedOver(pref, found);
      if (passedOver !== null) continue; // a deliberate choice, not a failure: `reason`, not a note
      adapter = adapterInfo(found);
    }
    const reason = await tryBackend(name, opts);
    if (reason === null) {
      if (name === 'wasm' && !fastBatchMatMulActive()) notes.push(WASM_KERNEL_MISSING);
      return { backend: name, adapter, notes, reason: passedOver };
    }
    notes.push(`${name}: ${reason}`);
  }
  throw new Error(`no tfjs backend works here (${[...(passedOver === null ? [] : [`webgpu: ${passedOver}`]), ...notes].join('; ')})`);
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
