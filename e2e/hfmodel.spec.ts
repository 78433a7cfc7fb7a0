/**
 * A Hugging Face model through the page's one engine (the Checkpoint panel's import, folder and
 * Hub id): a tiny Qwen2 folder made by the project
 * (`init --family qwen2`, here through its core function) is imported with the same input as a
 * checkpoint, warm-started and trained one GRPO step with the same buttons as the toy; its text
 * episodes are drawn as trees, the stepper steps one token by token, slow motion and the frontier
 * read it, Runs compares it with a toy run; a reload restores the session at its policy version.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { folderFiles } from '../src/core/io/hfFolderParts';
import { INIT_DEFAULT_SIZES, initHfFolder } from '../src/core/model/hfInit';
import { writeHfFolder } from '../src/runtime/node/folderWriter';
import { untar } from '../src/app/files/tar';
import { HOSTILE_FOLDERS, writeTinyHfFolder } from '../test/tinyHfFolder';
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
  // The toy loaded: the LoRA settings say whom they are for.
  await expect(page.getByTestId('config-applies-loraR')).toHaveText('(Hugging Face models)');
  await page.getByTestId('import-files').setInputFiles(files);
  await expect(page.getByTestId('model-preset')).toContainText('qwen2 · ');
  // Now the preset is the one a model does not read.
  await expect(page.getByTestId('config-applies-preset')).toHaveText('(the toy model)');
  await expect(page.getByTestId('config-applies-loraR')).toHaveCount(0);
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

  // Slow motion of a step and the frontier: the same panels, over the text model.
  await page.getByTestId('slow-step').click();
  await expect(page.getByTestId('slow-summary')).toContainText(/policy v\d+ → v\d+/, { timeout: 120_000 });
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '2');
  // Its tokens are the tokenizer's pieces, not ids.
  await expect(page.locator('.slow-tokens').first()).toBeVisible();
  await expect(page.locator('.slow-tokens').first()).not.toHaveText(/#\d|<\d+\?>/);
  await page.getByTestId('frontier-methods').fill('delegate,mono');
  await page.getByTestId('frontier-limits').fill('8,24');
  await page.getByTestId('frontier-n').fill('2');
  await page.getByTestId('frontier-run').click();
  await expect(page.getByTestId('frontier-svg')).toHaveAttribute('data-points', '4', { timeout: 120_000 });
  await page.screenshot({ path: info.outputPath('hf-model-slow-frontier.png'), fullPage: true });

  // Runs: the Qwen2 run kept and compared with a toy run (a recorded CLI run of the toy) on the same charts.
  await page.getByTestId('keep-run-name').fill('qwen2 e2e');
  await page.getByTestId('keep-run').click();
  await expect(page.getByTestId('runs-note')).toContainText('kept "qwen2 e2e" (2 GRPO steps)');
  await page
    .getByTestId('import-run-files')
    .setInputFiles([join('runs', 'ablation-naive', 'gating-s1', 'metrics.jsonl'), join('runs', 'ablation-naive', 'gating-s1', 'run.json')]);
  await page.locator('[data-testid="run-row"][data-name="qwen2 e2e"]').getByTestId('run-select').check();
  await page.locator('[data-testid="run-row"][data-name="ablation-naive/gating-s1"]').getByTestId('run-select').check();
  await expect(page.getByTestId('runs-compare')).toHaveAttribute('data-runs', '2');
  await expect(page.getByTestId('runs-legend')).toContainText('qwen2 e2e');
  await expect(page.getByTestId('chart-svg-runs-reward').locator('path[data-series]')).toHaveCount(2);

  // The session is kept: a reload brings the model back at its version, with its step.
  await expect(page.getByTestId('engine-state')).toHaveAttribute('data-state', /^(idle|paused)$/);
  const version = await page.getByTestId('policy-version').textContent();
  await page.waitForTimeout(1500); // the autosave follows the step
  await page.reload();
  await waitForModel();
  await expect(page.getByTestId('session-restored')).toBeVisible();
  await expect(page.getByTestId('model-preset')).toContainText('qwen2 · ');
  await expect(page.getByTestId('policy-version')).toHaveText(version ?? '');
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '2');
  expect(consoleErrors).toEqual([]);
});

test('a hostile folder (a chat template looping 10⁹ times) is refused by name within 5 s, the model loaded before stays, and the next folder loads', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the loader is the same on every backend');
  const root = mkdtempSync(join(tmpdir(), 'hf-hostile-'));
  try {
    await writeTinyHfFolder(join(root, 'good'));
    await writeTinyHfFolder(join(root, 'looping'), HOSTILE_FOLDERS[0].change);
    await openApp('preset=tiny&workers=1&rootMaxTokens=2000');
    await waitForModel();
    await page.getByTestId('import-folder').setInputFiles(join(root, 'good'));
    await expect(page.getByTestId('model-preset')).toContainText('qwen2 · ');
    // The folder picked names the model; what a run will not fit its window is said before one.
    await expect(page.getByTestId('model-source')).toHaveText('good');
    await expect(page.getByTestId('model-warnings')).toContainText('its limit of 2000 and up to');
    await expect(page.getByTestId('model-warnings')).toContainText("past the model's 512-token window");
    await waitForModel();
    const t0 = Date.now();
    await page.getByTestId('import-folder').setInputFiles(join(root, 'looping'));
    await expect(page.getByTestId('import-error')).toContainText('tokenizer_config.json: chat_template: asks range() for 1,000,000,000 numbers', {
      timeout: 5000,
    });
    expect(Date.now() - t0).toBeLessThan(5000);
    await expect(page.getByTestId('import-error')).toContainText('Import failed, model kept');
    await expect(page.getByTestId('model-preset')).toContainText('qwen2 · ');
    await waitForModel();
    await page.getByTestId('import-folder').setInputFiles(join(root, 'good'));
    await expect(page.getByTestId('import-error')).toHaveCount(0);
    await expect(page.getByTestId('import-note')).toContainText('loaded');
    expect(consoleErrors).toEqual([]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('a Hub model id is fetched by the engine from the Hub (here a route answering for huggingface.co); a refused id or a missing model leaves the model as it was', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the loader is the same on every backend');
  const served: string[] = [];
  await page.route('https://huggingface.co/**', async (route) => {
    const m = /^https:\/\/huggingface\.co\/tiny\/qwen2\/resolve\/main\/([\w.-]+)$/.exec(route.request().url());
    served.push(route.request().url());
    const file = m ? join(dir, m[1]) : '';
    if (!m || !existsSync(file)) await route.fulfill({ status: 404, body: 'not found', headers: { 'access-control-allow-origin': '*' } });
    else
      await route.fulfill({
        status: 200,
        body: readFileSync(file),
        headers: { 'access-control-allow-origin': '*', 'content-type': 'application/octet-stream' },
      });
  });
  await openApp('preset=tiny&workers=1');
  await waitForModel();
  await page.getByTestId('hub-id').fill('not an id');
  await page.getByTestId('hub-load').click();
  await expect(page.getByTestId('import-error')).toContainText('is not a Hub model id');
  await page.getByTestId('hub-id').fill('tiny/qwen2');
  await page.getByTestId('hub-load').click();
  await expect(page.getByTestId('model-preset')).toContainText('qwen2 · ');
  await expect(page.getByTestId('import-note')).toContainText('loaded tiny/qwen2 from the Hugging Face Hub');
  expect(served).toContain('https://huggingface.co/tiny/qwen2/resolve/main/config.json');
  await waitForModel();
  await page.getByTestId('hub-id').fill('tiny/none');
  await page.getByTestId('hub-load').click();
  await expect(page.getByTestId('import-error')).toContainText('config.json');
  await expect(page.getByTestId('model-preset')).toContainText('qwen2 · ');
  expect(consoleErrors.filter((e) => !e.includes('404'))).toEqual([]);
});

test('a GPT-2 folder trains LoRA adapters on c_attn with the same buttons; its export is the adapter in PEFT’s format', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the software WebGPU adapter is too slow for a text model here');
  test.setTimeout(300_000);
  const gpt2 = mkdtempSync(join(tmpdir(), 'hf-gpt2-'));
  try {
    await writeHfFolder(
      gpt2,
      initHfFolder('gpt2', { ...INIT_DEFAULT_SIZES, layers: 1, hiddenSize: 32, heads: 2, kvHeads: 2, intermediateSize: 64, maxPositions: 1024 }, 5),
    );
    await openApp('preset=tiny&group=2&batch=2&miniBatch=2&workers=1&loraR=4&rootMaxTokens=16&budgets=8&maxClones=2&maxRounds=1');
    await waitForModel();
    await page.getByTestId('import-folder').setInputFiles(gpt2);
    await expect(page.getByTestId('model-preset')).toContainText('gpt2 · ');
    await waitForModel();
    await page.getByTestId('step').click();
    await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '1', { timeout: 120_000 });
    await expect(page.getByTestId('export-weights')).toBeEnabled();
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-weights').click()]);
    const files = untar(readFileSync(await download.path()));
    const byName = new Map(files.map((f) => [f.name.split('/').pop() as string, f.bytes]));
    expect([...byName.keys()]).toEqual(expect.arrayContaining(['adapter_config.json', 'adapter_model.safetensors', 'provenance.json']));
    const adapterConfig = JSON.parse(new TextDecoder().decode(byName.get('adapter_config.json'))) as { peft_type: string; r: number; target_modules: string[] };
    expect(adapterConfig).toMatchObject({ peft_type: 'LORA', r: 4, target_modules: ['c_attn'] });
    expect(consoleErrors).toEqual([]);
  } finally {
    rmSync(gpt2, { recursive: true, force: true });
  }
});

test('the shipped Qwen2 warm start is a "Start from" choice: the link names it and opens it again', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the loader is the same on every backend');
  await openApp('checkpoint=text-warmstart&workers=1');
  await waitForModel();
  await expect(page.getByTestId('model-preset')).toHaveText(/^qwen2 · [\d.]+M params$/);
  await expect(page.getByTestId('config-checkpoint')).toHaveValue('text-warmstart');
  expect(page.url()).toContain('checkpoint=text-warmstart');
  await page.goto(page.url());
  await waitForModel();
  await expect(page.getByTestId('model-preset')).toHaveText(/^qwen2 · [\d.]+M params$/);
  expect(consoleErrors).toEqual([]);
});
