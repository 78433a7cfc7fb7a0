/**
 * `npm run bench -- firstvisit [--minutes 3] [--busy 1] [--shots DIR]`: the first visit as a newcomer has it.
 * The production build (dist/) in headless Chromium at 1280×720, a fresh profile (no link,
 * nothing saved: the page opens on its demo, backend chosen by the page), Train pressed once,
 * then nothing touched for --minutes of wall time. Prints the held-out readings the page drew
 * (its data-testid="heldout-reading" elements) with their 95% intervals, the rise of the
 * delegate method's accuracy from the first reading to the last, whether the intervals are apart,
 * the share of held-out problems delegated, the steps done and the page's own sentence.
 * --shots writes the first view, the folded config and the view at the end (1280×720 and 1440×900).
 *
 * Beside the readings it prints the machine's speed, measured under the same load: the decode
 * bench's cached batched rate (`bench decode --reference`, a child process, just before Train)
 * and the steps a minute the page made; and where the time went, from the page's own rows
 * (each step's rollouts and updates) and the times its rows and readings arrived (the rest:
 * weight syncs, held-out readings, the page). --busy N keeps N more processes spinning on the CPU
 * for the whole run (a laptop doing something else, or a machine of half the speed on 2 cores).
 *
 * Needs `npm run build` first and a Chromium (the Debian package or Playwright's).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { chromium, type Page } from '@playwright/test';
import { chromiumLaunchOptions } from '../e2e/chromium';
import { parseFlags } from '../src/cli/args';
import { startPreview, stopPreviewAndWait, PREVIEW_URL } from './page';

const FLAGS = {
  minutes: { type: 'number', default: 3, min: 0.1, max: 60, help: 'wall time to wait after Train, in minutes' },
  shots: { type: 'string', default: '', help: 'folder for screenshots (empty: none)' },
  busy: { type: 'int', default: 0, min: 0, max: 64, help: 'processes kept spinning on the CPU for the whole run (load from elsewhere)' },
} as const;

/** What the page had at one moment: rows of finished steps and held-out points. */
interface Tick {
  t: number;
  steps: number;
  points: number;
}

/** The decode bench's reference rate, run in a child process (under whatever load is running). */
function decodeReference(): string {
  const r = spawnSync('npx', ['tsx', 'bench/main.ts', 'decode', '--reference'], { encoding: 'utf8' });
  const m = /cached batched: (\d+) tokens\/s/.exec(r.stdout);
  return m ? `${m[1]} tokens/s` : `unmeasured (${(r.stderr || r.stdout).trim().split('\n').pop() ?? ''})`;
}

/** N processes that spin until killed. */
function spinners(n: number): ChildProcess[] {
  return Array.from({ length: n }, () => spawn(process.execPath, ['-e', 'for(;;);'], { stdio: 'ignore' }));
}

interface Reading {
  step: number;
  method: string;
  accuracy: number;
  lo: number;
  hi: number;
  n: number;
  delegated: number | null;
}

async function readings(page: Page): Promise<Reading[]> {
  return page.getByTestId('heldout-reading').evaluateAll((els) =>
    els.map((e) => ({
      step: Number(e.getAttribute('data-step')),
      method: e.getAttribute('data-method') ?? '',
      accuracy: Number(e.getAttribute('data-accuracy')),
      lo: Number(e.getAttribute('data-lo')),
      hi: Number(e.getAttribute('data-hi')),
      n: Number(e.getAttribute('data-n')),
      delegated: e.hasAttribute('data-delegated') ? Number(e.getAttribute('data-delegated')) : null,
    })),
  );
}

const pct = (v: number) => `${(v * 100).toFixed(1)}%`;

async function shots(page: Page, dir: string, name: string): Promise<void> {
  for (const [w, h] of [
    [1280, 720],
    [1440, 900],
  ]) {
    await page.setViewportSize({ width: w, height: h });
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: `${dir}/${name}-${w}x${h}.png` });
    if (name === 'first-view') await page.getByRole('region', { name: 'Configuration' }).screenshot({ path: `${dir}/config-folded-${w}x${h}.png` });
  }
  await page.setViewportSize({ width: 1280, height: 720 });
}

export async function runFirstVisitBench(args: string[]): Promise<void> {
  const flags = parseFlags(args, FLAGS);
  const dir = String(flags.shots);
  if (dir) mkdirSync(dir, { recursive: true });
  const server = await startPreview('dist');
  const browser = await chromium.launch(chromiumLaunchOptions());
  const busy = spinners(Number(flags.busy));
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
    const errors: string[] = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(PREVIEW_URL);
    await page.getByTestId('step').waitFor({ state: 'visible' });
    await page.waitForFunction(() => !(document.querySelector('[data-testid="step"]') as HTMLButtonElement | null)?.disabled, undefined, { timeout: 300_000 });
    const hash = await page.evaluate(() => location.hash);
    const backend = await page.getByTestId('backend').textContent();
    if (dir) await shots(page, dir, 'first-view');
    const speed = decodeReference();
    const t0 = Date.now();
    await page.getByTestId('train').click();
    const ticks: Tick[] = [];
    const end = t0 + Number(flags.minutes) * 60_000;
    while (Date.now() < end) {
      const s = await page.evaluate(() => {
        const st = window.selfcest!.state();
        return { steps: st.metrics.length, points: st.frontier.length };
      });
      ticks.push({ t: (Date.now() - t0) / 1000, ...s });
      await page.waitForTimeout(Math.min(500, Math.max(0, end - Date.now())));
    }
    const wallSec = (Date.now() - t0) / 1000;
    const rows = await page.evaluate(() =>
      window.selfcest!.state().metrics.map((p) => ({
        wallSec: p.metrics.wallSec,
        rolloutSec: (p.metrics.meanTotalTokens * p.episodes) / Math.max(1e-9, p.metrics.rolloutTokensPerSec),
      })),
    );
    const got = await readings(page);
    const steps = Number(await page.getByTestId('metrics-steps').getAttribute('data-steps'));
    const sentence = await page.getByTestId('story-summary').textContent();
    const pace = (await page.getByTestId('story-pace').count()) > 0 ? await page.getByTestId('story-pace').textContent() : null;
    if (dir) await shots(page, dir, `after-${flags.minutes}min`);
    await page.getByTestId('pause').click();
    console.log(`first visit: ${hash}, backend ${backend}, ${wallSec.toFixed(0)} s after Train, ${steps} GRPO steps`);
    console.log(
      `machine: ${flags.busy > 0 ? `${flags.busy} spinning process${flags.busy > 1 ? 'es' : ''} beside it; ` : ''}decode reference ${speed}; ${((steps / wallSec) * 60).toFixed(1)} GRPO steps a minute`,
    );
    console.log(timeBreakdown(rows, ticks, wallSec));
    for (const r of got)
      console.log(
        `  step ${String(r.step).padStart(3)} ${r.method.padEnd(8)} ${pct(r.accuracy)} [${pct(r.lo)}, ${pct(r.hi)}] n=${r.n}${r.delegated !== null ? ` delegated ${pct(r.delegated)}` : ''}`,
      );
    const own = got.filter((r) => r.method === 'delegate');
    if (own.length >= 2) {
      const [a, b] = [own[0], own[own.length - 1]];
      const dipped = own.filter((r) => r.hi < a.lo || r.accuracy < a.lo);
      console.log(
        `delegate: ${pct(a.accuracy)} at step ${a.step} → ${pct(b.accuracy)} at step ${b.step}: ${((b.accuracy - a.accuracy) * 100).toFixed(1)} points; last low end ${pct(b.lo)} ${b.lo > a.hi ? '>' : '≤'} first high end ${pct(a.hi)}; ${dipped.length === 0 ? `no reading below the first one's low end (${pct(a.lo)})` : `below the first one's low end: step ${dipped.map((r) => r.step).join(', ')}`}`,
      );
    } else console.log(`delegate: ${own.length} reading(s), no change to report`);
    console.log(`the page says: ${sentence}`);
    if (pace !== null) console.log(`and of its pace: ${pace}`);
    if (errors.length > 0) console.log(`console errors: ${errors.join(' | ')}`);
  } finally {
    for (const p of busy) p.kill('SIGKILL');
    await browser.close();
    await stopPreviewAndWait(server);
  }
}

/**
 * Where the wall time after Train went. Each step's row gives its rollouts and updates; the rest of
 * the time between two rows (the ticks say when each arrived) went to the weight sync after a step,
 * and, where held-out points arrived in between, to a reading. Before the first row: start-up
 * (workers, weights) and the reading before step 1.
 */
function timeBreakdown(rows: readonly { wallSec: number; rolloutSec: number }[], ticks: readonly Tick[], wallSec: number): string {
  const rollout = rows.reduce((a, r) => a + r.rolloutSec, 0);
  const update = rows.reduce((a, r) => a + Math.max(0, r.wallSec - r.rolloutSec), 0);
  const arrival = (k: number) => ticks.find((x) => x.steps >= k);
  let start = 0;
  let readings = 0;
  let syncs = 0;
  for (let k = 0; k < rows.length; k++) {
    const a = k === 0 ? { t: 0, points: 0 } : arrival(k);
    const b = arrival(k + 1);
    if (a === undefined || b === undefined) break;
    const gap = Math.max(0, b.t - a.t - rows[k].wallSec);
    if (k === 0) start = gap;
    else if (b.points > a.points) readings += gap;
    else syncs += gap;
  }
  const share = (x: number) => `${x.toFixed(0)} s (${((100 * x) / wallSec).toFixed(0)}%)`;
  const rest = Math.max(0, wallSec - rollout - update - start - readings - syncs);
  return `time: rollouts ${share(rollout)}, updates ${share(update)}, start-up and the first reading ${share(start)}, later readings ${share(readings)}, syncs between steps ${share(syncs)}, unfinished at the end ${share(rest)}`;
}
