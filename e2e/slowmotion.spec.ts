import { TINY_RUN, expect, test } from './chromium';

test('a slow-motion step runs one real step and opens it stage by stage, prompt by prompt', async ({ page, backend, openApp, waitForModel, consoleErrors }) => {
  // A step's stages are the engine's whatever the backend; WebGPU steps are tested in training.spec.ts and gradnorm.spec.ts (this took 1.6 min on software WebGPU).
  test.skip(backend !== 'wasm', 'the slow-motion view does not depend on the backend');
  test.setTimeout(300_000);
  await openApp(TINY_RUN);
  await waitForModel();
  await page.getByTestId('slow-step').click();
  await expect(page.getByTestId('slow-summary')).toContainText('policy v0 → v1', { timeout: 120_000 });
  // It is a step of the run: the curves, the counters and the rollout table have it.
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '1');
  await expect(page.getByTestId('policy-version')).toHaveText('v1');
  await expect(page.getByTestId('rollout-row')).toHaveCount(4);
  // It opens at the first prompt whose group trained (prompt 1 unless that one was skipped).
  await expect(page.getByTestId('slow-prompt')).toContainText(/prompt [12] of 2/);
  if ((await page.getByTestId('slow-prompt').textContent())?.includes('prompt 2 of 2')) await page.getByTestId('slow-prev-prompt').click();
  await expect(page.getByTestId('slow-prompt')).toContainText('prompt 1 of 2');
  // Stage 1: the group's G = 2 episodes side by side, no rewards yet.
  await expect(page.getByTestId('slow-episode')).toHaveCount(2);
  await expect(page.getByTestId('slow-reward')).toHaveCount(0);
  // Stage 2: each reward with its terms, summing to R.
  await page.getByTestId('slow-next-stage').click();
  await expect(page.getByTestId('slow-reward')).toHaveCount(2);
  for (const table of await page.getByTestId('slow-reward').all()) {
    const cells = (await table.locator('td.num').allTextContents()).map((t) => Number(t.replace('−', '-')));
    const R = cells.pop() as number;
    expect(Math.abs(cells.reduce((a, b) => a + b, 0) - R)).toBeLessThan(0.003);
  }
  // Stage 3: the group baseline, in words with its numbers, and each episode's advantage.
  await page.getByTestId('slow-next-stage').click();
  await expect(page.getByTestId('slow-stage-note')).toContainText(/A = \(R − |no signal|Dr\. GRPO|left out/);
  await expect(page.getByTestId('slow-advantage')).toHaveCount(2);
  // Stage 4: every context's credit (or its gate).
  await page.getByTestId('slow-stage-3').click();
  const contexts = await page.getByTestId('slow-context').count();
  await expect(page.getByTestId('slow-credit')).toHaveCount(contexts);
  // Stage 5: the update's effect on each generated token, with before → after on hover.
  await page.getByTestId('slow-next-stage').click();
  await expect(page.getByTestId('slow-next-stage')).toBeDisabled();
  await expect(page.getByTestId('slow-delta')).toHaveCount(contexts);
  const tok = page.getByTestId('slow-tokens').first().locator('.tok').first();
  await expect(tok).toHaveAttribute('title', /^p [\d.]+ → [\d.]+ \(log p /);
  // The other prompt of the step, from its first stage's view of the same stage.
  await page.getByTestId('slow-next-prompt').click();
  await expect(page.getByTestId('slow-prompt')).toContainText('prompt 2 of 2');
  await expect(page.getByTestId('slow-next-prompt')).toBeDisabled();
  await expect(page.getByTestId('slow-episode')).toHaveCount(2);
  expect(consoleErrors).toEqual([]);
});
