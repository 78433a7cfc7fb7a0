import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseTracesJsonl } from '../src/core/io/traces';
import { verlSamplesOf } from '../test/verlShape';
import { TINY_RUN, expect, test } from './chromium';

/**
 * A verl run read back: the gating arm's committed rollouts logged as verl's agent loop logs root
 * and clone samples, converted by the CLI's import-verl, imported in the Runs panel; its curve is
 * listed and its rollouts open as delegation trees of text-only contexts.
 */
test('a verl run converted by import-verl imports in the Runs panel, and its rollouts open as trees', async ({ page, backend, openApp, waitForModel, consoleErrors }) => {
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
