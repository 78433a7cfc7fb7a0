import { TINY_RUN, expect, test } from './chromium';

test('the config panel validates fields and keeps the applied config in the URL hash', async ({ page, backend, openApp, waitForModel, consoleErrors }) => {
  test.skip(backend !== 'wasm', 'the config panel does not depend on the backend');
  test.setTimeout(180_000);
  // A link with two bad values: both reported, neither applied.
  await openApp(`${TINY_RUN}&lr=fast&group=1`);
  await waitForModel();
  const hashErrors = page.getByTestId('hash-errors');
  await expect(hashErrors).toContainText('lr must be a number in [1e-7, 0.1]');
  await expect(hashErrors).toContainText('group must be an integer in [2, 64] (got 1)');
  await expect(page.getByTestId('config-lr')).toHaveValue('0.00002');
  await expect(page.getByTestId('config-group')).toHaveValue('2');

  // The essentials are in view; the rest is folded by what it sets.
  await expect(page.getByTestId('config-lr')).toBeVisible();
  await expect(page.getByTestId('config-clip')).toBeHidden();
  await page.getByTestId('config-fold-ppo').locator('summary').click();
  // A field error names the field and its range, and blocks Apply.
  await page.getByTestId('config-clip').fill('1.5');
  await expect(page.getByTestId('config-error-clip')).toHaveText('clip must be a number in [0.01, 0.99] (got 1.5)');
  await expect(page.getByTestId('config-apply')).toBeDisabled();
  await page.getByTestId('config-clip').fill('0.1');
  await expect(page.getByTestId('config-error-clip')).toHaveCount(0);
  await page.getByTestId('config-fold-advantage').locator('summary').click();
  await page.getByTestId('config-credit').selectOption('broadcast');
  await page.getByTestId('config-apply').click();
  await expect(page.getByTestId('config-apply')).toBeDisabled();
  await expect(hashErrors).toHaveCount(0);
  // Apply is disabled while the engine takes the config; the link is written once it has.
  await expect.poll(() => page.evaluate(() => location.hash)).toContain('clip=0.1');
  const hash = await page.evaluate(() => location.hash);
  expect(hash).toContain('clip=0.1');
  expect(hash).toContain('credit=broadcast');
  expect(hash).toContain('preset=tiny');
  expect(hash).not.toContain('lr=');

  // The link reproduces the setup.
  await page.reload();
  await waitForModel();
  await expect(page.getByTestId('config-clip')).toHaveValue('0.1');
  await expect(page.getByTestId('config-credit')).toHaveValue('broadcast');
  await expect(hashErrors).toHaveCount(0);

  // A recipe fills the fields it names (marked changed until applied); the menu reads the draft.
  const recipe = page.getByTestId('config-recipe');
  await expect(recipe).toHaveValue('custom'); // clip 0.1 and broadcast credit are no recipe
  await recipe.selectOption('reference');
  await expect(page.getByTestId('config-batch')).toHaveValue('32');
  await expect(page.getByTestId('config-miniBatch')).toHaveValue('8');
  await expect(page.getByTestId('config-credit')).toHaveValue('ratio');
  await expect(page.getByTestId('config-apply')).toContainText('Apply (');
  await recipe.selectOption('no-gating');
  await expect(page.getByTestId('config-gating')).not.toBeChecked();
  await expect(recipe).toHaveValue('no-gating');
  await page.getByTestId('config-apply').click();
  await expect(page.getByTestId('config-apply')).toBeDisabled();
  await expect.poll(() => page.evaluate(() => location.hash)).toContain('gating=false');
  expect(consoleErrors).toEqual([]);
});

test('a link that sets a batch smaller than the default mini-batch opens: the mini-batch follows it, and the page says so', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the config panel does not depend on the backend');
  await openApp('preset=tiny&group=2&batch=2&workers=1');
  await waitForModel();
  await expect(page.getByTestId('engine-state')).not.toHaveAttribute('data-state', 'failed');
  await expect(page.getByTestId('hash-notes')).toContainText('miniBatch set to 2: the default 4 does not divide batch = 2');
  await expect(page.getByTestId('hash-errors')).toHaveCount(0);
  await expect(page.getByTestId('config-miniBatch')).toHaveValue('2');
  await page.getByTestId('step').click();
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '1', { timeout: 120_000 });
  await page.getByTestId('hash-notes').screenshot({ path: test.info().outputPath('link-note.png') });
  expect(consoleErrors).toEqual([]);
});
