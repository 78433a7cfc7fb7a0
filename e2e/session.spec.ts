import { readFile } from 'node:fs/promises';
import type { Download, Page } from '@playwright/test';
import { TINY_RUN, expect, test } from './chromium';

async function downloadText(page: Page, testId: string): Promise<string> {
  const [download]: [Download, void] = await Promise.all([page.waitForEvent('download'), page.getByTestId(testId).click()]);
  return readFile(await download.path(), 'utf8');
}

/** The file names of the weights the current saved session points at, read from IndexedDB. */
function savedWeightFiles(page: Page): Promise<string[]> {
  return page.evaluate(
    () =>
      new Promise<string[]>((resolve, reject) => {
        const open = indexedDB.open('selfcest-playground');
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const store = open.result.transaction('session').objectStore('session');
          const pointer = store.get('current');
          pointer.onsuccess = () => {
            const files = store.get((pointer.result as { weightsKey: string }).weightsKey);
            files.onsuccess = () => resolve(Object.keys(files.result as object).sort());
          };
        };
      }),
  );
}

test('a reload restores the session, and the exported weights import at their policy version', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the session store does not depend on the backend');
  test.setTimeout(300_000);
  await openApp(`${TINY_RUN}&evalEvery=0`);
  await waitForModel();
  await expect(page.getByTestId('session-restored')).toHaveCount(0);
  for (let i = 1; i <= 2; i++) {
    await page.getByTestId('step').click();
    await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', String(i), { timeout: 120_000 });
    await expect(page.getByTestId('step')).toBeEnabled();
  }
  await expect(page.getByTestId('policy-version')).toHaveText('v2');
  await expect(page.getByTestId('session-saved')).toHaveAttribute('data-step', '2', { timeout: 30_000 });
  await expect(page.getByTestId('rollout-row')).toHaveCount(8);
  // The save holds the GRPO optimizer's moments beside the weights.
  expect(await savedWeightFiles(page)).toEqual(expect.arrayContaining(['model.safetensors', 'optimizer-grpo.safetensors']));

  // Reload: the trained weights, curves and rollouts come back, and training goes on from there.
  await page.reload();
  await expect(page.getByTestId('session-restored')).toHaveAttribute('data-step', '2', { timeout: 120_000 });
  await waitForModel();
  await expect(page.getByTestId('policy-version')).toHaveText('v2');
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '2');
  await expect(page.getByTestId('rollout-row')).toHaveCount(8);
  await page.getByTestId('step').click();
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '3', { timeout: 120_000 });
  await expect(page.getByTestId('policy-version')).toHaveText('v3');
  // Exports after the reload hold the steps before it too.
  await expect(page.getByTestId('step')).toBeEnabled();
  expect(
    (await downloadText(page, 'export-metrics-jsonl'))
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { step: number }).step),
  ).toEqual([1, 2, 3]);
  expect((await downloadText(page, 'export-traces')).trim().split('\n')).toHaveLength(12);

  // The page's own .tar imports, at its policy version, with its history.
  await expect(page.getByTestId('step')).toBeEnabled();
  const [download]: [Download, void] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-weights').click()]);
  const tarPath = await download.path();
  expect(download.suggestedFilename()).toMatch(/\.tar$/);
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.accept();
  });
  await page.getByTestId('import-files').setInputFiles(tarPath);
  await expect(page.getByTestId('import-note')).toContainText('loaded', { timeout: 60_000 });
  await expect(page.getByTestId('import-error')).toHaveCount(0);
  await expect(page.getByTestId('policy-version')).toHaveText('v3');
  expect(dialogs.some((m) => m.includes('discard'))).toBe(true);

  // The imported model is the session now; Start fresh goes back to the shipped tiny warm start.
  await expect(page.getByTestId('session-saved')).toHaveAttribute('data-policy-version', '3', { timeout: 30_000 });
  await page.reload();
  await expect(page.getByTestId('session-restored')).toHaveAttribute('data-policy-version', '3', { timeout: 120_000 });
  await waitForModel();
  await page.getByTestId('start-fresh').click();
  await expect(page.getByTestId('policy-version')).toHaveText('v0', { timeout: 60_000 });
  await expect(page.getByTestId('model-source')).toContainText('checkpoints/warmstart-tiny/');
  await page.reload();
  await waitForModel();
  await expect(page.getByTestId('session-restored')).toHaveCount(0);
  expect(consoleErrors).toEqual([]);
});

/**
 * A tab closed while training, at different moments: the restored session agrees with itself
 * (the step of its record, the GRPO steps and policy version the status bar shows, the points of
 * the curves), whatever the save in flight was doing.
 */
test('a tab closed while training restores a session whose step, policy version and curves agree', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the session store does not depend on the backend');
  test.setTimeout(300_000);
  page.on('dialog', (d) => void d.accept()); // the unload warning while training: leave anyway
  await openApp(`${TINY_RUN}&evalEvery=0`);
  await waitForModel();
  // Steps of the tiny preset take a fraction of a second: several per metrics batch and per save.
  for (const [round, waitSteps] of [7, 23, 41].entries()) {
    const trainButton = page.getByTestId('train');
    await expect(trainButton).toBeEnabled({ timeout: 60_000 });
    await trainButton.click();
    const start = Number((await page.getByTestId('grpo-steps').textContent()) ?? '0');
    // A save of this round has landed (on a loaded machine the first can take a while), then training goes on:
    // the reload below comes with later steps unsaved and, often, a save in flight.
    const savedStep = async () =>
      Number(
        (await page
          .getByTestId('session-saved')
          .getAttribute('data-step', { timeout: 1000 })
          .catch(() => null)) ?? '0',
      );
    await expect.poll(savedStep, { timeout: 120_000 }).toBeGreaterThan(start);
    const saved = await savedStep();
    await expect.poll(async () => Number(await page.getByTestId('grpo-steps').textContent()), { timeout: 120_000 }).toBeGreaterThanOrEqual(saved + waitSteps);
    // Closed in the middle of training (the reload stands for closing and reopening the tab).
    await page.reload();
    const restored = page.getByTestId('session-restored');
    await expect(restored).toBeVisible({ timeout: 120_000 });
    await waitForModel();
    const step = await restored.getAttribute('data-step');
    const version = await restored.getAttribute('data-policy-version');
    expect(Number(step), `round ${round}`).toBeGreaterThan(0);
    await expect(page.getByTestId('grpo-steps'), `round ${round}`).toHaveText(step!);
    await expect(page.getByTestId('policy-version'), `round ${round}`).toHaveText(`v${version}`);
    await expect(page.getByTestId('metrics-steps'), `round ${round}`).toHaveAttribute('data-steps', step!);
  }
  expect(consoleErrors).toEqual([]);
});
