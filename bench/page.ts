/**
 * `npm run bench -- page [--steps N] [--workers 1,3] [--hash k=v&...]`: wall time per GRPO step in
 * the real page (headless Chromium, the production build in dist/, backend wasm), once per
 * rollout-worker count, in one run so that the ratio compares like with like.
 *
 * The page is opened with its default run configuration (what a user who presses Train gets)
 * plus `backend=wasm`, `workers=W`, `evalEvery=0` (the monitor evaluation would add its own
 * time to some steps) and anything in --hash. Train is pressed, the first step is not counted
 * (it includes worker start-up and weight transfer), and the step times are the engine's own
 * `wallSec` rows read through `window.selfcest`.
 *
 * Needs `npm run build` first (dist/) and a Chromium (the Debian package or Playwright's).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chromium, type Page } from '@playwright/test';
import { chromiumLaunchOptions } from '../e2e/chromium';
import { parseFlags } from '../src/cli/args';
import { intList } from './workloads';

const PORT = 4176; // not 4190: fetch refuses it (a blocked port, ManageSieve)

interface PageStepResult {
  workers: number;
  steps: number;
  meanSec: number;
  medianSec: number;
  rolloutTokensPerSec: number;
}

const FLAGS = {
  steps: { type: 'int', default: 10, min: 1, max: 1000, help: 'timed steps per worker count (after one untimed step)' },
  workers: { type: 'string', default: '1,3', help: 'comma list of rollout-worker counts' },
  hash: { type: 'string', default: '', help: 'extra config entries for the page, as in its URL hash (k=v&...)' },
} as const;

async function startPreview(): Promise<ChildProcess> {
  if (!existsSync('dist/index.html')) throw new Error('bench page: dist/ is missing; run `npm run build` first');
  const server = spawn('npx', ['vite', 'preview', '--host', '127.0.0.1', '--port', String(PORT), '--strictPort'], { stdio: 'ignore', detached: true });
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${PORT}/`)).ok) return server;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  stopPreview(server);
  throw new Error(`bench page: vite preview did not answer on port ${PORT}`);
}

/** npx starts vite as its child: end the whole process group. */
function stopPreview(server: ChildProcess): void {
  if (server.pid !== undefined) process.kill(-server.pid, 'SIGTERM');
}

async function stepRows(page: Page): Promise<{ wallSec: number; rolloutTokensPerSec: number }[]> {
  return page.evaluate(() => window.selfcest!.state().metrics.map((p) => ({ wallSec: p.metrics.wallSec, rolloutTokensPerSec: p.metrics.rolloutTokensPerSec })));
}

async function measure(page: Page, workers: number, steps: number, extra: string): Promise<PageStepResult> {
  const params = new URLSearchParams(extra);
  params.set('backend', 'wasm');
  params.set('workers', String(workers));
  if (!params.has('evalEvery')) params.set('evalEvery', '0');
  await page.goto(`http://127.0.0.1:${PORT}/#${params.toString()}`);
  await page.getByTestId('step').waitFor();
  await page.waitForFunction(() => document.querySelector('[data-testid="step"]:not([disabled])') !== null, undefined, { timeout: 300_000 });
  await page.getByTestId('train').first().click();
  await page.waitForFunction((n) => (window.selfcest?.state().metrics.length ?? 0) >= n, steps + 1, { timeout: 1_800_000, polling: 500 });
  await page.getByTestId('pause').click();
  const rows = (await stepRows(page)).slice(1, steps + 1);
  const secs = rows.map((r) => r.wallSec).sort((a, b) => a - b);
  return {
    workers,
    steps: rows.length,
    meanSec: secs.reduce((a, b) => a + b, 0) / secs.length,
    medianSec: secs[Math.floor(secs.length / 2)],
    rolloutTokensPerSec: rows.reduce((a, r) => a + r.rolloutTokensPerSec, 0) / rows.length,
  };
}

export async function runPageBench(args: string[]): Promise<void> {
  const f = parseFlags(args, FLAGS);
  const steps = f.steps;
  const workerCounts = intList('workers', f.workers);
  if (!workerCounts.every((w) => w >= 1 && w <= 16)) throw new Error('bench page: --workers must be a comma list of integers in [1, 16]');
  const extra = f.hash;
  const server = await startPreview();
  const browser = await chromium.launch({ ...chromiumLaunchOptions(), headless: true });
  try {
    const results: PageStepResult[] = [];
    for (const w of workerCounts) {
      const page = await browser.newPage();
      results.push(await measure(page, w, steps, extra));
      await page.close();
      const r = results[results.length - 1];
      console.log(`workers ${w}: ${r.steps} steps, mean ${r.meanSec.toFixed(2)} s/step, median ${r.medianSec.toFixed(2)} s, rollout ${r.rolloutTokensPerSec.toFixed(0)} tokens/s`);
    }
    const base = results[0];
    for (const r of results.slice(1)) {
      console.log(`ratio workers ${r.workers} / workers ${base.workers}: ${(r.meanSec / base.meanSec).toFixed(2)} (step time), ${(r.rolloutTokensPerSec / base.rolloutTokensPerSec).toFixed(2)} (rollout tokens/s)`);
    }
  } finally {
    await browser.close();
    stopPreview(server);
  }
}
