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
  expect(consoleErrors).toEqual([]);
});

test('without ?backend the page prefers webgpu', async ({ page, backend, consoleErrors }) => {
  test.skip(backend !== 'webgpu', 'the default choice does not depend on the project');
  await page.goto('/');
  await expect(page.getByTestId('backend')).toHaveText('webgpu');
  expect(consoleErrors).toEqual([]);
});

test('an unknown ?backend value is reported and ignored', async ({ page, backend, openApp, consoleErrors }) => {
  test.skip(backend !== 'webgpu', 'the query handling does not depend on the project');
  await openApp('backend=gpu9000');
  await expect(page.getByTestId('backend')).toHaveText('webgpu');
  await expect(page.getByTestId('backend-notes')).toContainText('ignored ?backend=gpu9000');
  expect(consoleErrors).toEqual([]);
});

test('a WebGPU that reads back zeros is caught and the page falls back to wasm', async ({ page, backend, openApp, consoleErrors }) => {
  test.skip(backend !== 'webgpu', 'needs a WebGPU adapter to break');
  // Simulates a misconfigured software adapter: every mapped readback comes back as zeros.
  await page.addInitScript(() => {
    const getMappedRange = GPUBuffer.prototype.getMappedRange;
    GPUBuffer.prototype.getMappedRange = function (...args: Parameters<GPUBuffer['getMappedRange']>) {
      const range = getMappedRange.apply(this, args);
      new Uint8Array(range).fill(0);
      return range;
    };
  });
  expect(await openApp()).toBe('wasm');
  await expect(page.getByTestId('backend-notes')).toContainText('webgpu: matMul check read back [0, 0, 0, 0]');
  expect(consoleErrors).toEqual([]);
});
