/**
 * `npm run bench -- firstvisit [--minutes 3] [--shots DIR]`: the first visit as a newcomer has it.
 * The production build (dist/) in headless Chromium at 1280×720, a fresh profile (no link,
 * nothing saved: the page opens on its demo, backend chosen by the page), Train pressed once,
 * then nothing touched for --minutes of wall time. Prints the held-out readings the page drew
 * (its data-testid="heldout-reading" elements) with their 95% intervals, the rise of the
 * delegate method's accuracy from the first reading to the last, whether the intervals are apart,
 * the share of held-out problems delegated, the steps done and the page's own sentence.
 * --shots writes the first view, the folded config and the view at the end (1280×720 and 1440×900).
 *
 * Needs `npm run build` first and a Chromium (the Debian package or Playwright's).
 */
import { mkdirSync } from 'node:fs';
import { chromium, type Page } from '@playwright/test';
import { chromiumLaunchOptions } from '../e2e/chromium';
import { parseFlags } from '../src/cli/args';
import { startPreview, stopPreviewAndWait, PREVIEW_URL } from './page';

const FLAGS = {
  minutes: { type: 'number', default: 3, min: 0.1, max: 60, help: 'wall time to wait after Train, in minutes' },
  shots: { type: 'string', default: '', help: 'folder for screenshots (empty: none)' },
} as const;

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
    const t0 = Date.now();
    await page.getByTestId('train').click();
    await page.waitForTimeout(Number(flags.minutes) * 60_000);
    const wallSec = (Date.now() - t0) / 1000;
    const got = await readings(page);
    const steps = Number(await page.getByTestId('metrics-steps').getAttribute('data-steps'));
    const sentence = await page.getByTestId('story-summary').textContent();
    if (dir) await shots(page, dir, `after-${flags.minutes}min`);
    await page.getByTestId('pause').click();
    console.log(`first visit: ${hash}, backend ${backend}, ${wallSec.toFixed(0)} s after Train, ${steps} GRPO steps`);
    for (const r of got)
      console.log(
        `  step ${String(r.step).padStart(3)} ${r.method.padEnd(8)} ${pct(r.accuracy)} [${pct(r.lo)}, ${pct(r.hi)}] n=${r.n}${r.delegated !== null ? ` delegated ${pct(r.delegated)}` : ''}`,
      );
    const own = got.filter((r) => r.method === 'delegate');
    if (own.length >= 2) {
      const [a, b] = [own[0], own[own.length - 1]];
      console.log(
        `delegate: ${pct(a.accuracy)} at step ${a.step} → ${pct(b.accuracy)} at step ${b.step}: ${((b.accuracy - a.accuracy) * 100).toFixed(1)} points; last low end ${pct(b.lo)} ${b.lo > a.hi ? '>' : '≤'} first high end ${pct(a.hi)}`,
      );
    } else console.log(`delegate: ${own.length} reading(s), no change to report`);
    console.log(`the page says: ${sentence}`);
    if (errors.length > 0) console.log(`console errors: ${errors.join(' | ')}`);
  } finally {
    await browser.close();
    await stopPreviewAndWait(server);
  }
}
