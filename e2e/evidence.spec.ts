import type { Page } from '@playwright/test';
import { TINY_RUN, expect, test } from './chromium';

interface Row {
  correct: boolean;
  clones: number;
  violations: number;
  gated: boolean;
}

async function rowsOf(page: Page): Promise<Row[]> {
  return page.getByTestId('rollout-row').evaluateAll((els) =>
    els.map((e) => ({
      correct: e.getAttribute('data-correct') === 'true',
      clones: Number(e.getAttribute('data-clones')),
      violations: Number(e.getAttribute('data-violations')),
      gated: e.getAttribute('data-gated') === 'true',
    })),
  );
}

const FILTERS: Record<string, (r: Row) => boolean> = {
  correct: (r) => r.correct,
  wrong: (r) => !r.correct,
  delegating: (r) => r.clones > 0,
  violation: (r) => r.violations > 0,
  gated: (r) => r.gated,
};

test('the rollout filters show exactly the rollouts they name, and the count line says how many of how many', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the table does not depend on the backend');
  test.setTimeout(300_000);
  await openApp(`${TINY_RUN}&evalEvery=0&group=3&batch=4`);
  await waitForModel();
  for (let i = 1; i <= 2; i++) {
    await page.getByTestId('step').click();
    await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', String(i), { timeout: 120_000 });
    await expect(page.getByTestId('step')).toBeEnabled();
  }
  await expect(page.getByTestId('rollout-row')).toHaveCount(24);
  const all = await rowsOf(page);
  const count = page.getByTestId('rollout-count');
  await expect(count).toHaveAttribute('data-kept', '24');
  for (const [filter, keep] of Object.entries(FILTERS)) {
    await page.getByTestId('rollout-filter').selectOption(filter);
    const expected = all.filter(keep).length;
    await expect(page.getByTestId('rollout-row')).toHaveCount(expected);
    await expect(count).toHaveAttribute('data-matching', String(expected));
    expect((await rowsOf(page)).every(keep)).toBe(true);
    if (expected === 0) await expect(page.getByText('no kept rollout matches this filter')).toBeVisible();
  }
  // correct and wrong split what is kept.
  expect(all.filter(FILTERS.correct).length + all.filter(FILTERS.wrong).length).toBe(24);
  await page.getByTestId('rollout-filter').selectOption('all');
  await expect(page.getByTestId('rollout-row')).toHaveCount(24);
  expect(consoleErrors).toEqual([]);
});

test('a running step shows its progress; Pause says "pausing…" and what it still finishes, at once, then "paused"', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  // The states are the page's and the engine loop's, whatever the backend; on software WebGPU this costs 3 minutes of CI.
  test.skip(backend !== 'wasm', 'the pausing state does not depend on the backend');
  test.setTimeout(300_000);
  // An evaluation of 256 problems after every step: the loop is mostly busy finishing something.
  await openApp(`${TINY_RUN}&evalEvery=1&evalN=256`);
  await waitForModel();
  const state = page.getByTestId('engine-state');
  await page.getByTestId('train').first().click();
  await expect(state).toHaveAttribute('data-state', 'training');
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '1', { timeout: 120_000 });
  // Inside a step or an evaluation the status bar says which and how far.
  await expect(page.getByTestId('progress')).toHaveText(/^(step \d+: (rollouts|updates)|evaluation: (delegate|mono) at \d+ \(step \d+\)) \d+\/\d+$/);
  await page.getByTestId('pause').click();
  await expect(state).toHaveAttribute('data-state', 'pausing');
  await expect(state).toHaveText(/^pausing… \(finishing (step \d+|the evaluation at step \d+)\)/);
  await expect(page.getByTestId('train').first()).toBeDisabled();
  await expect(state).toHaveAttribute('data-state', 'paused', { timeout: 180_000 });
  await expect(page.getByTestId('progress')).toHaveCount(0);
  await expect(page.getByTestId('train').first()).toBeEnabled();
  expect(consoleErrors).toEqual([]);
});

test('a first-use hint says what Train does and where to look, until dismissed (also after a reload)', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the hint does not depend on the backend');
  await openApp(TINY_RUN);
  await waitForModel();
  const hint = page.getByTestId('first-use-hint');
  await expect(hint).toContainText('Train');
  await expect(hint).toContainText('slow motion');
  await page.getByTestId('hint-dismiss').click();
  await expect(hint).toHaveCount(0);
  await page.reload();
  await waitForModel();
  await expect(page.getByTestId('first-use-hint')).toHaveCount(0);
  expect(consoleErrors).toEqual([]);
});
