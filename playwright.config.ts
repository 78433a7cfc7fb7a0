import { defineConfig } from '@playwright/test';
import { chromiumLaunchOptions, type BackendOption } from './e2e/chromium';

// Builds nothing: `npm run test:e2e` runs `vite build` first, this serves dist/.
const PORT = 4174;

export default defineConfig<BackendOption>({
  testDir: 'e2e',
  // Software WebGPU (SwiftShader) is slow; one worker keeps timings predictable on small CI machines.
  workers: 1,
  timeout: 120_000,
  expect: { timeout: 60_000 },
  forbidOnly: Boolean(process.env.CI),
  retries: 0,
  reporter: process.env.CI ? [['list'], ['html', { open: 'never' }]] : 'list',
  use: {
    baseURL: `http://localhost:${PORT}`,
    browserName: 'chromium',
    headless: true,
    launchOptions: chromiumLaunchOptions(),
    trace: 'retain-on-failure',
  },
  projects: [
    { name: 'webgpu', use: { backend: 'webgpu' } },
    { name: 'wasm', use: { backend: 'wasm' } },
  ],
  webServer: {
    command: `npx vite preview --port ${PORT} --strictPort`,
    url: `http://localhost:${PORT}`,
    reuseExistingServer: !process.env.CI,
    timeout: 60_000,
  },
});
