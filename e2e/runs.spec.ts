import { join } from 'node:path';
import { TINY_RUN, expect, test } from './chromium';

const GATING = join('runs', 'ablation-naive', 'gating-s1');

test('a kept run survives a reload and overlays an imported CLI run, with a legend and the settings that differ', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'kept runs do not depend on the backend');
  test.setTimeout(300_000);
  await openApp(`${TINY_RUN}&evalEvery=0`);
  await waitForModel();
  await expect(page.getByTestId('keep-run')).toBeDisabled(); // nothing to keep before a step
  await page.getByTestId('step').click();
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '1', { timeout: 120_000 });
  await expect(page.getByTestId('step')).toBeEnabled();

  // Keep the run under a name.
  await page.getByTestId('keep-run-name').fill('tiny e2e');
  await page.getByTestId('keep-run').click();
  await expect(page.getByTestId('runs-note')).toContainText('kept "tiny e2e" (1 GRPO step)');
  const kept = page.locator('[data-testid="run-row"][data-name="tiny e2e"]');
  await expect(kept).toHaveCount(1);
  await expect(kept.getByTestId('run-steps')).toHaveText('1');

  // Reload (after the session's save, so no unload warning): the kept run is listed again.
  await expect(page.getByTestId('session-saved')).toHaveAttribute('data-step', '1', { timeout: 30_000 });
  await page.reload();
  await waitForModel();
  await expect(kept).toHaveCount(1);
  await expect(page.getByTestId('runs-count')).toHaveAttribute('data-kept', '1');

  // A malformed metrics file is refused, naming the file and the line; the kept run stays.
  await page
    .getByTestId('import-run-files')
    .setInputFiles([{ name: 'metrics.jsonl', mimeType: 'application/jsonl', buffer: Buffer.from('{"step":1,"meanReward":0.5}\n{"step":2,"meanRew') }]);
  await expect(page.getByTestId('runs-error')).toContainText('metrics.jsonl: line 2: not JSON');
  await expect(page.getByTestId('runs-count')).toHaveAttribute('data-kept', '1');

  // Import the CLI's gating arm with its run.json.
  await page.getByTestId('import-run-files').setInputFiles([join(GATING, 'metrics.jsonl'), join(GATING, 'run.json')]);
  await expect(page.getByTestId('runs-note')).toContainText('imported "ablation-naive/gating-s1" (150 GRPO steps, 6 held-out readings)');
  const cli = page.locator('[data-testid="run-row"][data-name="ablation-naive/gating-s1"]');
  await expect(cli.getByTestId('run-steps')).toHaveText('150');

  // Tick both: two curves per chart, one legend entry per run, the settings that differ.
  await kept.getByTestId('run-select').check();
  await expect(page.getByTestId('runs-compare')).toHaveAttribute('data-runs', '1'); // one run: its own curves
  await expect(page.getByTestId('runs-diff-summary')).toHaveCount(0);
  await cli.getByTestId('run-select').check();
  await expect(page.getByTestId('runs-compare')).toHaveAttribute('data-runs', '2');
  await expect(page.getByTestId('runs-legend-item')).toHaveCount(2);
  await expect(page.getByTestId('runs-legend')).toContainText('tiny e2e');
  await expect(page.getByTestId('runs-legend')).toContainText('ablation-naive/gating-s1');
  await expect(page.getByTestId('chart-svg-runs-reward').locator('path[data-series]')).toHaveCount(2);
  await expect(page.getByTestId('chart-svg-runs-tokens-total').locator('path[data-series]')).toHaveCount(2);
  await expect(page.getByTestId('chart-svg-runs-reward')).toHaveAttribute('data-points', '150');
  // Held-out: the CLI run's six evaluations (the tiny run evaluated none).
  await expect(page.getByTestId('chart-dot-runs-heldout')).toHaveCount(6);
  await expect(page.locator('[data-testid="runs-diff-row"][data-key="batch"]')).toContainText('16');
  await expect(page.locator('[data-testid="runs-diff-row"][data-key="start"]')).toContainText('checkpoints/warmstart-naive');
  await expect(page.locator('[data-testid="runs-diff-row"][data-key="advantage.gating"]')).toHaveCount(0);

  // The x axis: GRPO step, wall time or generated tokens; the label says the unit and the lines move.
  const reward = page.getByTestId('chart-svg-runs-reward');
  const cliLine = reward.locator('path[data-series="ablation-naive/gating-s1"]');
  await expect(page.getByTestId('runs-x-step')).toHaveAttribute('aria-pressed', 'true');
  await expect(page.getByTestId('chart-xlabel-runs-reward')).toHaveText('x: GRPO step');
  const byStep = await cliLine.getAttribute('d');
  await page.getByTestId('runs-x-time').click();
  await expect(page.getByTestId('runs-x-time')).toHaveAttribute('aria-pressed', 'true');
  await expect(page.getByTestId('runs-x-step')).toHaveAttribute('aria-pressed', 'false');
  // The CLI run took 1768 s: minutes.
  await expect(page.getByTestId('chart-xlabel-runs-reward')).toHaveText('x: wall time (min)');
  await expect(page.getByTestId('chart-xlabel-runs-heldout')).toHaveText('x: wall time (min)');
  const byTime = await cliLine.getAttribute('d');
  await page.getByTestId('runs-x-tokens').click();
  await expect(page.getByTestId('chart-xlabel-runs-tokens-total')).toHaveText('x: generated tokens');
  const byTokens = await cliLine.getAttribute('d');
  expect(new Set([byStep, byTime, byTokens]).size).toBe(3);
  await expect(reward.locator('path[data-series]')).toHaveCount(2);
  await expect(page.getByTestId('chart-dot-runs-heldout')).toHaveCount(6); // every reading has its row's token count
  await expect(page.getByTestId('runs-x-note')).toHaveCount(0);

  // Hovering a chart: a line at the nearest step and a tooltip naming both runs; mid-run the one-step run has no value near.
  await page.getByTestId('runs-x-step').click();
  await expect(page.getByTestId('chart-xlabel-runs-reward')).toHaveText('x: GRPO step');
  const box = await reward.boundingBox();
  if (!box) throw new Error('the reward chart has no box');
  await reward.hover({ position: { x: box.width * 0.5, y: box.height * 0.4 } });
  const tip = page.getByTestId('runs-crosshair');
  await expect(tip).toHaveCount(1);
  await expect(page.getByTestId('runs-crosshair-line')).toBeVisible();
  await expect(tip).toContainText(/^step \d+/);
  await expect(tip.getByTestId('runs-crosshair-row')).toHaveCount(2);
  await expect(tip.locator('[data-name="tiny e2e"]')).toContainText('—');
  await expect(tip.locator('[data-name="ablation-naive/gating-s1"]')).toContainText(/\d\.\d{3}/);
  await page.mouse.move(0, 0);
  await expect(tip).toHaveCount(0);

  // Export writes the CLI run's record; importing it back gives the same run under a free name.
  const [download] = await Promise.all([page.waitForEvent('download'), cli.getByTestId('run-export').click()]);
  expect(download.suggestedFilename()).toBe('ablation-naive_gating-s1.run.json');
  await page.getByTestId('import-run-files').setInputFiles(await download.path());
  const copy = page.locator('[data-testid="run-row"][data-name="ablation-naive/gating-s1 (2)"]');
  await expect(copy).toHaveCount(1);
  await expect(copy.getByTestId('run-steps')).toHaveText((await cli.getByTestId('run-steps').textContent()) ?? '');
  // Only a page run offers its config back.
  await expect(cli.getByTestId('run-reopen')).toHaveCount(0);
  await expect(kept.getByTestId('run-reopen')).toHaveCount(1);
  // Use config: a changed field goes back to the kept run's value.
  await page.getByTestId('config-lr').fill('0.0001');
  await page.getByTestId('config-apply').click();
  await expect(page.getByTestId('config-apply')).toBeDisabled();
  await kept.getByTestId('run-reopen').click();
  await expect(page.getByTestId('runs-note')).toContainText('the config of "tiny e2e" is applied');
  await expect(page.getByTestId('config-lr')).toHaveValue('0.00002');

  // Delete asks first: No keeps the run, Yes removes it (and after a reload too).
  let answer = false;
  const asked: string[] = [];
  page.on('dialog', (d) => {
    asked.push(d.message());
    void (answer ? d.accept() : d.dismiss());
  });
  await cli.getByTestId('run-delete').click();
  await expect(cli).toHaveCount(1);
  answer = true;
  await cli.getByTestId('run-delete').click();
  await expect(cli).toHaveCount(0);
  expect(asked).toHaveLength(2);
  answer = true;
  await copy.getByTestId('run-delete').click();
  await expect(copy).toHaveCount(0);
  expect(asked[0]).toContain('Delete the kept run "ablation-naive/gating-s1"');
  await page.reload();
  await waitForModel();
  await expect(kept).toHaveCount(1);
  await expect(cli).toHaveCount(0);
  expect(consoleErrors).toEqual([]);
});

test('the recorded gating ablation opens its nine runs side by side, once however often it is asked', async ({ page, backend, openApp, consoleErrors }) => {
  test.skip(backend !== 'wasm', 'kept runs do not depend on the backend');
  test.setTimeout(120_000);
  await page.setViewportSize({ width: 1440, height: 900 });
  await openApp(`${TINY_RUN}&evalEvery=0`);
  await page.getByTestId('open-study-gating-ablation').click();
  await expect(page.getByTestId('runs-note')).toContainText('Gating ablation, sloppy clones: 9 recorded runs, overlaid below');
  await expect(page.getByTestId('runs-compare')).toHaveAttribute('data-runs', '9');
  await expect(page.getByTestId('runs-legend-item')).toHaveCount(9);
  await expect(page.getByTestId('chart-svg-runs-reward').locator('path[data-series]')).toHaveCount(9);
  await expect(page.getByTestId('chart-svg-runs-reward')).toHaveAttribute('data-points', '150');
  // Each run evaluated the monitor set every 25 steps: 6 readings per run.
  await expect(page.getByTestId('chart-dot-runs-heldout')).toHaveCount(9 * 6);
  // The fourth chart opens on what the study is about: the share of episodes that delegate.
  await expect(page.getByTestId('runs-extra-metric')).toHaveValue('clones:delegating');
  // What differs between the arms: the gate, and the seed.
  await expect(page.locator('[data-testid="runs-diff-row"][data-key="advantage.gating"]')).toHaveCount(1);
  await expect(page.locator('[data-testid="runs-diff-row"][data-key="advantage.gateMode"]')).toHaveCount(1);
  await expect(page.locator('[data-testid="runs-diff-row"][data-key="seed"]')).toHaveCount(1);
  await page.getByTestId('runs-compare').scrollIntoViewIfNeeded();
  await page.screenshot({ path: 'test-results/gating-study-1440x900.png' });
  // Asked again (and after a reload): the same nine runs, none imported twice.
  await page.reload();
  await page.getByTestId('open-study-gating-ablation').click();
  await expect(page.getByTestId('runs-note')).toContainText('(9 kept before)');
  await expect(page.getByTestId('runs-count')).toHaveAttribute('data-kept', '9');
  await expect(page.getByTestId('runs-compare')).toHaveAttribute('data-runs', '9');
  expect(consoleErrors).toEqual([]);
});
