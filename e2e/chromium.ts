/**
 * Browser settings shared by every Playwright project, and the fixtures every spec uses.
 *
 * Specs import `test` and `expect` from here, not from @playwright/test: `openApp` opens the
 * page on the project's backend (`#backend=webgpu` or `#backend=wasm` in the config hash), so
 * each spec runs on both without knowing which.
 */
import { existsSync } from 'node:fs';
import { test as base, expect, type LaunchOptions, type Page } from '@playwright/test';

export { expect };

/** The Debian package's launcher; on other machines Playwright's own browser is used. */
const SYSTEM_CHROMIUM = '/usr/bin/chromium';

/**
 * Headless Chromium has a real (software, SwiftShader) WebGPU adapter only with these flags.
 * Without the Vulkan/SwiftShader ones, readbacks on WebGPU return zeros (docs/DECISIONS.md, Runtime). The rest
 * keep the browser from reaching the network.
 */
export const CHROMIUM_ARGS: readonly string[] = [
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--use-vulkan=swiftshader',
  '--use-angle=swiftshader',
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

/** CHROMIUM_PATH, else the system Chromium, else undefined (Playwright's downloaded browser). */
export function chromiumExecutable(): string | undefined {
  const fromEnv = process.env.CHROMIUM_PATH;
  if (fromEnv) return fromEnv;
  return existsSync(SYSTEM_CHROMIUM) ? SYSTEM_CHROMIUM : undefined;
}

export function chromiumLaunchOptions(): LaunchOptions {
  const executablePath = chromiumExecutable();
  return { args: [...CHROMIUM_ARGS], ...(executablePath ? { executablePath } : {}) };
}

export type E2EBackend = 'webgpu' | 'wasm';

export interface BackendOption {
  /** The backend this project runs the page on; set per project in playwright.config.ts. */
  backend: E2EBackend;
}

/** A run small enough for software WebGPU: the tiny preset, 2 prompts × 2 rollouts, one worker. */
export const TINY_RUN = 'preset=tiny&group=2&batch=2&miniBatch=2&workers=1';

interface AppFixtures {
  /** Console errors and uncaught page errors, collected from the start of the test. */
  consoleErrors: string[];
  /**
   * Opens the playground with the project's backend and an optional config hash (e.g.
   * TINY_RUN; `backend=` is added unless given), waits until the engine reports its backend
   * and returns the backend's name.
   */
  openApp: (hash?: string) => Promise<string>;
  /** Waits until a model is loaded and the engine is ready for a request. */
  waitForModel: () => Promise<void>;
}

function collectErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
  return errors;
}

export const test = base.extend<AppFixtures & BackendOption>({
  backend: ['webgpu', { option: true }],
  consoleErrors: async ({ page }, use) => {
    await use(collectErrors(page));
  },
  openApp: async ({ page, backend, consoleErrors }, use) => {
    void consoleErrors; // requested so that errors are collected from the first navigation
    await use(async (hash = '') => {
      const params = new URLSearchParams(hash);
      if (!params.has('backend')) params.set('backend', backend);
      await page.goto(`/#${params.toString()}`);
      const status = page.getByTestId('backend');
      await expect(status).not.toHaveAttribute('data-state', 'pending');
      return (await status.textContent()) ?? '';
    });
  },
  waitForModel: async ({ page }, use) => {
    await use(async () => {
      await expect(page.getByTestId('model-preset')).not.toHaveText('—');
      await expect(page.getByTestId('engine-state')).toHaveAttribute('data-state', /^(idle|paused)$/);
      await expect(page.getByTestId('step')).toBeEnabled();
    });
  },
});
