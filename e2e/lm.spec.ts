/**
 * A real language model in the page: a Hugging Face folder (a tiny random Qwen2 with a BPE
 * tokenizer and chat template, made by test/python/hf_tokenizer_fixture.py) picked with the folder
 * input, loaded in the language-model worker on wasm; its text episodes drawn as delegation trees
 * with the model's own token strings; a GRPO step over LoRA adapters with the run config's
 * settings; the adapter saved in PEFT's format. Skipped, naming what is missing, without torch,
 * tokenizers and transformers.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bfloat16Folder } from '../test/halfDecoder';
import { HOSTILE_FOLDERS, writeTinyHfFolder } from '../test/tinyHfFolder';
import { pythonWith } from '../test/python/python';
import { expect, test } from './chromium';

const py = pythonWith('torch', 'tokenizers', 'transformers');
let dir = '';

test.beforeAll(() => {
  if (py.python === null) return;
  dir = mkdtempSync(join(tmpdir(), 'lm-page-'));
  const r = spawnSync(py.python, ['test/python/hf_tokenizer_fixture.py', join(dir, 'tiny-qwen2'), 'model'], { encoding: 'utf8', timeout: 240_000 });
  if (r.status !== 0) throw new Error(`hf_tokenizer_fixture.py failed: ${r.stderr || r.error?.message}`);
});

test.afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('a Hugging Face folder picked in the page rolls out with trees drawn, trains a GRPO step over LoRA and saves the adapter', async ({
  page,
  backend,
  openApp,
  consoleErrors,
}, info) => {
  test.skip(py.python === null, `no Python with torch, tokenizers and transformers: ${py.why}`);
  test.skip(backend !== 'wasm', 'the language model runs on wasm here (the software WebGPU adapter is too slow for it)');
  test.setTimeout(300_000);
  await openApp('batch=2&miniBatch=1&group=2&backend=wasm');
  const panel = page.getByTestId('lm-panel');
  await panel.scrollIntoViewIfNeeded();
  await page.getByTestId('lm-folder').setInputFiles(join(dir, 'tiny-qwen2'));
  await expect(page.getByTestId('lm-info')).toContainText('tiny-qwen2: qwen2, ');
  await expect(page.getByTestId('lm-info')).toContainText('held by wasm');
  await expect(page.getByTestId('lm-info')).toContainText(/loaded in \d+ ms/);
  await panel.getByLabel('root tokens').fill('16');
  await panel.getByLabel('clone budget').fill('8');
  await page.getByTestId('lm-rollout').click();
  const tree = page.getByTestId('lm-tree');
  await expect(tree.getByTestId('tree-svg')).toBeVisible();
  await expect(tree.locator('[data-role="root"]')).toHaveCount(1);
  // The root's context: its prompt, as the chat template rendered it, and what the model wrote, token by token.
  await expect(tree.getByTestId('context-view')).toContainText('Calculate the value of');
  const pieces = tree.getByTestId('text-only').locator('[data-writer="g"]');
  expect(await pieces.count()).toBeGreaterThan(0);
  expect(await pieces.count()).toBeLessThanOrEqual(16);
  await expect(page.getByTestId('lm-episode-row')).toHaveCount(2);
  // Another row opens its episode's tree.
  await page.getByTestId('lm-episode-row').nth(1).click();
  await expect(page.getByTestId('lm-episode-row').nth(1)).toHaveClass(/selected/);

  // Step through an episode: the next token and its candidates, one token at a time, then to the end.
  await page.getByTestId('lm-step-start').click();
  await expect(page.getByTestId('lm-next-token')).toBeVisible();
  await expect(page.getByTestId('lm-candidates').locator('tbody tr')).toHaveCount(5);
  const rootGenerated = page.getByTestId('lm-stepper-context').first().locator('[data-writer="g"]');
  await expect(rootGenerated).toHaveCount(0);
  await page.getByTestId('lm-step-token').click();
  await expect(rootGenerated).toHaveCount(1);
  await page.getByTestId('lm-step-token').click();
  await expect(rootGenerated).toHaveCount(2);
  await page.getByTestId('lm-step-end').click();
  await expect(page.getByTestId('lm-stepper')).toContainText('The episode ended');
  await expect(page.getByTestId('lm-episode-row')).toHaveCount(3);
  await panel.screenshot({ path: info.outputPath('lm-stepper.png') });

  await page.getByTestId('lm-train-step').click();
  const metrics = page.getByTestId('lm-metrics');
  await expect(metrics.locator('tbody tr')).toHaveCount(1);
  await expect(metrics.locator('tbody tr td').first()).toHaveText('1');
  // Two prompts × two episodes of the step join the episode list.
  await expect(page.getByTestId('lm-episode-row')).toHaveCount(7);
  // The frontier: delegating and monolithic at two root limits, with intervals, drawn.
  await panel.getByTestId('lm-frontier-limits').fill('4,8');
  await panel.getByLabel('problems').fill('2');
  await page.getByTestId('lm-frontier').click();
  await expect(page.getByTestId('lm-frontier-chart').getByTestId('frontier-svg')).toBeVisible();
  const points = page.getByTestId('lm-frontier-chart').getByTestId('frontier-point');
  await expect(points).toHaveCount(4);
  expect(
    await points.evaluateAll((els) => els.map((e) => `${e.getAttribute('data-method')}@${e.getAttribute('data-limit')} n${e.getAttribute('data-n')}`).sort()),
  ).toEqual(['delegate@4 n2', 'delegate@8 n2', 'mono@4 n2', 'mono@8 n2']);
  // Slow motion of the step: its first prompt's group, each token coloured by how the update moved it.
  await expect(page.getByTestId('lm-anatomy-episode')).toHaveCount(2);
  await expect(page.getByTestId('lm-anatomy')).toContainText('Slow motion of GRPO step 1');
  await panel.screenshot({ path: info.outputPath('lm-panel.png') });

  const [config, weights] = await Promise.all([
    page.waitForEvent('download', (d) => d.suggestedFilename() === 'adapter_config.json'),
    page.waitForEvent('download', (d) => d.suggestedFilename() === 'adapter_model.safetensors'),
    page.getByTestId('lm-export-adapter').click(),
  ]);
  const adapterConfig = JSON.parse(readFileSync(await config.path(), 'utf8')) as { peft_type: string; r: number; target_modules: string[] };
  expect(adapterConfig.peft_type).toBe('LORA');
  expect(adapterConfig.r).toBe(8);
  expect(readFileSync(await weights.path()).byteLength).toBeGreaterThan(1000);
  expect(consoleErrors).toEqual([]);
});

test('a hostile folder (a chat template looping 10⁹ times) is refused by name within 5 s, the model loaded before stays, and the page loads the next folder', async ({
  page,
  backend,
  openApp,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'the language model runs on wasm here');
  const root = mkdtempSync(join(tmpdir(), 'lm-hostile-'));
  try {
    await writeTinyHfFolder(join(root, 'good'));
    await writeTinyHfFolder(join(root, 'looping'), HOSTILE_FOLDERS[0].change);
    await openApp('backend=wasm');
    await page.getByTestId('lm-panel').scrollIntoViewIfNeeded();
    await page.getByTestId('lm-folder').setInputFiles(join(root, 'good'));
    await expect(page.getByTestId('lm-info')).toContainText('good: qwen2, ');
    const t0 = Date.now();
    await page.getByTestId('lm-folder').setInputFiles(join(root, 'looping'));
    await expect(page.getByTestId('lm-error')).toContainText('tokenizer_config.json: chat_template: asks range() for 1,000,000,000 numbers', { timeout: 5000 });
    expect(Date.now() - t0).toBeLessThan(5000);
    // Nothing changed: the model loaded before stays loaded, and the error says so.
    await expect(page.getByTestId('lm-error')).toContainText('nothing changed: good loaded before is still loaded');
    await expect(page.getByTestId('lm-info')).toContainText('good: qwen2, ');
    // The page goes on: the next folder loads and rolls out.
    await page.getByTestId('lm-folder').setInputFiles(join(root, 'good'));
    await expect(page.getByTestId('lm-info')).toContainText('good: qwen2, ');
    await expect(page.getByTestId('lm-error')).toHaveCount(0);
    await page.getByTestId('lm-panel').getByLabel('root tokens').fill('4');
    await page.getByTestId('lm-rollout').click();
    await expect(page.getByTestId('lm-episode-row')).toHaveCount(2);
    expect(consoleErrors).toEqual([]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('a Hub model id is fetched by the worker from the Hub (here a mirror answering for huggingface.co) under the page’s policy', async ({
  page,
  backend,
  openApp,
  consoleErrors,
}) => {
  test.skip(py.python === null, `no Python with torch, tokenizers and transformers: ${py.why}`);
  test.skip(backend !== 'wasm', 'the language model runs on wasm here');
  const served: string[] = [];
  await page.route('https://huggingface.co/**', async (route) => {
    const m = /^https:\/\/huggingface\.co\/tiny\/qwen2\/resolve\/main\/([\w.-]+)$/.exec(route.request().url());
    served.push(route.request().url());
    const file = m ? join(dir, 'tiny-qwen2', m[1]) : '';
    if (!m || !existsSync(file)) await route.fulfill({ status: 404, body: 'not found', headers: { 'access-control-allow-origin': '*' } });
    else
      await route.fulfill({
        status: 200,
        body: readFileSync(file),
        headers: { 'access-control-allow-origin': '*', 'content-type': 'application/octet-stream' },
      });
  });
  await openApp('backend=wasm');
  await page.getByTestId('lm-panel').scrollIntoViewIfNeeded();
  await page.getByTestId('lm-hub-id').fill('not an id');
  await page.getByTestId('lm-hub-load').click();
  await expect(page.getByTestId('lm-error')).toContainText('is not a Hub model id');
  await page.getByTestId('lm-hub-id').fill('tiny/qwen2');
  await page.getByTestId('lm-hub-load').click();
  await expect(page.getByTestId('lm-info')).toContainText('tiny/qwen2: qwen2, ');
  expect(served).toContain('https://huggingface.co/tiny/qwen2/resolve/main/config.json');
  await page.getByTestId('lm-hub-id').fill('tiny/none');
  await page.getByTestId('lm-hub-load').click();
  await expect(page.getByTestId('lm-error')).toContainText('the folder has no config.json');
  // A refused model leaves the one loaded before as it was, and the error says it is still the one loaded.
  await expect(page.getByTestId('lm-error')).toContainText('nothing changed: tiny/qwen2 loaded before is still loaded');
  await expect(page.getByTestId('lm-info')).toContainText('tiny/qwen2: qwen2, ');
  expect(consoleErrors.filter((e) => !e.includes('404'))).toEqual([]);
});

test('on WebGPU a bfloat16 checkpoint stays 16-bit in GPU memory and rolls out with its tree drawn', async ({
  page,
  backend,
  openApp,
  consoleErrors,
}, info) => {
  test.skip(py.python === null, `no Python with torch, tokenizers and transformers: ${py.why}`);
  test.skip(backend !== 'webgpu', 'the WebGPU widening of 16-bit weights');
  test.setTimeout(300_000);
  // The fixture's weights truncated to bfloat16, as checkpoints are usually saved.
  const bf16 = join(dir, 'tiny-qwen2-bf16');
  await bfloat16Folder(join(dir, 'tiny-qwen2'), bf16);
  await openApp('backend=webgpu');
  const panel = page.getByTestId('lm-panel');
  await panel.scrollIntoViewIfNeeded();
  await expect(page.getByTestId('lm-storage')).toHaveValue('auto');
  await page.getByTestId('lm-folder').setInputFiles(bf16);
  await expect(page.getByTestId('lm-info')).toContainText('held by webgpu');
  // Every matrix (embedding, 7 projections × 2 layers) is held 16-bit: half its float32 bytes.
  await expect(page.getByTestId('lm-info')).toContainText('(15 matrices 16-bit)');
  await panel.getByLabel('root tokens').fill('6');
  await panel.getByLabel('clone budget').fill('4');
  await panel.getByLabel('episodes').fill('1');
  await page.getByTestId('lm-rollout').click();
  const tree = page.getByTestId('lm-tree');
  await expect(tree.getByTestId('tree-svg')).toBeVisible({ timeout: 240_000 });
  await expect(tree.locator('[data-role="root"]')).toHaveCount(1);
  expect(await tree.getByTestId('text-only').locator('[data-writer="g"]').count()).toBeGreaterThan(0);
  await panel.screenshot({ path: info.outputPath('lm-webgpu-bf16.png') });
  expect(consoleErrors).toEqual([]);
});

test('a GPT-2 folder runs in the same panel: its c_attn as the LoRA target, its episodes drawn, a GRPO step', async ({
  page,
  backend,
  openApp,
  consoleErrors,
}, info) => {
  test.skip(py.python === null, `no Python with torch, tokenizers and transformers: ${py.why}`);
  test.skip(backend !== 'wasm', 'the language model runs on wasm here');
  test.setTimeout(300_000);
  const gpt2 = join(dir, 'tiny-gpt2');
  const r = spawnSync(py.python as string, ['test/python/hf_tokenizer_fixture.py', gpt2, 'model', 'gpt2'], { encoding: 'utf8', timeout: 240_000 });
  expect(r.status, r.stderr).toBe(0);
  await openApp('batch=2&miniBatch=1&group=2&backend=wasm');
  const panel = page.getByTestId('lm-panel');
  await panel.scrollIntoViewIfNeeded();
  await page.getByTestId('lm-folder').setInputFiles(gpt2);
  await expect(page.getByTestId('lm-info')).toContainText('tiny-gpt2: gpt2, ');
  await expect(panel.getByLabel('targets')).toHaveValue('c_attn');
  await panel.getByLabel('root tokens').fill('10');
  await panel.getByLabel('clone budget').fill('6');
  await page.getByTestId('lm-rollout').click();
  const tree = page.getByTestId('lm-tree');
  await expect(tree.getByTestId('tree-svg')).toBeVisible();
  await expect(tree.getByTestId('context-view')).toContainText('Calculate the value of');
  await page.getByTestId('lm-train-step').click();
  await expect(page.getByTestId('lm-metrics').locator('tbody tr')).toHaveCount(1);
  await panel.screenshot({ path: info.outputPath('lm-gpt2.png') });
  expect(consoleErrors).toEqual([]);
});
