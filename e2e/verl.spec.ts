import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseTracesJsonl } from '../src/core/io/traces';
import { verlSamplesOf } from '../test/verlShape';
import { pythonWith } from '../test/python/python';
import { TINY_RUN, expect, test } from './chromium';

/**
 * A verl run read back: the gating arm's committed rollouts logged as verl's agent loop logs root
 * and clone samples, converted by the CLI's import-verl, imported in the Runs panel; its curve is
 * listed and its rollouts open as delegation trees of text-only contexts.
 */
test('a verl run converted by import-verl imports in the Runs panel, and its rollouts open as trees', async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'kept runs do not depend on the backend');
  test.setTimeout(180_000);
  const dir = mkdtempSync(join(tmpdir(), 'selfcest-e2e-verl-'));
  const ours = parseTracesJsonl(readFileSync(join('runs', 'grpo-naive-limit48', 'traces.sample.jsonl'), 'utf8'));
  const samples = ours.flatMap((t, i) => verlSamplesOf(t, `ep${i}`));
  writeFileSync(join(dir, 'rollouts.jsonl'), samples.map((s) => JSON.stringify(s)).join('\n') + '\n');
  const converted = join(dir, 'verl-run.jsonl');
  execFileSync('npx', ['tsx', 'src/cli/main.ts', 'import-verl', '--in', join(dir, 'rollouts.jsonl'), '--out', converted], { encoding: 'utf8' });

  await openApp(`${TINY_RUN}&evalEvery=0`);
  await waitForModel();
  await page.getByTestId('import-run-files').setInputFiles([converted]);
  const row = page.locator('[data-testid="run-row"][data-name="verl-run (CLI run)"]');
  await expect(row).toHaveCount(1);
  const last = Math.max(...ours.map((t) => (t as { step?: number }).step ?? 0));
  await expect(page.getByTestId('runs-note')).toContainText(`imported "verl-run (CLI run)" (${last} GRPO steps`);
  await expect(row.getByTestId('run-steps')).toHaveText(String(last));

  // Ticked alone, its reward and token curves are drawn from its episodes.
  await row.getByTestId('run-select').check();
  await expect(page.getByTestId('runs-compare')).toHaveAttribute('data-runs', '1');
  await expect(page.getByTestId('runs-legend-item')).toHaveCount(1);
  await expect(page.locator('[data-testid^="chart-svg-runs-reward"]').first()).toBeVisible();
  await page.getByTestId('runs-panel').screenshot({ path: test.info().outputPath('verl-runs.png') });

  // A delegating rollout: its tree has clone nodes; a clone's context is its text, by writer.
  const picker = row.getByTestId('run-rollouts');
  await expect(picker.locator('option')).toHaveCount(ours.length + 1);
  const delegating = ours.findIndex((t) => t.contexts.length > 1);
  await picker.selectOption(String(delegating));
  await expect(page.getByTestId('tree-summary')).toContainText('kept run "verl-run (CLI run)"');
  const clones = page.locator('[data-testid="tree-node"][data-role="clone"]');
  await expect(clones).toHaveCount(ours[delegating].contexts.length - 1);
  await clones.first().click();
  const view = page.getByTestId('context-view');
  await expect(view).toContainText('text only');
  await expect(view.getByTestId('text-only').locator('[data-writer="p"]')).toHaveText(ours[delegating].contexts[1].subtask!);
  await page.locator('[data-testid="tree-node"][data-role="root"]').click();
  await expect(view.getByTestId('text-only').locator('[data-writer="i"]').first()).toContainText('<tool_response>');
  await page.screenshot({ path: test.info().outputPath('verl-tree.png'), fullPage: false });
  expect(consoleErrors).toEqual([]);
});

/**
 * A verl run as the exported hook logs it: test/python/verl_dump_fixture.py writes a few hundred
 * rows (model-like text from a real Hugging Face tokenizer, batches shaped as the fork's, the
 * exported reward called as the fork's loop calls it) through selfcest_dump.py; the page takes
 * the step files themselves, draws the curves from the steps, and opens every root as a tree,
 * clones the root named included.
 */
test("a verl run's dump (selfcest_dump.py's step files) opens in the Runs panel: curves by step, every root as a tree", async ({
  page,
  backend,
  openApp,
  waitForModel,
  consoleErrors,
}) => {
  test.skip(backend !== 'wasm', 'kept runs do not depend on the backend');
  const py = pythonWith('numpy', 'tokenizers', 'transformers');
  test.skip(py.python === null, `no Python for the dump fixture: ${py.why}`);
  test.setTimeout(240_000);
  const dir = mkdtempSync(join(tmpdir(), 'selfcest-e2e-verl-dump-'));
  const exp = join(dir, 'export');
  execFileSync('npx', ['tsx', 'src/cli/main.ts', 'export-verl', '--train', '16', '--test', '4', '--out', exp], { encoding: 'utf8' });
  const out = join(dir, 'rollouts');
  const steps = 6;
  writeFileSync(
    join(dir, 'spec.json'),
    JSON.stringify({
      reward: join(exp, 'selfcest_reward.py'),
      dump: join(exp, 'selfcest_dump.py'),
      out,
      task: 'arithmetic',
      steps,
      prompts: 6,
      group: 4,
      seed: 11,
      markers: ['Answer:'],
      json_repair_penalty: 0,
      summary_max_length: 256,
      summary_truncate_side: 'left',
      backend: 'numpy',
    }),
  );
  const fixture = join('test', 'python', 'verl_dump_fixture.py');
  const episodes = (
    JSON.parse(execFileSync(py.python!, [fixture, join(dir, 'spec.json')], { encoding: 'utf8', maxBuffer: 64 << 20 })) as {
      episodes: { request_id: string; clones: { label: string }[] }[];
    }
  ).episodes;
  const files = Array.from({ length: steps }, (_, i) => join(out, `${i + 1}.jsonl`));
  const rows = files.reduce((n, f) => n + readFileSync(f, 'utf8').trim().split('\n').length, 0);
  expect(rows).toBeGreaterThan(300);

  await openApp(`${TINY_RUN}&evalEvery=0`);
  await waitForModel();
  await page.getByTestId('import-run-files').setInputFiles(files);
  const name = `verl steps 1–${steps} (CLI run)`;
  const row = page.locator(`[data-testid="run-row"][data-name="${name}"]`);
  await expect(row).toHaveCount(1);
  await expect(page.getByTestId('runs-note')).toContainText(`imported "${name}" (${steps} GRPO steps`);
  await expect(row.getByTestId('run-steps')).toHaveText(String(steps));
  await row.getByTestId('run-select').check();
  await expect(page.locator('[data-testid^="chart-svg-runs-reward"]').first()).toBeVisible();
  await page.getByTestId('runs-panel').screenshot({ path: test.info().outputPath('verl-dump-runs.png') });

  // Every root is there to open; one whose root named its clones shows each as a clone node.
  const picker = row.getByTestId('run-rollouts');
  await expect(picker.locator('option')).toHaveCount(episodes.length + 1);
  const named = episodes.findIndex((e) => e.clones.length >= 2 && e.clones.some((c) => !c.label.startsWith('turn')));
  expect(named).toBeGreaterThanOrEqual(0);
  await picker.selectOption(String(named));
  await expect(page.getByTestId('tree-summary')).toContainText(`kept run "${name}"`);
  await expect(page.locator('[data-testid="tree-node"][data-role="clone"]')).toHaveCount(episodes[named].clones.length);
  await expect(page.getByTestId('tree-summary')).toContainText('= score');
  await page.locator('[data-testid="tree-node"][data-role="root"]').click();
  await expect(page.getByTestId('context-view').getByTestId('text-only').locator('[data-writer="i"]').first()).toContainText('<tool_response>');
  await page.screenshot({ path: test.info().outputPath('verl-dump-tree.png'), fullPage: false });
  expect(consoleErrors).toEqual([]);
});
