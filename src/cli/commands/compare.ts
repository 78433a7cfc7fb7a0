import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { defineCommand } from '../command';
import { checkOutDir, committedRows } from '../runDir';
import { UsageError } from '../args';
import { existsSync, statSync } from 'node:fs';
import { looksLikeTraces, parseTracesJsonl } from '../../core/io/traces';
import { jsonLines } from '../../core/io/jsonl';
import { type SteppedTrace, rowsFromTraces } from '../../core/eval/traceRows';

interface Row {
  step: number;
  meanReward: number;
  accuracy: number;
  gateRate: number;
  meanTotalTokens: number;
  clonesPerEpisode: number;
}

/** Runs side by side (the gating ablation): final numbers and reward curves from metrics.jsonl. */
export const compare = defineCommand(
  'compare',
  'Compare training runs from their metrics.jsonl (or, without one, their traces: a run read back from verl): a table of the last steps and an SVG of the reward curves.',
  {
    runs: { type: 'string', required: true, help: 'comma list of run directories or traces .jsonl files (label=path to name one)' },
    last: { type: 'int', default: 10, min: 1, max: 1_000_000, help: 'average the final numbers over this many last steps' },
    out: { type: 'string', help: 'write compare.md and reward.svg here' },
  },
  async (f) => {
    if (f.out !== undefined) await checkOutDir(f.out);
    const runs = await Promise.all(
      f.runs.split(',').map(async (entry) => {
        const [label, path] = entry.includes('=') ? entry.split('=') : [basename(entry), entry];
        return { label, rows: await runRows(path) };
      }),
    );
    const k = f.last;
    const avg = (rows: Row[], key: keyof Row) => rows.slice(-k).reduce((a, r) => a + r[key], 0) / Math.min(k, rows.length);
    const shown = (rows: Row[], key: keyof Row, digits: number) => (Number.isFinite(avg(rows, key)) ? avg(rows, key).toFixed(digits) : '—');
    const table = [
      `| run | steps | reward (last ${k}) | accuracy | gate rate | tokens | clones |`,
      '|---|---|---|---|---|---|---|',
      ...runs.map(
        ({ label, rows }) =>
          `| ${label} | ${rows.at(-1)!.step} | ${shown(rows, 'meanReward', 3)} | ${shown(rows, 'accuracy', 3)} | ${shown(rows, 'gateRate', 3)} | ${shown(rows, 'meanTotalTokens', 1)} | ${shown(rows, 'clonesPerEpisode', 2)} |`,
      ),
    ].join('\n');
    console.log(table);
    if (f.out) {
      await mkdir(f.out, { recursive: true });
      await writeFile(join(f.out, 'compare.md'), table + '\n');
      await writeFile(join(f.out, 'reward.svg'), curvesSvg(runs));
      console.log(`wrote ${f.out}/compare.md and reward.svg`);
    }
  },
);

/**
 * A run's rows: its metrics.jsonl (in the committed save of a run directory), else the per-step
 * means of its traces (a directory's traces.jsonl, or a `.jsonl` traces file named directly, such
 * as `import-verl`'s output).
 */
async function runRows(path: string): Promise<Row[]> {
  // A file named directly is taken by its content (traces or metrics rows); a directory by what it holds.
  const direct = path.endsWith('.jsonl') && existsSync(path) && statSync(path).isFile();
  const directText = direct ? await readFile(path, 'utf8') : null;
  const tracesFile =
    directText !== null
      ? looksLikeTraces(directText)
        ? path
        : null
      : existsSync(committedRows(path, 'metrics.jsonl'))
        ? null
        : committedRows(path, 'traces.jsonl');
  const metricsFile = direct ? path : committedRows(path, 'metrics.jsonl');
  if (tracesFile !== null) {
    let text: string;
    try {
      text = directText ?? (await readFile(tracesFile, 'utf8'));
    } catch {
      throw new UsageError(`--runs: ${tracesFile} cannot be read (a run directory needs metrics.jsonl or traces.jsonl)`);
    }
    try {
      return rowsFromTraces(parseTracesJsonl(text) as SteppedTrace[]);
    } catch (e) {
      throw new Error(`${tracesFile}: ${(e as Error).message}`);
    }
  }
  const text = directText ?? (await readFile(metricsFile, 'utf8'));
  const rows = jsonLines(text, (line) => new Error(`${metricsFile} line ${line} is not JSON`)).map(({ value }) => value as Row);
  if (!rows.length || rows[0].meanReward === undefined) throw new Error(`${metricsFile} has no GRPO metrics (meanReward)`);
  return rows;
}

function curvesSvg(runs: { label: string; rows: Row[] }[]): string {
  const W = 520;
  const H = 300;
  const m = { l: 44, r: 120, t: 14, b: 30 };
  const all = runs.flatMap((r) => r.rows);
  const maxStep = Math.max(...all.map((r) => r.step));
  const lo = Math.min(...all.map((r) => r.meanReward));
  const hi = Math.max(...all.map((r) => r.meanReward));
  const sx = (s: number) => m.l + (s / maxStep) * (W - m.l - m.r);
  const sy = (v: number) => m.t + (1 - (v - lo) / (hi - lo || 1)) * (H - m.t - m.b);
  const lines = runs.map(({ label, rows }, i) => {
    const colour = `hsl(${(i * 67) % 360}, 65%, 40%)`;
    const d = rows.map((r, j) => `${j ? 'L' : 'M'}${sx(r.step).toFixed(1)},${sy(r.meanReward).toFixed(1)}`).join('');
    return `<path d="${d}" fill="none" stroke="${colour}"/><text x="${W - m.r + 6}" y="${m.t + 12 * (i + 1)}" fill="${colour}">${label.replace(/[<>&]/g, '')}</text>`;
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="10">`,
    '<rect width="100%" height="100%" fill="white"/>',
    `<line x1="${m.l}" y1="${H - m.b}" x2="${W - m.r}" y2="${H - m.b}" stroke="#444"/><line x1="${m.l}" y1="${m.t}" x2="${m.l}" y2="${H - m.b}" stroke="#444"/>`,
    `<text x="${m.l - 4}" y="${sy(hi) + 3}" text-anchor="end">${hi.toFixed(2)}</text><text x="${m.l - 4}" y="${sy(lo) + 3}" text-anchor="end">${lo.toFixed(2)}</text>`,
    `<text x="${(m.l + W - m.r) / 2}" y="${H - 6}" text-anchor="middle">step (max ${maxStep}) · mean reward</text>`,
    ...lines,
    '</svg>',
  ].join('\n');
}
