/**
 * The first visit as a newcomer has it: no link, nothing saved. The page opens on the demo with
 * what the run is learning and the delegation tree first, the essentials of the config in view
 * and the rest folded, at 1280×720, 1440×900 and on a 390-px phone. The three-minute result
 * itself is measured on the production build by bench/firstvisit.ts (docs/BENCHMARKS.md).
 */
import { TINY_RUN, expect, test } from './chromium';
import { DEMO_HASH } from '../src/app/state/demo';

test('a first visit opens on the demo, story and tree first, the config folded, at two sizes and on a phone', async ({ page, backend, consoleErrors }) => {
  test.skip(backend !== 'wasm', 'the layout does not depend on the backend');
  await page.setViewportSize({ width: 1280, height: 720 });
  await page.goto('/');
  await expect(page.getByTestId('model-source')).not.toHaveText('loading…');
  await expect(page.getByTestId('demo-note')).toBeVisible();
  await expect(page.getByTestId('config-task')).toHaveValue('multihop');
  // The demo's link is in the URL: shared, it opens the same demo.
  await expect.poll(() => page.evaluate(() => location.hash)).toContain('task=multihop');
  for (const [w, h] of [
    [1280, 720],
    [1440, 900],
  ]) {
    await page.setViewportSize({ width: w, height: h });
    await page.evaluate(() => window.scrollTo(0, 0));
    // The story and the tree open the right column, in the first screen.
    const story = (await page.getByTestId('story').boundingBox())!;
    const tree = (await page.getByTestId('tree-panel').boundingBox())!;
    expect(story.y).toBeLessThan(120);
    expect(tree.y).toBeLessThan(h);
    await expect(page.getByTestId('story-summary')).toContainText('Press Train');
    await page.screenshot({ path: test.info().outputPath(`first-${w}x${h}.png`) });
  }
  // The essentials in view, the rest folded by what it sets; a fold opens on a click.
  for (const key of ['task', 'taskOptions', 'checkpoint', 'lr', 'group', 'batch', 'gating']) await expect(page.getByTestId(`config-${key}`)).toBeVisible();
  await expect(page.getByTestId('config-clip')).toBeHidden();
  await page.getByTestId('config-fold-ppo').locator('summary').click();
  await expect(page.getByTestId('config-clip')).toBeVisible();
  // A phone: the story comes first, nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.evaluate(() => window.scrollTo(0, 0));
  const storyY = (await page.getByTestId('story').boundingBox())!.y;
  const configY = (await page.getByRole('region', { name: 'Configuration' }).boundingBox())!.y;
  expect(storyY).toBeLessThan(configY);
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  await page.screenshot({ path: test.info().outputPath('first-390.png'), fullPage: false });
  expect(consoleErrors).toEqual([]);
});

test('the demo flow on the tiny preset: Train, held-out readings with intervals, the sentence, the live tree', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the flow does not depend on the backend');
  test.setTimeout(300_000);
  // The demo's link with the tiny preset and smaller sizes over it.
  const link = new URLSearchParams(DEMO_HASH);
  for (const [k, v] of new URLSearchParams(`${TINY_RUN}&evalEvery=1&evalN=4`)) link.set(k, v);
  await openApp(link.toString());
  await waitForModel();
  await expect(page.getByTestId('config-task')).toHaveValue('multihop');
  await page.getByTestId('train').click();
  await expect(page.getByTestId('story-summary')).toHaveAttribute('data-ready', 'true', { timeout: 240_000 });
  // While it trains the page says its pace: seconds a step here and when the next reading comes.
  await expect(page.getByTestId('story-pace')).toContainText(/^\d+ s a GRPO step here: the next reading, after step \d+, in about \d+ s\./);
  await page.getByTestId('pause').click();
  await expect(page.getByTestId('engine-state')).toHaveAttribute('data-state', 'paused', { timeout: 120_000 });
  const delegate = page.locator('[data-testid="heldout-reading"][data-method="delegate"]');
  expect(await delegate.count()).toBeGreaterThanOrEqual(2);
  await expect(delegate.first()).toHaveAttribute('data-step', '0');
  await expect(delegate.first()).toHaveAttribute('data-n', '4');
  await expect(page.getByTestId('story-pace')).toHaveCount(0);
  await expect(page.getByTestId('story-summary')).toContainText('held-out accuracy');
  await expect(page.getByTestId('tree-following')).toHaveAttribute('data-following', 'true');
  await expect(page.getByTestId('tree-panel').locator('[data-testid="tree-node"][data-role="root"]')).toBeVisible();
  // Picking a rollout holds it; "Follow newest" goes back to the live tree.
  await page.getByTestId('rollout-row').first().click();
  await expect(page.getByTestId('tree-following')).toHaveAttribute('data-following', 'false');
  await page.getByTestId('tree-follow').click();
  await expect(page.getByTestId('tree-following')).toHaveAttribute('data-following', 'true');
  expect(consoleErrors).toEqual([]);
});
