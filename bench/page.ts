/**
 * `npm run bench -- page [--steps N] [--workers 1,3] [--hash k=v&...] [--against DIR]`: wall time
 * per GRPO step in the real page (headless Chromium, the production build in dist/, backend
 * wasm), once per rollout-worker count, in one run so that the ratio compares like with like.
 * `--against` names a second production build (e.g. an earlier commit's, built in a worktree),
 * measured right after dist/ at each worker count, and prints how many times faster dist/ is.
 *
 * The page is opened with its default run configuration (what a user who presses Train gets)
 * plus `backend=wasm`, `workers=W`, `evalEvery=0` (the monitor evaluation would add its own
 * time to some steps) and anything in --hash. Train is pressed, the first step is not counted
 * (it includes worker start-up and weight transfer), and the step times are the engine's own
 * `wallSec` rows read through `window.selfcest`. Beside them, the main thread's cost of the
 * session saves made meanwhile: each save's wall time and size (autosave.ts measures
 * 'selfcest-save') and every long task (≥ 50 ms) the main thread had from Train to Pause.
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
/** Where startPreview serves the build. */
export const PREVIEW_URL = `http://127.0.0.1:${PORT}/`;

interface PageStepResult {
  workers: number;
  steps: number;
  meanSec: number;
  medianSec: number;
  rolloutTokensPerSec: number;
  /** The session saves during the run (autosave.ts marks each) and the main thread's long tasks in the same time. */
  saves: { count: number; meanMs: number; meanMB: number };
  longTasks: { count: number; maxMs: number; blockingMs: number; spanSec: number };
  /** The long tasks that overlap a save. */
  duringSaves: { count: number; maxMs: number; blockingMs: number };
}

const FLAGS = {
  steps: { type: 'int', default: 10, min: 1, max: 1000, help: 'timed steps per worker count (after one untimed step)' },
  workers: { type: 'string', default: '1,3', help: 'comma list of rollout-worker counts' },
  hash: { type: 'string', default: '', help: 'extra config entries for the page, as in its URL hash (k=v&...)' },
  against: {
    type: 'string',
    default: '',
    help: 'a second production build (its dist folder, e.g. of an earlier commit) measured in the same run, alternating with dist/',
  },
} as const;

export async function startPreview(dist: string): Promise<ChildProcess> {
  if (!existsSync(`${dist}/index.html`)) throw new Error(`bench page: ${dist}/index.html is missing; run \`npm run build\` first (or name a build folder)`);
  const server = spawn('npx', ['vite', 'preview', '--host', '127.0.0.1', '--port', String(PORT), '--strictPort', '--outDir', dist], {
    stdio: 'ignore',
    detached: true,
  });
  for (let i = 0; i < 200; i++) {
    // A preview that exited (the port still held by another) must not pass for this build.
    if (server.exitCode !== null) throw new Error(`bench page: vite preview for ${dist} exited (code ${server.exitCode}); is port ${PORT} in use?`);
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

/** npx starts vite as its child: end the whole process group, and wait until it has gone (the port is free). */
export async function stopPreviewAndWait(server: ChildProcess): Promise<void> {
  const gone = new Promise<void>((resolve) => (server.exitCode !== null || server.signalCode !== null ? resolve() : server.once('exit', () => resolve())));
  stopPreview(server);
  await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
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
  // Long tasks (≥ 50 ms) of the main thread from Train to Pause: what the saves (and everything else) cost it.
  await page.evaluate(() => {
    const w = window as unknown as { __longTasks: { start: number; ms: number }[]; __t0: number };
    w.__longTasks = [];
    w.__t0 = performance.now();
    new PerformanceObserver((list) => list.getEntries().forEach((e) => w.__longTasks.push({ start: e.startTime, ms: e.duration }))).observe({
      type: 'longtask',
    });
  });
  await page.getByTestId('train').first().click();
  await page.waitForFunction((n) => (window.selfcest?.state().metrics.length ?? 0) >= n, steps + 1, { timeout: 1_800_000, polling: 500 });
  await page.getByTestId('pause').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="step"]:not([disabled])') !== null, undefined, { timeout: 600_000 });
  const main = await page.evaluate(() => {
    const w = window as unknown as { __longTasks: { start: number; ms: number }[]; __t0: number };
    const saves = performance.getEntriesByName('selfcest-save', 'measure').filter((e) => e.startTime >= w.__t0) as PerformanceMeasure[];
    return {
      saves: saves.map((e) => ({ start: e.startTime, ms: e.duration, bytes: (e.detail as { bytes: number }).bytes })),
      longTasks: w.__longTasks,
      spanSec: (performance.now() - w.__t0) / 1000,
    };
  });
  const rows = (await stepRows(page)).slice(1, steps + 1);
  const secs = rows.map((r) => r.wallSec).sort((a, b) => a - b);
  return {
    workers,
    steps: rows.length,
    meanSec: secs.reduce((a, b) => a + b, 0) / secs.length,
    medianSec: secs[Math.floor(secs.length / 2)],
    rolloutTokensPerSec: rows.reduce((a, r) => a + r.rolloutTokensPerSec, 0) / rows.length,
    saves: {
      count: main.saves.length,
      meanMs: main.saves.reduce((a, x) => a + x.ms, 0) / Math.max(1, main.saves.length),
      meanMB: main.saves.reduce((a, x) => a + x.bytes, 0) / Math.max(1, main.saves.length) / 1e6,
    },
    longTasks: { ...taskStats(main.longTasks.map((t) => t.ms)), spanSec: main.spanSec },
    duringSaves: taskStats(main.longTasks.filter((t) => main.saves.some((x) => t.start < x.start + x.ms && t.start + t.ms > x.start)).map((t) => t.ms)),
  };
}

function taskStats(ms: readonly number[]): { count: number; maxMs: number; blockingMs: number } {
  return { count: ms.length, maxMs: Math.max(0, ...ms), blockingMs: ms.reduce((a, d) => a + d - 50, 0) };
}

export async function runPageBench(args: string[]): Promise<void> {
  const f = parseFlags(args, FLAGS);
  const steps = f.steps;
  const workerCounts = intList('workers', f.workers);
  if (!workerCounts.every((w) => w >= 1 && w <= 16)) throw new Error('bench page: --workers must be a comma list of integers in [1, 16]');
  const extra = f.hash;
  const builds = f.against === '' ? ['dist'] : ['dist', f.against.replace(/\/+$/, '')];
  if (builds.length > 1 && (builds[1] === 'dist' || builds[1] === './dist')) throw new Error('bench page: --against must name another build than dist/');
  for (const b of builds)
    if (!existsSync(`${b}/index.html`)) throw new Error(`bench page: ${b}/index.html is missing; run \`npm run build\` first (or name a build folder)`);
  const browser = await chromium.launch({ ...chromiumLaunchOptions(), headless: true });
  const results = new Map<string, PageStepResult[]>(builds.map((b) => [b, []]));
  try {
    // With two builds, each worker count runs on one, then the other, so both see the same load.
    for (const w of workerCounts) {
      for (const build of builds) {
        const server = await startPreview(build);
        try {
          const page = await browser.newPage();
          const r = await measure(page, w, steps, extra);
          await page.close();
          results.get(build)?.push(r);
          const label = builds.length > 1 ? `${build}, ` : '';
          console.log(
            `${label}workers ${w}: ${r.steps} steps, mean ${r.meanSec.toFixed(2)} s/step, median ${r.medianSec.toFixed(2)} s, rollout ${r.rolloutTokensPerSec.toFixed(0)} tokens/s`,
          );
          const { saves, longTasks: lt, duringSaves: ds } = r;
          console.log(
            `  session saves: ${saves.count}, mean ${saves.meanMs.toFixed(0)} ms wall, ${saves.meanMB.toFixed(1)} MB each; main-thread long tasks in ${lt.spanSec.toFixed(0)} s: ${lt.count} (longest ${lt.maxMs.toFixed(0)} ms, blocking ${lt.blockingMs.toFixed(0)} ms), of them during a save: ${ds.count} (longest ${ds.maxMs.toFixed(0)} ms, blocking ${ds.blockingMs.toFixed(0)} ms)`,
          );
        } finally {
          await stopPreviewAndWait(server);
        }
      }
    }
    const mine = results.get('dist') ?? [];
    const base = mine[0];
    for (const r of mine.slice(1)) {
      console.log(
        `ratio workers ${r.workers} / workers ${base.workers}: ${(r.meanSec / base.meanSec).toFixed(2)} (step time), ${(r.rolloutTokensPerSec / base.rolloutTokensPerSec).toFixed(2)} (rollout tokens/s)`,
      );
    }
    const other = builds.length > 1 ? (results.get(builds[1]) ?? []) : [];
    other.forEach((o, i) => {
      const r = mine[i];
      console.log(`ratio ${builds[1]} / dist at workers ${r.workers}: ${(o.meanSec / r.meanSec).toFixed(2)} (step time: dist is that many times faster)`);
    });
  } finally {
    await browser.close();
  }
}
