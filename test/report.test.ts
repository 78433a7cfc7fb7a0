/** The report command end to end on the shipped tiny warm start (a small, fast comparison). */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);

describe('report', () => {
  it('writes frontier.json, frontier.csv, frontier.svg and report.md, skipping a missing checkpoint', async () => {
    const out = await mkdtemp(join(tmpdir(), 'selfcest-report-'));
    try {
      await run(
        'npx',
        [
          'tsx',
          'src/cli/main.ts',
          'report',
          '--out',
          out,
          '--n',
          '2',
          '--limits',
          '12',
          '--checkpoints',
          'tiny=public/checkpoints/warmstart-tiny,gone=/nonexistent',
        ],
        { timeout: 240_000 },
      );
      const json = JSON.parse(await readFile(join(out, 'frontier.json'), 'utf8'));
      expect(json.skipped).toEqual(['gone (/nonexistent: no checkpoint)']);
      expect(json.comparisons.map((c: { setting: string }) => c.setting)).toHaveLength(6);
      const points = json.comparisons.flatMap((c: { points: unknown[] }) => c.points);
      // 6 methods × 1 limit × 6 settings.
      expect(points).toHaveLength(36);
      // The long-context monolithic prompt does not fit the 256-token window: it fails however
      // the model writes; the delegating root holds only the chunk keys.
      const long = json.comparisons[3].points as { method: string; accuracy: number; meanRootContextTokens: number }[];
      const mono = long.find((p) => p.method === 'mono')!;
      expect(mono.meanRootContextTokens).toBeGreaterThan(256);
      expect(mono.accuracy).toBe(0);
      expect(long.find((p) => p.method === 'delegate')!.meanRootContextTokens).toBeLessThan(256);
      const csv = (await readFile(join(out, 'frontier.csv'), 'utf8')).trim().split('\n');
      expect(csv).toHaveLength(37);
      const svg = await readFile(join(out, 'frontier.svg'), 'utf8');
      expect(svg.match(/<circle class="point"/g)).toHaveLength(36);
      expect(await readFile(join(out, 'report.md'), 'utf8')).toMatch(/## tiny: arithmetic 9–16 operands \(out of distribution\)/);
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  }, 300_000);
});
