import { expect, test } from './chromium';

test('the page loads on the project backend without console errors', async ({ page, backend, openApp, consoleErrors }) => {
  const shown = await openApp();
  await expect(page).toHaveTitle('SELFCEST Playground');
  expect(shown).toBe(backend);
  if (backend === 'webgpu') {
    // The software adapter must be the one in use, not a silent fallback.
    await expect(page.getByTestId('adapter')).not.toBeEmpty();
  } else {
    await expect(page.getByTestId('adapter')).toHaveCount(0);
  }
  await expect(page.getByTestId('backend-notes')).toHaveCount(0);
  // An explicit backend is used as asked, software adapter or not.
  await expect(page.getByTestId('backend-reason')).toHaveCount(0);
  // A model is always shown with where it came from (the warm start, or a labelled random init).
  await expect(page.getByTestId('model-source')).not.toHaveText('loading…');
  expect(consoleErrors).toEqual([]);
});

/** What 'auto' says next to wasm when it passes over this machine's adapter (SwiftShader: vendor google, architecture swiftshader). */
const SOFTWARE_REASON = '(WebGPU adapter is software: SwiftShader; choose webgpu in the config to use it anyway)';

test('without a backend in the link the engine passes over the software adapter for wasm and says why', async ({ page, backend, consoleErrors }) => {
  test.skip(backend !== 'webgpu', 'the default choice does not depend on the project');
  await page.goto('/');
  await expect(page.getByTestId('backend')).toHaveText('wasm');
  await expect(page.getByTestId('backend-reason')).toHaveText(SOFTWARE_REASON);
  await expect(page.getByTestId('adapter')).toHaveCount(0);
  await expect(page.getByTestId('backend-notes')).toHaveCount(0);
  expect(consoleErrors).toEqual([]);
});

test('an unknown backend value in the link is reported and not applied', async ({ page, backend, openApp, consoleErrors }) => {
  test.skip(backend !== 'webgpu', 'the link handling does not depend on the project');
  await openApp('backend=gpu9000');
  // Not applied: the default ('auto') chose, and on this software adapter that is wasm.
  await expect(page.getByTestId('backend')).toHaveText('wasm');
  await expect(page.getByTestId('backend-reason')).toHaveText(SOFTWARE_REASON);
  await expect(page.getByTestId('hash-errors')).toContainText('backend must be one of auto, webgpu, wasm, cpu (got "gpu9000")');
  await expect(page.getByTestId('config-backend')).toHaveValue('auto');
  expect(consoleErrors).toEqual([]);
});

test('a WebGPU that reads back zeros is caught and the engine falls back to wasm', async ({ page, backend, openApp, consoleErrors }) => {
  test.skip(backend !== 'webgpu', 'needs a WebGPU adapter to break');
  // Simulates a misconfigured software adapter in the engine's workers (tfjs runs only there):
  // every mapped readback comes back as zeros. Init scripts do not reach workers, so the patch
  // is prepended to the worker bundles as they are served.
  const patch = `if (typeof GPUBuffer !== 'undefined') {
    const getMappedRange = GPUBuffer.prototype.getMappedRange;
    GPUBuffer.prototype.getMappedRange = function (...args) {
      const range = getMappedRange.apply(this, args);
      new Uint8Array(range).fill(0);
      return range;
    };
  }\n`;
  await page.route(/\/assets\/[\w.-]*worker[\w.-]*\.js$/, async (route) => {
    const response = await route.fetch();
    await route.fulfill({ response, body: patch + (await response.text()) });
  });
  expect(await openApp('backend=webgpu&preset=tiny&workers=1')).toBe('wasm');
  await expect(page.getByTestId('backend-notes')).toContainText('webgpu: matMul check read back [0, 0, 0, 0]');
  expect(consoleErrors).toEqual([]);
});
