import { afterEach, describe, expect, it, vi } from 'vitest';
import { selectBackend } from './selectBackend';
import { softwareRenderer, webgpuPassedOver } from './softwareAdapter';

describe('software WebGPU adapters', () => {
  it('recognises each software signature in any info field', () => {
    // What headless Chromium reports for SwiftShader: vendor google, architecture swiftshader.
    expect(softwareRenderer({ vendor: 'google', architecture: 'swiftshader', device: '', description: '' })).toBe('SwiftShader');
    expect(softwareRenderer({ description: 'SwiftShader Device (Subzero)' })).toBe('SwiftShader');
    expect(softwareRenderer({ vendor: 'mesa', device: 'llvmpipe (LLVM 15.0.6, 256 bits)' })).toBe('llvmpipe');
    expect(softwareRenderer({ description: 'Lavapipe' })).toBe('lavapipe');
    expect(softwareRenderer({ vendor: 'microsoft', description: 'Microsoft Basic Render Driver' })).toBe('Microsoft Basic Render Driver');
    expect(softwareRenderer({ description: 'Software Adapter' })).toBe('software renderer');
    expect(softwareRenderer({ vendor: 'nvidia', architecture: 'ampere', isFallbackAdapter: true })).toBe("the browser's fallback adapter");
  });

  it('keeps a hardware GPU, also with fields missing or empty', () => {
    expect(softwareRenderer({ vendor: 'nvidia', architecture: 'ampere', device: '', description: 'NVIDIA GeForce RTX 3080' })).toBeNull();
    expect(softwareRenderer({ vendor: 'apple', architecture: 'metal-3', isFallbackAdapter: false })).toBeNull();
    expect(softwareRenderer({ vendor: 'intel' })).toBeNull();
    expect(softwareRenderer({})).toBeNull();
    // "software" only as a word: a vendor string that merely contains it is not a renderer name.
    expect(softwareRenderer({ vendor: 'softwareless-gpu-co' })).toBeNull();
  });

  it("'auto' passes a software adapter over with the reason; an explicit choice or a real GPU does not", () => {
    const swiftshader = { vendor: 'google', architecture: 'swiftshader' };
    expect(webgpuPassedOver('auto', swiftshader)).toBe('WebGPU adapter is software: SwiftShader; choose webgpu in the config to use it anyway');
    expect(webgpuPassedOver('webgpu', swiftshader)).toBeNull();
    expect(webgpuPassedOver('wasm', swiftshader)).toBeNull();
    expect(webgpuPassedOver('auto', { vendor: 'nvidia', architecture: 'ampere' })).toBeNull();
    expect(webgpuPassedOver('auto', null)).toBeNull();
  });
});

describe('selectBackend with a software adapter', () => {
  const nav = Object.getOwnPropertyDescriptor(globalThis, 'navigator');
  /** A navigator.gpu whose adapter has SwiftShader's info (as a getter, like GPUAdapterInfo), counting requests. */
  function fakeSwiftShader(): { requests: number } {
    const seen = { requests: 0 };
    class Info {
      get vendor() {
        return 'google';
      }
      get architecture() {
        return 'swiftshader';
      }
    }
    const gpu = {
      requestAdapter: async () => {
        seen.requests++;
        return { info: new Info() };
      },
    };
    Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true });
    return seen;
  }
  afterEach(() => {
    if (nav) Object.defineProperty(globalThis, 'navigator', nav);
    else delete (globalThis as { navigator?: unknown }).navigator;
  });

  it("'auto' picks wasm without initialising WebGPU and reports why", async () => {
    const seen = fakeSwiftShader();
    const report = await selectBackend('auto');
    expect(report).toEqual({
      backend: 'wasm',
      adapter: null,
      notes: [],
      reason: 'WebGPU adapter is software: SwiftShader; choose webgpu in the config to use it anyway',
    });
    expect(seen.requests).toBe(1);
  });

  it("an explicit 'webgpu' is tried on it all the same", async () => {
    fakeSwiftShader();
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      const report = await selectBackend('webgpu');
      // Node has no GPU device behind the fake adapter: tfjs tried to initialise WebGPU, failed,
      // and the search went on to wasm with a note, not with the 'auto' reason.
      expect(warn.mock.calls.some((args) => String(args[0]).includes('Initialization of backend webgpu failed'))).toBe(true);
      expect(report).toEqual({ backend: 'wasm', adapter: null, notes: ['webgpu: backend webgpu could not be initialised on this platform'], reason: null });
    } finally {
      warn.mockRestore();
    }
  });

  it("an explicit 'wasm' never asks for an adapter and has no reason", async () => {
    const seen = fakeSwiftShader();
    expect(await selectBackend('wasm')).toEqual({ backend: 'wasm', adapter: null, notes: [], reason: null });
    expect(seen.requests).toBe(0);
  });
});
