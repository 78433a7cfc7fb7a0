/**
 * The panel screenshots in docs/screenshots/ (the first-visit views are bench/firstvisit.ts's), taken from the real page after a short run:
 * `SCREENSHOTS=1 npx playwright test e2e/screenshots.spec.ts --project wasm` (after `npm run build`).
 * Skipped otherwise (the suite does not rewrite docs).
 */
import type { Page } from '@playwright/test';
import { expect, test } from './chromium';

const OUT = 'docs/screenshots';

async function shoot(page: Page, name: string, testId: string): Promise<void> {
  const panel = page.getByTestId(testId);
  await panel.scrollIntoViewIfNeeded();
  await panel.screenshot({ path: `${OUT}/${name}.png` });
}

test('screenshots of the tree, slow-motion and frontier panels', async ({ page, backend, openApp, waitForModel }) => {
  test.skip(backend !== 'wasm' || !process.env.SCREENSHOTS, 'set SCREENSHOTS=1 to rewrite docs/screenshots/');
  test.setTimeout(900_000);
  await page.setViewportSize({ width: 1280, height: 720 });
  await openApp('workers=1&evalEvery=2&evalN=32');
  await waitForModel();
  await page.getByTestId('train').first().click();
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '6', { timeout: 600_000 });
  await page.getByTestId('pause').click();
  await expect(page.getByTestId('engine-state')).toHaveAttribute('data-state', 'paused', { timeout: 300_000 });
  await page.getByTestId('rollout-filter').selectOption('delegating');
  await page.getByTestId('rollout-row').first().click();
  await page.getByTestId('tree-node').nth(1).click();
  await shoot(page, 'tree-1280', 'tree-panel');
  await page.getByTestId('slow-step').click();
  await expect(page.getByTestId('slow-summary')).toBeVisible({ timeout: 120_000 });
  await page.getByTestId('slow-stage-4').click();
  await shoot(page, 'slow-motion-1280', 'slow-panel');
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.getByTestId('frontier-methods').fill('delegate,mono,sc2');
  await page.getByTestId('frontier-limits').fill('48,96');
  await page.getByTestId('frontier-n').fill('32');
  await page.getByTestId('frontier-run').click();
  await expect(page.getByTestId('frontier-svg')).toHaveAttribute('data-points', /^(1[4-9]|[2-9]\d)$/, { timeout: 600_000 });
  await shoot(page, 'frontier-1440', 'frontier-panel');
});

test('screenshots of a Hugging Face model in the same panels: the shipped Qwen2 warm start after a step', async ({ page, backend, openApp, waitForModel }) => {
  test.skip(backend !== 'wasm' || !process.env.SCREENSHOTS, 'set SCREENSHOTS=1 to rewrite docs/screenshots/');
  test.setTimeout(900_000);
  await page.setViewportSize({ width: 1280, height: 720 });
  await openApp('checkpoint=text-warmstart&workers=1&group=2&batch=2&miniBatch=2&rootMaxTokens=96&budgets=32');
  await waitForModel();
  await expect(page.getByTestId('model-preset')).toContainText('qwen2 · ');
  await page.getByTestId('slow-step').click();
  await expect(page.getByTestId('slow-summary')).toBeVisible({ timeout: 600_000 });
  await page.getByTestId('rollout-row').first().click();
  await shoot(page, 'hf-tree-1280', 'tree-panel');
  await shoot(page, 'hf-slow-motion-1280', 'slow-panel');
  await shoot(page, 'hf-checkpoint-1280', 'checkpoint-panel');
});
