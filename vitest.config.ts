import { defineConfig } from 'vitest/config';

// Unit tests run in Node on the tfjs wasm/cpu backends. One fork at a time keeps
// wasm memory predictable on the 2-core CI machine.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    environment: 'node',
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
