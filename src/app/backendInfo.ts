/**
 * Chooses the tfjs backend for the page: WebGPU, then wasm, then cpu.
 *
 * A backend counts only after a small matMul reads back the right numbers: a misconfigured
 * (software) WebGPU can initialise fine and still return zeros. `?backend=wasm|webgpu|cpu`
 * starts the search at that backend; if it fails, the later ones are still tried.
 */
import * as tf from '@tensorflow/tfjs';

export type BackendName = 'webgpu' | 'wasm' | 'cpu';

export const BACKEND_ORDER: readonly BackendName[] = ['webgpu', 'wasm', 'cpu'];

export interface AdapterInfo {
  vendor: string;
  architecture: string;
  description: string;
}

export interface BackendInfo {
  backend: BackendName;
  /** The WebGPU adapter, when the backend is webgpu. */
  adapter: AdapterInfo | null;
  /** Why earlier backends were passed over, or a bad ?backend value; empty when all went well. */
  notes: string[];
  /** Wall time of the whole selection, including the check. */
  initMs: number;
}

/** Served by the tfjs-wasm plugin in vite.config.ts (dev server and build). */
export const WASM_BINARIES_URL = `${import.meta.env.BASE_URL}tfjs-wasm/`;

/** WebGPU readback can hang when the device is lost; give up on it after this long. */
const CHECK_TIMEOUT_MS = 30_000;

// The WebGPU types that tfjs-core pulls in (@webgpu/types 0.1.38) predate adapter.info;
// these are the few members read here.
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
  return (navigator as Navigator & { gpu?: GpuLike }).gpu;
}

function isBackendName(value: string): value is BackendName {
  return (BACKEND_ORDER as readonly string[]).includes(value);
}

/** Reads `?backend=`; an unknown value is reported, not fatal. */
export function parseBackendQuery(search: string): { forced: BackendName | null; note: string | null } {
  const value = new URLSearchParams(search).get('backend');
  if (value === null || value === '') return { forced: null, note: null };
  if (isBackendName(value)) return { forced: value, note: null };
  return {
    forced: null,
    note: `ignored ?backend=${value}: allowed values are ${BACKEND_ORDER.join(', ')}`,
  };
}

async function readAdapterInfo(adapter: GpuAdapterLike): Promise<AdapterInfo> {
  // adapter.info is current; requestAdapterInfo() is what older Chromium versions offer.
  const info = adapter.info ?? (adapter.requestAdapterInfo ? await adapter.requestAdapterInfo() : {});
  return {
    vendor: info.vendor ?? '',
    architecture: info.architecture ?? '',
    description: info.description || info.device || '',
  };
}

let wasmConfigured = false;

/** Registers and configures one backend; returns why it cannot be used, or null. */
async function prepare(name: BackendName): Promise<{ reason: string | null; adapter: AdapterInfo | null }> {
  if (name === 'webgpu') {
    const gpu = navigatorGpu();
    if (!gpu) return { reason: 'navigator.gpu is missing', adapter: null };
    const adapter = await gpu.requestAdapter();
    if (!adapter) return { reason: 'no WebGPU adapter', adapter: null };
    await import('@tensorflow/tfjs-backend-webgpu');
    return { reason: null, adapter: await readAdapterInfo(adapter) };
  }
  if (name === 'wasm') {
    const wasm = await import('@tensorflow/tfjs-backend-wasm');
    if (!wasmConfigured) {
      // The threaded binary breaks in a minified build, so stay single-threaded.
      tf.env().set('WASM_HAS_MULTITHREAD_SUPPORT', false);
      wasm.setWasmPaths(WASM_BINARIES_URL);
      wasmConfigured = true;
    }
  }
  return { reason: null, adapter: null };
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Runs a 2×3 · 3×2 matMul on the active backend; returns a reason if the numbers are wrong. */
async function checkMatMul(): Promise<string | null> {
  const a = tf.tensor2d([1, 2, 3, 4, 5, 6], [2, 3]);
  const b = tf.tensor2d([7, 8, 9, 10, 11, 12], [3, 2]);
  const c = tf.matMul(a, b);
  try {
    const got = Array.from(await withTimeout(c.data(), CHECK_TIMEOUT_MS, 'matMul readback'));
    const want = [58, 64, 139, 154];
    const ok = got.length === want.length && got.every((v, i) => Math.abs(v - (want[i] ?? NaN)) < 1e-3);
    return ok ? null : `matMul check read back [${got.join(', ')}], expected [${want.join(', ')}]`;
  } finally {
    tf.dispose([a, b, c]);
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function tryBackend(name: BackendName): Promise<{ reason: string | null; adapter: AdapterInfo | null }> {
  try {
    const prepared = await prepare(name);
    if (prepared.reason !== null) return prepared;
    if (!(await tf.setBackend(name))) return { reason: 'tfjs could not initialise it', adapter: null };
    await tf.ready();
    const reason = await checkMatMul();
    if (reason !== null) tf.removeBackend(name);
    return { reason, adapter: prepared.adapter };
  } catch (err) {
    if (tf.findBackend(name)) tf.removeBackend(name);
    return { reason: errorText(err), adapter: null };
  }
}

async function select(search: string): Promise<BackendInfo> {
  const start = performance.now();
  const { forced, note } = parseBackendQuery(search);
  const notes = note === null ? [] : [note];
  const candidates = BACKEND_ORDER.slice(forced === null ? 0 : BACKEND_ORDER.indexOf(forced));
  for (const name of candidates) {
    const { reason, adapter } = await tryBackend(name);
    if (reason === null) {
      return { backend: name, adapter, notes, initMs: performance.now() - start };
    }
    notes.push(`${name}: ${reason}`);
  }
  throw new Error(`no tfjs backend works here (${notes.join('; ')})`);
}

let selection: Promise<BackendInfo> | null = null;

/**
 * Selects and checks the backend once per page; later calls get the same answer.
 * `search` is the URL query, e.g. `location.search`.
 */
export function initBackend(search: string): Promise<BackendInfo> {
  selection ??= select(search);
  return selection;
}
