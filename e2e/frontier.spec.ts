import { readFile } from 'node:fs/promises';
import type { Download, Page } from '@playwright/test';
import { TINY_RUN, expect, test } from './chromium';

async function downloadText(page: Page, testId: string): Promise<{ name: string; text: string }> {
  const [download]: [Download, void] = await Promise.all([page.waitForEvent('download'), page.getByTestId(testId).click()]);
  return { name: download.suggestedFilename(), text: await readFile(await download.path(), 'utf8') };
}

const cxOf = async (page: Page, selector: string) => Number(await page.locator(selector).first().getAttribute('cx'));

test('frontier: evaluated points appear, the cost toggle redraws, training adds live points, SVG and CSV export', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  // Chart code; WebGPU training with live evaluations is training.spec.ts's main-thread test (this took 3.6 min on software WebGPU).
  test.skip(backend !== 'wasm', 'the frontier chart does not depend on the backend');
  test.setTimeout(420_000);
  await openApp(`${TINY_RUN}&evalEvery=1&evalN=2`);
  await waitForModel();
  const svg = page.getByTestId('frontier-svg');
  await expect(svg).toHaveAttribute('data-points', '0');
  await expect(page.getByTestId('frontier-export-svg')).toBeDisabled();

  // A bad method is named, and the button waits for a valid form.
  await page.getByTestId('frontier-methods').fill('delegate,best');
  await expect(page.getByTestId('frontier-form-error')).toContainText('unknown method "best"');
  await expect(page.getByTestId('frontier-run')).toBeDisabled();

  await page.getByTestId('frontier-methods').fill('delegate,mono,sc2');
  await page.getByTestId('frontier-limits').fill('8,24');
  await page.getByTestId('frontier-n').fill('2');
  await page.getByTestId('frontier-run').click();
  await expect(svg).toHaveAttribute('data-points', '6', { timeout: 240_000 });
  const points = page.getByTestId('frontier-point');
  await expect(points).toHaveCount(6);
  await expect(page.locator('[data-testid="frontier-point"][data-method="sc2"]')).toHaveCount(2);
  await expect(page.getByTestId('frontier-pareto')).toHaveCount(1);
  // The legend names every method drawn and each mark that needs saying, and only those.
  const legendKinds = () => page.getByTestId('frontier-legend-item').evaluateAll((els) => els.map((e) => e.getAttribute('data-kind')));
  expect(await legendKinds()).toEqual(expect.arrayContaining(['delegate', 'mono', 'sc2', 'pareto', 'interval']));
  expect(await legendKinds()).not.toContain('trajectory');

  // Hover: the setting, n and the interval.
  await points.last().hover();
  const tip = page.getByTestId('frontier-tooltip');
  await expect(tip).toContainText('limit');
  await expect(tip).toContainText('n 2');
  await expect(tip).toHaveText(/accuracy [\d.]+% \[[\d.]+%, [\d.]+%\]/);
  await expect(tip).toHaveText(/root [\d.]+ tokens written · context [\d.]+/);

  // Total → critical path: two self-consistency samples cost their sum in total, their max on the critical path.
  const sc2 = '[data-testid="frontier-point"][data-method="sc2"][data-limit="24"]';
  const totalX = await cxOf(page, sc2);
  await page.getByTestId('frontier-cost-critical').click();
  await expect(svg).toHaveAttribute('data-cost', 'critical');
  await expect(page.getByTestId('frontier-x-label')).toContainText('critical-path tokens');
  expect(await cxOf(page, sc2)).toBeLessThan(totalX);

  // Two GRPO steps with evalEvery=1: delegate and mono at the training limit after each, joined per method.
  for (let i = 1; i <= 2; i++) {
    await page.getByTestId('step').click();
    await expect(svg).toHaveAttribute('data-points', String(6 + 2 * i), { timeout: 180_000 });
    await expect(page.getByTestId('step')).toBeEnabled();
  }
  await expect(page.locator('[data-testid="frontier-point"][data-label="step 2"]')).toHaveCount(2);
  await expect(page.getByTestId('frontier-trajectory')).toHaveCount(2);
  expect(await legendKinds()).toEqual(expect.arrayContaining(['trajectory', 'faded']));

  const exported = await downloadText(page, 'frontier-export-svg');
  expect(exported.name).toBe('frontier-critical.svg');
  expect(exported.text).toMatch(/^<\?xml[^>]*>\n<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  expect(exported.text.match(/data-testid="frontier-point"/g)).toHaveLength(10);
  expect(exported.text).toContain('critical-path tokens per problem');
  const csv = await downloadText(page, 'frontier-export-csv');
  expect(csv.name).toBe('frontier.csv');
  const rows = csv.text.trim().split('\n');
  expect(rows[0]).toBe(
    'checkpoint,method,limit,n,accuracy,interval_low,interval_high,mean_tokens,mean_critical_path_tokens,mean_root_tokens,mean_root_context_tokens',
  );
  expect(rows).toHaveLength(11);
  expect(rows.filter((r) => r.startsWith('step 2,'))).toHaveLength(2);

  await page.getByTestId('frontier-cost-total').click();
  await expect(svg).toHaveAttribute('data-cost', 'total');
  expect(consoleErrors).toEqual([]);
});
