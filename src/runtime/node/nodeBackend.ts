/** Backend choice in Node: no WebGPU here, so 'auto' means wasm (then cpu). */
import type { BackendReport } from '../protocol';
import { type BackendPreference, selectBackend } from '../selectBackend';

export function selectNodeBackend(pref: BackendPreference): Promise<BackendReport> {
  return selectBackend(pref === 'auto' ? 'wasm' : pref);
}
