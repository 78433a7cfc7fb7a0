import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { Page } from '@playwright/test';
import { tarArchive, untar } from '../src/app/files/tar';
import { TINY_RUN, expect, test } from './chromium';

const TEXT = '<root>12+3*4<sep>=12+12=24<ans>24<eos>';

async function downloadText(page: Page, testId: string): Promise<string> {
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId(testId).click()]);
  return readFile(await download.path(), 'utf8');
}

/**
 * A CLI run folder from committed files only: the shipped tiny weights (a run's save has its
 * weights; the committed run folders do not), and a committed run's metrics.jsonl (25 steps),
 * state.json and its sample of traces as traces.jsonl (32 rollouts at steps 5, 10, 20, 25).
 */
async function cliRunFolder(): Promise<{ name: string; bytes: Uint8Array }[]> {
  const weights = ['config.json', 'model.safetensors', 'selfcest.json', 'tokenizer.json', 'tokenizer_config.json'].map((name) => [
    name,
    join('public/checkpoints/warmstart-tiny', name),
  ]);
  const run = [
    ['metrics.jsonl', 'runs/ablation/gating-s1/metrics.jsonl'],
    ['state.json', 'runs/ablation/gating-s1/state.json'],
    ['traces.jsonl', 'runs/ablation/gating-s1/traces.sample.jsonl'],
  ];
  return Promise.all([...weights, ...run].map(async ([name, path]) => ({ name, bytes: new Uint8Array(await readFile(path)) })));
}

interface Logits {
  tokens: number[];
  logits: number[][];
}

function pageLogits(page: Page, text: string): Promise<Logits> {
  return page.evaluate((t) => {
    if (!window.selfcest) throw new Error('window.selfcest is missing');
    return window.selfcest.logits(t);
  }, text);
}

function maxAbsDiff(a: number[][], b: number[][]): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  a.forEach((row, i) => {
    expect(row.length).toBe(b[i].length);
    row.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - b[i][j]))));
  });
  return worst;
}

test('exported weights load in the CLI and give the page engine logits; the CLI trains on them and its run imports back', async ({
  page,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.setTimeout(300_000);
  await openApp(TINY_RUN);
  await waitForModel();
  // One GRPO step first, so the export is of trained weights, not of the seeded init.
  await page.getByTestId('step').click();
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '1', { timeout: 120_000 });
  await expect(page.getByTestId('export-weights')).toBeEnabled();

  const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-weights').click()]);
  expect(download.suggestedFilename()).toMatch(/^selfcest-tiny-v\d+\.tar$/);
  const files = untar(await readFile(await download.path()));
  const names = files.map((f) => f.name.split('/').pop());
  expect(names).toContain('model.safetensors');
  expect(names).toContain('config.json');

  const dir = await mkdtemp(join(tmpdir(), 'selfcest-export-'));
  try {
    for (const f of files) {
      const path = join(dir, f.name);
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, f.bytes);
    }
    const folder = join(dir, files[0].name.split('/')[0]);
    const { stdout } = await promisify(execFile)('npx', ['tsx', 'src/cli/main.ts', 'logits', '--checkpoint', folder, '--text', TEXT, '--json'], {
      maxBuffer: 64 << 20,
      timeout: 120_000,
    });
    const cli = JSON.parse(stdout.trim().split('\n').pop() ?? '') as Logits;
    const browser = await pageLogits(page, TEXT);
    expect(browser.tokens).toEqual(cli.tokens);
    expect(maxAbsDiff(browser.logits, cli.logits)).toBeLessThan(1e-4);

    // Page → CLI → page: the CLI trains two GRPO steps from the export; its save folder imports
    // back whole (weights, curves, rollouts), its optimizer file named as ignored.
    const run = join(dir, 'run');
    await promisify(execFile)(
      'npx',
      [
        'tsx',
        'src/cli/main.ts',
        'train',
        '--task',
        'arithmetic',
        '--init',
        folder,
        '--steps',
        '2',
        '--group',
        '2',
        '--batch',
        '2',
        '--mini-batch',
        '2',
        '--seed',
        '3',
        '--out',
        run,
      ],
      { maxBuffer: 64 << 20, timeout: 180_000 },
    );
    const save = join(run, 'save-000002');
    const names = [
      'config.json',
      'model.safetensors',
      'selfcest.json',
      'tokenizer.json',
      'tokenizer_config.json',
      'metrics.jsonl',
      'traces.jsonl',
      'state.json',
      'optimizer.safetensors',
    ];
    page.on('dialog', (d) => void d.accept());
    await page.getByTestId('import-files').setInputFiles(names.map((n) => join(save, n)));
    await expect(page.getByTestId('import-note')).toContainText('traces.jsonl', { timeout: 60_000 });
    await expect(page.getByTestId('import-note')).toContainText('optimizer.safetensors');
    await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '2');
    await expect(page.getByTestId('rollout-row')).toHaveCount(8);
    await expect(page.getByTestId('policy-version')).toHaveText('v2');
    const cliLogits = JSON.parse(
      (
        await promisify(execFile)('npx', ['tsx', 'src/cli/main.ts', 'logits', '--checkpoint', save, '--text', TEXT, '--json'], {
          maxBuffer: 64 << 20,
          timeout: 120_000,
        })
      ).stdout
        .trim()
        .split('\n')
        .pop() ?? '',
    ) as Logits;
    expect(maxAbsDiff((await pageLogits(page, TEXT)).logits, cliLogits.logits)).toBeLessThan(1e-4);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  expect(consoleErrors).toEqual([]);
});

test('a malformed checkpoint import is reported and keeps the model', async ({ page, openApp, waitForModel, consoleErrors }) => {
  test.setTimeout(180_000);
  await openApp(TINY_RUN);
  await waitForModel();
  const source = await page.getByTestId('model-source').textContent();
  const before = await pageLogits(page, TEXT);
  const importError = page.getByTestId('import-error');

  // An incomplete set: the engine names what is missing.
  await page.getByTestId('import-files').setInputFiles([{ name: 'model.safetensors', mimeType: 'application/octet-stream', buffer: Buffer.alloc(64) }]);
  await expect(importError).toContainText('missing files config.json');

  // A complete set whose weights file is cut short (the page's own export, truncated).
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-weights').click()]);
  const files = untar(await readFile(await download.path())).map((f) => ({ name: f.name.split('/').pop() ?? f.name, bytes: f.bytes }));
  const weights = files.find((f) => f.name === 'model.safetensors');
  expect(weights).toBeDefined();
  const truncated = files.map((f) => ({
    name: f.name,
    mimeType: 'application/octet-stream',
    buffer: Buffer.from(f === weights ? f.bytes.subarray(0, f.bytes.length - 1000) : f.bytes),
  }));
  await page.getByTestId('import-files').setInputFiles(truncated);
  await expect(importError).toContainText('model.safetensors is invalid');
  await expect(importError).toContainText('truncated');
  await expect(importError).toContainText('model kept');
  await expect(page.getByTestId('model-source')).toHaveText(source ?? '');
  await expect(page.getByTestId('step')).toBeEnabled();

  const after = await pageLogits(page, TEXT);
  expect(after.tokens).toEqual(before.tokens);
  expect(maxAbsDiff(after.logits, before.logits)).toBe(0);
  expect(consoleErrors).toEqual([]);
});

test('the page starts from the shipped checkpoint the config names, or a labelled random init', async ({ page, backend, openApp, waitForModel }) => {
  test.skip(backend !== 'wasm', 'loading a checkpoint does not depend on the backend');
  test.setTimeout(120_000);
  // The tiny preset starts from the tiny warm start, not from a random init.
  await openApp(TINY_RUN);
  await waitForModel();
  await expect(page.getByTestId('model-source')).toContainText('checkpoints/warmstart-tiny/');
  await expect(page.getByTestId('model-note')).toHaveCount(0);

  await page.getByTestId('config-checkpoint').selectOption('random');
  await page.getByTestId('config-apply').click();
  await expect(page.getByTestId('model-note')).toContainText('random init: the config asks for a random init');
  await expect.poll(() => page.evaluate(() => location.hash)).toContain('checkpoint=random');

  // A small checkpoint under the tiny preset is refused with the reason, and a random init shown.
  await page.getByTestId('config-checkpoint').selectOption('warmstart');
  await page.getByTestId('config-apply').click();
  await expect(page.getByTestId('model-note')).toContainText('it is preset small; this link asks for tiny');

  await page.getByTestId('config-checkpoint').selectOption('auto');
  await page.getByTestId('config-apply').click();
  await expect(page.getByTestId('model-source')).toContainText('checkpoints/warmstart-tiny/');
  await expect(page.getByTestId('model-note')).toHaveCount(0);
  await waitForModel();
});

test('a CLI run folder imports whole: its curves, its rollouts with their trees, and the exports hold them', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'reading the run files does not depend on the backend');
  test.setTimeout(180_000);
  await openApp(TINY_RUN);
  await waitForModel();
  const files = await cliRunFolder();
  const input = page.getByTestId('import-files');
  const importError = page.getByTestId('import-error');

  // metrics.jsonl alone: a checkpoint is needed with it (the Runs panel compares curves alone).
  await input.setInputFiles([
    { name: 'metrics.jsonl', mimeType: 'application/jsonl', buffer: Buffer.from(files.find((f) => f.name === 'metrics.jsonl')?.bytes ?? []) },
  ]);
  await expect(importError).toContainText('load with the checkpoint of their run');
  await expect(importError).toContainText('Runs panel');

  // The folder as a .tar.
  const tar = tarArchive('gating-s1', files, 0);
  await input.setInputFiles([{ name: 'gating-s1.tar', mimeType: 'application/x-tar', buffer: Buffer.from(tar) }]);
  const note = page.getByTestId('import-note');
  await expect(note).toContainText('curves of 25 GRPO steps (steps 1–25) from gating-s1.tar: gating-s1/metrics.jsonl', { timeout: 60_000 });
  await expect(note).toContainText('32 rollouts (steps 5–25) from gating-s1.tar: gating-s1/traces.jsonl');
  await expect(note).toContainText('resumes at step 25, policy v25');
  await expect(importError).toHaveCount(0);
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '25');
  await expect(page.getByTestId('chart-svg-reward')).toHaveAttribute('data-points', '25');
  await expect(page.getByTestId('policy-version')).toHaveText('v25');
  await expect(page.getByTestId('rollout-row')).toHaveCount(32);
  await expect(page.getByTestId('rollout-row').first()).toContainText('25');

  // A rollout with clones opens its delegation tree.
  await page.locator('[data-testid="rollout-row"]:not([data-clones="0"])').first().click();
  await expect(page.locator('[data-testid="tree-node"][data-role="root"]')).toHaveCount(1);
  await expect(page.locator('[data-testid="tree-node"][data-role="clone"]')).toHaveCount(2);

  // The engine's run log has them: the exports hold the run's rows and rollouts.
  const rows = (await downloadText(page, 'export-metrics-jsonl')).trim().split('\n');
  expect(rows.map((l) => (JSON.parse(l) as { step: number }).step)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
  const traces = (await downloadText(page, 'export-traces')).trim().split('\n');
  expect(traces).toHaveLength(32);
  expect((JSON.parse(traces[0]) as { step: number }).step).toBe(5);

  // A malformed traces.jsonl refuses the whole import, naming the file and the line; nothing changes.
  const bad = files.map((f) =>
    f.name === 'traces.jsonl' ? { name: f.name, bytes: new TextEncoder().encode('{"step":1,"schema":"selfcest-episode/1"}\n') } : f,
  );
  await input.setInputFiles([{ name: 'bad.tar', mimeType: 'application/x-tar', buffer: Buffer.from(tarArchive('bad', bad, 0)) }]);
  await expect(importError).toContainText('bad.tar: bad/traces.jsonl: line 1: task must be a string');
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '25');
  await expect(page.getByTestId('rollout-row')).toHaveCount(32);
  await expect(page.getByTestId('policy-version')).toHaveText('v25');
  expect(consoleErrors).toEqual([]);
});
