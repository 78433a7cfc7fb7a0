import type { Dialog } from '@playwright/test';
import { TINY_RUN, expect, test } from './chromium';

test('the warm start says what it will run, draws its loss, counts its steps apart from GRPO, and asks before moving a GRPO-trained policy', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the warm start display does not depend on the backend; an SFT step takes ~40 s on software WebGPU');
  test.setTimeout(420_000);
  const dialogs: string[] = [];
  let answer = false;
  page.on('dialog', (d: Dialog) => {
    dialogs.push(d.message());
    void (answer ? d.accept() : d.dismiss());
  });
  await openApp(`${TINY_RUN}&evalEvery=0&sftLr=0.002&sftBatchTokens=256&sftMicroTokens=256`);
  await waitForModel();

  // The plan, from the applied config; each value leads to its field in Config.
  await page.getByTestId('sft-steps').fill('3');
  await expect(page.getByTestId('sft-plan-lr')).toHaveText('lr 0.002');
  await expect(page.getByTestId('sft-plan-teacher')).toHaveText('expert teacher');
  await expect(page.getByTestId('sft-plan-cosine')).toHaveText('cosine to 0.0002');
  await expect(page.getByTestId('sft-plan-steps')).toHaveText('3 steps');
  await expect(page.getByTestId('sft-plan-tokens')).toHaveText('256 tokens/step');
  await page.getByTestId('sft-plan-lr').click();
  await expect(page.getByTestId('config-sftLr')).toBeFocused();

  // A warm start on the shipped tiny warm start: no question; its loss curve, x = warm-start steps.
  await expect(page.getByTestId('chart-warmstart')).toHaveCount(0);
  await page.getByTestId('sft').click();
  await expect(page.getByTestId('sft-progress')).toHaveAttribute('data-step', '3', { timeout: 240_000 });
  await expect(page.getByTestId('warmstart-steps')).toHaveText('3');
  await expect(page.getByTestId('chart-svg-warmstart')).toHaveAttribute('data-points', '3');
  await expect(page.getByTestId('chart-xlabel-warmstart')).toHaveText('x: warm-start step');
  await expect(page.getByTestId('chart-right-axis-warmstart')).toHaveCount(1);
  await expect(page.getByTestId('chart-svg-warmstart').locator('[data-series="lr"]')).toHaveCount(1);
  await expect(page.getByTestId('engine-state')).toHaveAttribute('data-state', /^(idle|paused)$/);
  await expect(page.getByTestId('grpo-steps')).toHaveText('0');
  await expect(page.getByTestId('policy-version')).toHaveText('v3');
  expect(dialogs).toEqual([]);

  // One GRPO step: its own counter, the GRPO curves' x axis, one more policy version.
  await page.getByTestId('step').click();
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '1', { timeout: 120_000 });
  await expect(page.getByTestId('grpo-steps')).toHaveText('1');
  await expect(page.getByTestId('warmstart-steps')).toHaveText('3');
  await expect(page.getByTestId('policy-version')).toHaveText('v4');
  await expect(page.getByTestId('chart-xlabel-reward')).toHaveText('x: GRPO step');
  await expect(page.getByTestId('step')).toBeEnabled();

  // Now a warm start asks first, with its lr and the ways back; No leaves the model alone.
  await page.getByTestId('sft').click();
  await expect.poll(() => dialogs.length).toBe(1);
  expect(dialogs[0]).toContain('carry 1 GRPO step');
  expect(dialogs[0]).toContain('3 supervised steps at a learning rate up to 0.002, 100× the GRPO learning rate 0.00002');
  expect(dialogs[0]).toContain('Reset returns to the loaded checkpoint');
  expect(dialogs[0]).toContain('Export weights');
  await expect(page.getByTestId('engine-state')).toHaveAttribute('data-state', /^(idle|paused)$/);
  await expect(page.getByTestId('warmstart-steps')).toHaveText('3');
  await expect(page.getByTestId('policy-version')).toHaveText('v4');

  // Yes runs it: the curve goes on from warm-start step 3, the counters still add up.
  answer = true;
  await page.getByTestId('sft').click();
  await expect(page.getByTestId('warmstart-steps')).toHaveText('6', { timeout: 240_000 });
  await expect(page.getByTestId('chart-svg-warmstart')).toHaveAttribute('data-points', '6');
  await expect(page.getByTestId('engine-state')).toHaveAttribute('data-state', /^(idle|paused)$/, { timeout: 60_000 });
  await expect(page.getByTestId('policy-version')).toHaveText('v7');
  await expect(page.getByTestId('policy-version')).toHaveAttribute('title', /v7 = v0 at load \+ 1 GRPO step \+ 6 applied warm-start steps/);
  expect(dialogs).toHaveLength(2);
  expect(consoleErrors).toEqual([]);
});

test('the multihop long-context setting is picked from the task options, applied into the link and read back from it', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the config panel does not depend on the backend');
  test.setTimeout(180_000);
  await openApp(`${TINY_RUN}&evalEvery=0`);
  await waitForModel();
  const options = page.getByTestId('config-taskOptions');
  const preset = page.getByTestId('config-taskOptions-preset');
  await expect(preset).toHaveValue('default');
  await expect(preset.locator('option')).toHaveText(['default (3–8 operands up to 99)']);

  // Multihop offers its settings; the long context fills the JSON.
  await page.getByTestId('config-task').selectOption('multihop');
  await expect(preset.locator('option')).toHaveText([
    'default (6 chunks × 3)',
    'long context (6 × 4 among filler, does not fit one window)',
    '6 × 3 among filler (fits one window)',
    '4 × 5 among filler (the first-visit demo)',
    'out of distribution (8 chunks, 3 hops)',
  ]);
  await preset.selectOption('long-context');
  await expect(options).toHaveValue('{"chunks":6,"perChunk":4,"filler":24}');

  // A bad value is named inline, as for any field, and blocks Apply.
  await options.fill('{"perChunk":9}');
  await expect(page.getByTestId('config-error-taskOptions')).toHaveText('taskOptions: multihop: perChunk must be an integer in [1, 6] (got 9)');
  await expect(preset).toHaveValue('custom');
  await expect(page.getByTestId('config-apply')).toBeDisabled();
  await preset.selectOption('long-context');
  await expect(page.getByTestId('config-error-taskOptions')).toHaveCount(0);
  await page.getByTestId('config-apply').click();
  // Apply is disabled while the engine takes the config; the store and the link change together
  // once it has, so the plan's task line is what to wait for before reading the link.
  await expect(page.getByTestId('sft-plan-task')).toHaveText('multihop {"chunks":6,"perChunk":4,"filler":24}');
  await expect(page.getByTestId('config-apply')).toBeDisabled();
  const hash = await page.evaluate(() => location.hash);
  expect(hash).toContain('task=multihop');
  expect(hash).toContain(`taskOptions=${encodeURIComponent('{"chunks":6,"perChunk":4,"filler":24}')}`);

  // The link reproduces it.
  await page.reload();
  await waitForModel();
  await expect(page.getByTestId('config-task')).toHaveValue('multihop');
  await expect(options).toHaveValue('{"chunks":6,"perChunk":4,"filler":24}');
  await expect(preset).toHaveValue('long-context');
  await expect(page.getByTestId('hash-errors')).toHaveCount(0);

  // A link with options the task refuses opens with the defaults and says why.
  await page.evaluate(() => {
    location.hash = `preset=tiny&group=2&batch=2&miniBatch=2&workers=1&backend=wasm&evalEvery=0&task=multihop&taskOptions=${encodeURIComponent('{"perChunk":9}')}`;
  });
  await expect(page.getByTestId('hash-errors')).toContainText('taskOptions: multihop: perChunk must be an integer in [1, 6] (got 9)');
  await expect(options).toHaveValue('{}');
  await expect(preset).toHaveValue('default');
  expect(consoleErrors).toEqual([]);
});
