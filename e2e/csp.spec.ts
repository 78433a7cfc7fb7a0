/**
 * The page runs under its Content-Security-Policy (vite.config.ts): the header is served with the
 * page and the worker scripts, a GRPO step trains, and no scope reports a violation.
 *
 * A worker's violations are not reported to the page or to Playwright's console events, so every
 * scope (page, engine worker, rollout workers) is asked at the end for its csp-violation reports:
 * a ReportingObserver with `buffered: true` also returns the ones from before it was made, such as
 * an eval while a bundle loads.
 */
import type { Page, Worker } from '@playwright/test';
import { TINY_RUN, expect, test } from './chromium';

interface Violation {
  scope: string;
  directive: string;
  blocked: string;
  at: string;
}

/** Runs in a page or worker: its csp-violation reports so far. */
function reportsHere(): Promise<Omit<Violation, 'scope'>[]> {
  return new Promise((resolve) => {
    const got: Report[] = [];
    const observer = new ReportingObserver((reports) => got.push(...reports), { types: ['csp-violation'], buffered: true });
    observer.observe();
    // Buffered reports arrive in a later task.
    setTimeout(() => {
      got.push(...observer.takeRecords());
      observer.disconnect();
      resolve(
        got.map((r) => {
          const b = r.body as CSPViolationReportBody;
          return { directive: b.effectiveDirective, blocked: b.blockedURL ?? '', at: `${b.sourceFile ?? '?'}:${b.lineNumber ?? '?'}:${b.columnNumber ?? '?'}` };
        }),
      );
    }, 200);
  });
}

async function violations(page: Page): Promise<Violation[]> {
  const ask = async (scope: string, reports: Promise<Omit<Violation, 'scope'>[]>) => (await reports).map((v) => ({ scope, ...v }));
  const all = await Promise.all([
    ask('page', page.evaluate(reportsHere)),
    ...page.workers().map((w) => ask(new URL(w.url()).pathname, w.evaluate(reportsHere))),
  ]);
  return all.flat();
}

test('the page is served with a Content-Security-Policy and trains under it without a violation', async ({ page, openApp, waitForModel, consoleErrors }) => {
  test.setTimeout(300_000);
  const workerPolicies = new Map<string, string>();
  page.on('response', (r) => {
    if (/\/assets\/[\w.-]*worker[\w.-]*\.js$/.test(r.url())) workerPolicies.set(new URL(r.url()).pathname, r.headers()['content-security-policy'] ?? '');
  });
  const documentResponse = page.waitForResponse((r) => r.request().resourceType() === 'document');

  await openApp(`${TINY_RUN}&evalEvery=0`);
  const policy = (await (await documentResponse).allHeaders())['content-security-policy'];
  expect(policy).toContain("script-src 'self' 'wasm-unsafe-eval'");
  expect(policy).toContain("worker-src 'self'");
  expect(policy).not.toContain("'unsafe-eval'");
  expect(policy).not.toContain("'unsafe-inline'");
  await waitForModel();
  // The shipped tiny warm start was fetched (connect-src) and loaded.
  await expect(page.getByTestId('model-source')).toContainText('checkpoints/warmstart-tiny/');
  await expect(page.getByTestId('model-note')).toHaveCount(0);

  await page.getByTestId('step').click();
  await expect(page.getByTestId('metrics-steps')).toHaveAttribute('data-steps', '1', { timeout: 120_000 });
  await expect(page.getByTestId('policy-version')).toHaveText('v1');
  // A blob: download (an <a download> click) and a chart's SVG export.
  const [csv] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-metrics-csv').click()]);
  expect(csv.suggestedFilename()).toBe('metrics.csv');
  const [svg] = await Promise.all([page.waitForEvent('download'), page.getByTestId('chart-export-reward').click()]);
  expect(svg.suggestedFilename()).toBe('reward.svg');

  // The engine worker and the rollout worker were served the page's policy.
  const workers = page.workers().map((w) => new URL(w.url()).pathname);
  expect(workers.some((p) => p.includes('engine.worker'))).toBe(true);
  expect(workers.some((p) => p.includes('rollout.worker'))).toBe(true);
  expect([...workerPolicies.keys()].sort()).toEqual([...new Set(workers)].sort());
  expect(new Set(workerPolicies.values())).toEqual(new Set([policy]));
  expect(await violations(page)).toEqual([]);
  expect(consoleErrors).toEqual([]);

  // The policy is enforced and its violations are seen, in the page and in a worker: an inline
  // script, a blob: worker and a fetch to another origin are refused and reported.
  await page.evaluate(() => {
    const s = document.createElement('script');
    s.textContent = 'window.inlineRan = true';
    document.body.append(s);
    try {
      new Worker(URL.createObjectURL(new Blob([''], { type: 'text/javascript' })));
    } catch {
      // Chromium may refuse it synchronously; it is reported either way.
    }
  });
  const rollout = page.workers().find((w) => w.url().includes('rollout.worker')) as Worker;
  await rollout.evaluate(() => fetch('https://example.invalid/').catch(() => undefined));
  const seen = await violations(page);
  expect(seen.map((v) => `${v.scope.includes('rollout.worker') ? 'rollout' : v.scope} ${v.directive}`).sort()).toEqual([
    'page script-src-elem',
    'page worker-src',
    'rollout connect-src',
  ]);
  expect(await page.evaluate(() => (window as unknown as { inlineRan?: boolean }).inlineRan)).toBeUndefined();
});
