/**
 * WebGPU in Node: installs `navigator.gpu` and the GPU* globals from the npm `webgpu` package
 * (Dawn, a prebuilt binary inside the package), so that tfjs-backend-webgpu runs the same
 * kernels as in the browser, headless. Must run before '@tensorflow/tfjs-backend-webgpu' is
 * imported: that module registers its backend only when `navigator.gpu` exists.
 *
 * Why the Vulkan steps (Linux): Dawn dlopens `libvulkan.so.1`; a machine without a GPU may lack
 * the loader (Debian's libvulkan1) and any driver. Debian's chromium package ships both the
 * loader and SwiftShader (a software Vulkan driver): the loader is preloaded by path (kept
 * resident with RTLD_NODELETE, so Dawn's later dlopen by name finds it), and SwiftShader's ICD
 * is named in VK_ICD_FILENAMES when the drivers the system has give no adapter. Software
 * WebGPU is slow: fine for correctness tests on tiny models, not for long runs.
 */
import { existsSync, readdirSync } from 'node:fs';
import { constants } from 'node:os';
import { isMainThread } from 'node:worker_threads';

/** Where Vulkan loaders and SwiftShader come with a Chromium package (Debian, Ubuntu, Fedora). */
const CHROMIUM_DIRS = ['/usr/lib/chromium', '/usr/lib/chromium-browser', '/usr/lib64/chromium-browser'];
const SWIFTSHADER_ICD = 'vk_swiftshader_icd.json';
/** Where the Vulkan loader looks for the system's drivers (ICD manifests). */
const SYSTEM_ICD_DIRS = ['/etc/vulkan/icd.d', '/usr/local/share/vulkan/icd.d', '/usr/share/vulkan/icd.d'];
/** glibc's RTLD_NODELETE (not in os.constants.dlopen): the library stays loaded after Node's dlclose. */
const RTLD_NODELETE = 0x1000;

/** What the package exports (its own types need @webgpu/types, which this project does not load globally). */
interface DawnModule {
  create(flags: string[]): GpuEntry;
  globals: Record<string, unknown>;
}
interface GpuEntry {
  requestAdapter(options?: object): Promise<{ info?: { vendor?: string; architecture?: string; description?: string } } | null>;
}

export interface NodeWebgpu {
  /** The adapter found, in words (vendor, architecture, description). */
  adapter: string;
  /** Each step taken to find it, for the log. */
  tried: string[];
}

let installed: Promise<NodeWebgpu> | null = null;

/**
 * Installs WebGPU for this thread (once; later calls return the first result). Throws
 * "no WebGPU adapter in Node (…)" naming each thing tried when the package, a Vulkan loader or
 * a driver is missing.
 */
export function installNodeWebgpu(): Promise<NodeWebgpu> {
  installed ??= install().catch((e: unknown) => {
    installed = null;
    throw e;
  });
  return installed;
}

/**
 * Call before starting worker threads that select webgpu: the driver choice (VK_ICD_FILENAMES)
 * must be made in the main thread to reach the Vulkan loader of every thread. A failure here is
 * left to each worker to report, as a note with its fallback to wasm.
 */
export async function prepareWebgpuWorkers(): Promise<void> {
  if (isMainThread) await installNodeWebgpu().catch(() => undefined);
}

async function install(): Promise<NodeWebgpu> {
  const tried: string[] = [];
  const nav = (globalThis as { navigator?: { gpu?: unknown } }).navigator;
  if (nav?.gpu) return { adapter: 'navigator.gpu already present', tried };
  let dawn: DawnModule;
  try {
    dawn = (await import('webgpu')) as unknown as DawnModule;
    tried.push('npm package webgpu: loaded');
  } catch (e) {
    tried.push(`npm package webgpu: ${firstLine(e)} (npm install webgpu)`);
    throw noAdapter(tried);
  }
  if (process.platform === 'linux' && !loadVulkanLoader(tried)) throw noAdapter(tried);

  let gpu = dawn.create([]);
  const chosen = process.env.VK_ICD_FILENAMES ?? process.env.VK_DRIVER_FILES;
  let adapter = null;
  // Without any driver manifest the loader only prints "Found no drivers!": skip the attempt.
  if (chosen !== undefined || process.platform !== 'linux' || systemIcds().length > 0) {
    adapter = await requestAdapter(gpu, chosen === undefined ? 'the system drivers' : `the drivers in ${chosen}`, tried);
  } else {
    tried.push(`system Vulkan drivers: no ICD manifest in ${SYSTEM_ICD_DIRS.join(', ')}`);
  }
  if (!adapter && chosen === undefined) {
    const icd = CHROMIUM_DIRS.map((d) => `${d}/${SWIFTSHADER_ICD}`).find((p) => existsSync(p));
    if (icd === undefined) {
      tried.push(`SwiftShader: no ${SWIFTSHADER_ICD} in ${CHROMIUM_DIRS.join(', ')} (apt-get install chromium, or mesa-vulkan-drivers for lavapipe)`);
    } else if (!isMainThread) {
      // A worker's process.env is its own copy; the loader reads the process's environment.
      tried.push(
        `SwiftShader (${icd}): a worker thread cannot set VK_ICD_FILENAMES for the Vulkan loader; set it before the process starts, or start webgpu in the main thread first (prepareWebgpuWorkers)`,
      );
    } else {
      // The loader reads these when an instance is created: the old loader name and the new one.
      process.env.VK_ICD_FILENAMES = icd;
      process.env.VK_DRIVER_FILES = icd;
      gpu = dawn.create([]);
      adapter = await requestAdapter(gpu, `SwiftShader (VK_ICD_FILENAMES=${icd})`, tried);
    }
  }
  if (!adapter) throw noAdapter(tried);

  for (const [name, value] of Object.entries(dawn.globals)) {
    if (!(name in globalThis)) Object.defineProperty(globalThis, name, { value, writable: true, configurable: true });
  }
  // Node 20 has no navigator; Node ≥ 21 has one without gpu.
  if (nav) Object.defineProperty(nav, 'gpu', { value: gpu, configurable: true });
  else Object.defineProperty(globalThis, 'navigator', { value: { gpu }, writable: true, configurable: true });
  const info = adapter.info ?? {};
  return { adapter: [info.vendor, info.architecture, info.description].filter(Boolean).join(' / ') || 'unknown adapter', tried };
}

function systemIcds(): string[] {
  return SYSTEM_ICD_DIRS.flatMap((d) => {
    try {
      return readdirSync(d).filter((f) => f.endsWith('.json'));
    } catch {
      return [];
    }
  });
}

/** Makes `libvulkan.so.1` loadable for Dawn: the system's, else a Chromium package's. */
function loadVulkanLoader(tried: string[]): boolean {
  const flags = constants.dlopen.RTLD_NOW | constants.dlopen.RTLD_GLOBAL | RTLD_NODELETE;
  const failed: string[] = [];
  for (const path of ['libvulkan.so.1', ...CHROMIUM_DIRS.map((d) => `${d}/libvulkan.so.1`)]) {
    if (path.startsWith('/') && !existsSync(path)) continue;
    try {
      process.dlopen({ exports: {} }, path, flags);
    } catch (e) {
      const msg = firstLine(e);
      // Only "did not self-register" means dlopen worked (a plain library is no Node addon): it is now resident.
      if (!msg.includes('did not self-register')) {
        failed.push(`${path}: ${msg}`);
        continue;
      }
    }
    tried.push(`Vulkan loader ${path}${failed.length > 0 ? ` (${failed.join('; ')})` : ''}`);
    return true;
  }
  tried.push(`no Vulkan loader (${[...failed, `none in ${CHROMIUM_DIRS.join(', ')}`].join('; ')}; apt-get install libvulkan1)`);
  return false;
}

async function requestAdapter(gpu: GpuEntry, what: string, tried: string[]): ReturnType<GpuEntry['requestAdapter']> {
  try {
    const adapter = await gpu.requestAdapter();
    tried.push(`${what}: ${adapter ? 'adapter found' : 'no adapter'}`);
    return adapter;
  } catch (e) {
    tried.push(`${what}: ${firstLine(e)}`);
    return null;
  }
}

function noAdapter(tried: readonly string[]): Error {
  return new Error(`no WebGPU adapter in Node (${tried.join('; ')})`);
}

function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0];
}
