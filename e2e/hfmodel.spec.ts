/**
 * A Hugging Face model through the page's one engine: a tiny Qwen2 folder made by the project
 * (`init --family qwen2`, here through its core function) is imported with the same input as a
 * checkpoint, warm-started and trained one GRPO step with the same buttons as the toy; its text
 * episodes are drawn as trees, the stepper steps one token by token; a reload restores the session
 * at its policy version.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { folderFiles } from '../src/core/io/hfFolderParts';
import { INIT_DEFAULT_SIZES, initHfFolder } from '../src/core/model/hfInit';
import { writeHfFolder } from '../src/runtime/node/folderWriter';
import { expect, test } from './chromium';

let dir = '';
let files: string[] = [];

test.beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hf-page-'));
  const parts = initHfFolder('qwen2', { ...INIT_DEFAULT_SIZES, layers: 1, hiddenSize: 32, heads: 2, kvHeads: 1, intermediateSize: 48, maxPositions: 1024 }, 7);
  await writeHfFolder(dir, parts);
  files = folderFiles(parts).map((f) => join(dir, f.name));
});

test.afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('a Qwen2 folder imported in the page warm-starts, takes a GRPO step with the toy’s buttons, draws its text episodes and survives a reload', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}, info) => {
  test.skip(backend !== 'wasm', 'the software WebGPU adapter is too slow for a text model here');
  test.setTimeout(300_000);
  await openApp('preset=tiny&group=2&batch=2&miniBatch=2&workers=1&loraR=0&rootMaxTokens=24&budgets=8&maxClones=2&maxRounds=1&sftBatchTokens=300');
  await waitForModel();
  await page.getByTestId('import-files').setInputFiles(files);
  await expect(page.getByTestId('model-preset')).toContainText('qwen2 · ');
  await expect(page.getByTestId('import-note')).toContainText('config.json');
  await waitForModel();

  await page.getByTestId('sft-steps').fill('2');
  await page.getByTestId('sft').click();
  await expect(page.getByTestId('sft-progress')).toHaveAttribute('data-step', '2', { timeout: 120_000 });
  await expect(page.getByTestId('warmstart-steps')).toHaveText('2');
  await expect(page.getByTestId('engine-state')).toHaveAttribute('data-state', /^(idle|paused)$/);

  await page.getByTestId('step').click();
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '1', { timeout: 120_000 });
  await expect(page.getByTestId('policy-version')).toHaveText(/^v\d+$/);
  const version = await page.getByTestId('policy-version').textContent();
  // The episode's tree, its root context in the chat template's text.
  const tree = page.getByTestId('tree-svg').first();
  await tree.scrollIntoViewIfNeeded();
  await expect(tree).toBeVisible();
  await page.screenshot({ path: info.outputPath('hf-model-step.png'), fullPage: true });

  // The token-by-token stepper over the same model: its top-k in the tokenizer's pieces, then the whole episode as a tree.
  await page.getByTestId('stepper-seed').fill('3');
  await page.getByTestId('stepper-start').click();
  await expect(page.getByTestId('stepper-context')).toHaveCount(1);
  await page.getByTestId('stepper-token').click();
  await expect(page.getByTestId('stepper-topk').first()).toBeVisible();
  await page.getByTestId('stepper-end').click();
  await page.getByTestId('stepper-tree').click();
  await expect(page.getByTestId('tree-node').first()).toHaveAttribute('data-role', 'root');
  await page.screenshot({ path: info.outputPath('hf-model-stepper.png'), fullPage: true });

  // The session is kept: a reload brings the model back at its version, with its step.
  await expect(page.getByTestId('engine-state')).toHaveAttribute('data-state', /^(idle|paused)$/);
  await page.waitForTimeout(1500); // the autosave follows the step
  await page.reload();
  await waitForModel();
  await expect(page.getByTestId('session-restored')).toBeVisible();
  await expect(page.getByTestId('model-preset')).toContainText('qwen2 · ');
  await expect(page.getByTestId('policy-version')).toHaveText(version ?? '');
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '1');
  expect(consoleErrors).toEqual([]);
});
