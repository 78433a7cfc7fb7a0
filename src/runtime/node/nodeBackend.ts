/**
 * Backend choice in Node: 'auto' means wasm (then cpu). Node's WebGPU is Dawn through the npm
 * `webgpu` package (nodeWebgpu.ts), installed only when asked for: a software adapter is far
 * slower than wasm. As in selectBackend, a WebGPU that cannot start falls back to wasm with a note.
 */
import type { BackendReport } from '../engine/messages';
import { type BackendPreference, selectBackend } from '../selectBackend';
import { installNodeWebgpu } from './nodeWebgpu';

export async function selectNodeBackend(pref: BackendPreference): Promise<BackendReport> {
  if (pref === 'webgpu') {
    try {
      await installNodeWebgpu();
    } catch (e) {
      const report = await selectBackend('wasm');
      return { ...report, notes: [`webgpu: ${e instanceof Error ? e.message : String(e)}`, ...report.notes] };
    }
  }
  return selectBackend(pref === 'auto' ? 'wasm' : pref);
}
