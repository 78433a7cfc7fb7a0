import { existsSync, readFileSync } from 'node:fs';
import { PRESETS, type PresetName } from '../src/core/model/config';
import { readdirSync } from 'node:fs';
import type { Page } from '@playwright/test';
import { expect, test } from './chromium';

// What the preview server serves: `npm run test:e2e` builds first, copying public/ into dist/.
const SHIPPED = 'dist/checkpoints/warmstart';

/** The shipped checkpoint's preset, from its HF config.json. */
function shippedPreset(): PresetName | null {
  if (!existsSync(`${SHIPPED}/model.safetensors`)) return null;
  const hf = JSON.parse(readFileSync(`${SHIPPED}/config.json`, 'utf8')) as { n_layer: number; n_embd: number };
  const found = (Object.keys(PRESETS) as PresetName[]).find((p) => PRESETS[p].nLayer === hf.n_layer && PRESETS[p].nEmbd === hf.n_embd);
  if (!found) throw new Error(`${SHIPPED}/config.json matches no preset (n_layer ${hf.n_layer}, n_embd ${hf.n_embd})`);
  return found;
}

test('the shipped warm start delegates: a stepper rollout shows clone nodes in its tree', async ({ page, backend, openApp, waitForModel, consoleErrors }) => {
  // The stepper itself is tested on both backends (stepper.spec.ts); here the subject is the
  // checkpoint, and a warm-started rollout of the small preset takes minutes on software WebGPU.
  test.skip(backend !== 'wasm', 'backend-independent; the small preset is too slow on software WebGPU');
  const preset = shippedPreset();
  test.skip(preset === null, `waits for the shipped warm-start checkpoint (${SHIPPED}/, from public/checkpoints/warmstart/)`);
  test.setTimeout(600_000);
  await openApp(`preset=${preset}&group=2&batch=2&miniBatch=2&workers=1`);
  await waitForModel();
  await expect(page.getByTestId('model-source')).toContainText('checkpoints/warmstart');
  await expect(page.getByTestId('model-note')).toHaveCount(0);

  await expectDelegatingRollout(page);
  expect(consoleErrors).toEqual([]);
});

/** Try stepper seeds until a rollout spawns clones; then its tree must show them and their answers. */
async function expectDelegatingRollout(page: Page): Promise<void> {
  // The warm start delegates on some problems, not all: try seeds until one spawns clones.
  let clones = 0;
  for (let seed = 0; seed < 24 && clones === 0; seed++) {
    await page.getByTestId('stepper-seed').fill(String(seed));
    await page.getByTestId('stepper-start').click();
    await expect(page.getByTestId('stepper-generated')).toHaveAttribute('data-generated', '0');
    await page.getByTestId('stepper-end').click();
    await expect(page.getByTestId('stepper-generated')).toHaveAttribute('data-done', 'true', { timeout: 120_000 });
    clones = await page.locator('[data-testid="stepper-context"][data-role="clone"]').count();
  }
  expect(clones, 'no delegating rollout in 24 seeds').toBeGreaterThan(0);

  await page.getByTestId('stepper-tree').click();
  const cloneNodes = page.locator('[data-testid="tree-node"][data-role="clone"]');
  await expect(cloneNodes).toHaveCount(clones);
  // The root's context holds the clones' answers, written by the runtime (writer 'i').
  await page.locator('[data-testid="tree-node"][data-role="root"]').click();
  await expect(page.getByTestId('context-view').locator('[data-writer="i"]').first()).toBeVisible();
  await cloneNodes.first().click();
  await expect(page.getByTestId('context-view')).toContainText('<clone>');
}

// The tiny warm start (public/checkpoints/warmstart-tiny, beside the small one) is fast enough for
// software WebGPU; it is loaded the way a user loads weights: by importing its files.
const TINY = 'public/checkpoints/warmstart-tiny';

test('on WebGPU, an imported tiny warm start delegates and its tree shows the clones', async ({ page, backend, openApp, waitForModel, consoleErrors }) => {
  test.skip(backend !== 'webgpu', 'the wasm project runs the shipped small warm start above');
  test.setTimeout(600_000);
  await openApp('preset=tiny&group=2&batch=2&miniBatch=2&workers=1');
  await waitForModel();
  const files = readdirSync(TINY).map((name) => `${TINY}/${name}`);
  await page.getByTestId('import-files').setInputFiles(files);
  await expect(page.getByTestId('model-source')).toContainText('model.safetensors', { timeout: 60_000 });
  await expectDelegatingRollout(page);
  expect(consoleErrors).toEqual([]);
});

test('the shipped two-task GRPO checkpoint opens on multihop from a link; its tree shows the chunk each clone read and what it found', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'backend-independent; the small preset is too slow on software WebGPU');
  test.setTimeout(600_000);
  const options = encodeURIComponent('{"chunks":5,"perChunk":5}');
  await openApp(`task=multihop&taskOptions=${options}&checkpoint=selfcest-mix&group=2&batch=2&miniBatch=2&workers=1&evalEvery=0`);
  await waitForModel();
  await expect(page.getByTestId('model-source')).toContainText('checkpoints/selfcest-mix');
  await expect(page.getByTestId('config-checkpoint')).toHaveValue('selfcest-mix');
  await expect(page.getByTestId('hash-errors')).toHaveCount(0);

  await page.getByTestId('stepper-seed').fill('3');
  await page.getByTestId('stepper-start').click();
  await page.getByTestId('stepper-end').click();
  await expect(page.getByTestId('stepper-generated')).toHaveAttribute('data-done', 'true', { timeout: 180_000 });
  // One clone per chunk for each hop: the root fans out over the five keys.
  const clones = await page.locator('[data-testid="stepper-context"][data-role="clone"]').count();
  expect(clones).toBeGreaterThanOrEqual(5);
  await page.getByTestId('stepper-tree').click();
  const cloneNodes = page.locator('[data-testid="tree-node"][data-role="clone"]');
  await expect(cloneNodes).toHaveCount(clones);
  // Each clone names its chunk key and question, the assignments it read and its answer.
  for (let i = 0; i < clones; i++) {
    await expect(cloneNodes.nth(i).locator('title')).toHaveText(
      /\nk[1-5] ▸ [a-z]\?\nread: ([a-z](\d+|[a-z])\. ){4}[a-z](\d+|[a-z])\.\ntok \d+\/\d+ · ans (none|[a-z]|\d+)/,
    );
  }
  expect(consoleErrors).toEqual([]);
});
