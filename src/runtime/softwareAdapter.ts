/**
 * Is this WebGPU adapter a software renderer? Pure over the facts the browser gives about it, so
 * Node tests can feed plain objects.
 *
 * Why: a software adapter (SwiftShader in headless Chromium, llvmpipe/lavapipe on Mesa, WARP as
 * "Microsoft Basic Render Driver") passes the matMul check and then trains about 100× slower than
 * wasm (measured: 448 s against 3–4.5 s a GRPO step, after ~7 silent minutes of the step-0
 * evaluation). So 'auto' passes it over for wasm and says why; an explicit 'webgpu' still gets it.
 */
import type { BackendPreference } from './backend';

/** What the page can learn about an adapter: `isFallbackAdapter` and GPUAdapterInfo's strings, each maybe missing. */
export interface AdapterFacts {
  isFallbackAdapter?: boolean;
  vendor?: string;
  architecture?: string;
  device?: string;
  description?: string;
}

/** Substrings of the adapter info (lower-cased) that name a software renderer, and the name shown. */
const SOFTWARE_SIGNATURES: readonly (readonly [RegExp, string])[] = [
  [/swiftshader/, 'SwiftShader'],
  [/llvmpipe/, 'llvmpipe'],
  [/lavapipe/, 'lavapipe'],
  [/softpipe/, 'softpipe'],
  [/microsoft basic render/, 'Microsoft Basic Render Driver'],
  [/\bsoftware\b/, 'software renderer'],
];

/** The software renderer this adapter is ('SwiftShader', …), or null for a hardware GPU. */
export function softwareRenderer(facts: AdapterFacts): string | null {
  const text = [facts.vendor, facts.architecture, facts.device, facts.description]
    .filter((s): s is string => typeof s === 'string')
    .join(' ')
    .toLowerCase();
  for (const [pattern, name] of SOFTWARE_SIGNATURES) if (pattern.test(text)) return name;
  return facts.isFallbackAdapter === true ? "the browser's fallback adapter" : null;
}

/**
 * Why the preference skips WebGPU on this adapter (shown next to the chosen backend), or null
 * when WebGPU should be tried: any explicit choice, no adapter facts, or a hardware GPU.
 */
export function webgpuPassedOver(pref: BackendPreference, facts: AdapterFacts | null): string | null {
  if (pref !== 'auto' || facts === null) return null;
  const renderer = softwareRenderer(facts);
  if (renderer === null) return null;
  return `WebGPU adapter is software: ${renderer}; choose webgpu in the config to use it anyway`;
}
