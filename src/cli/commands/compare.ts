import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { defineCommand } from '../command';
import { checkOutDir, committedRows } from '../runDir';
import { UsageError } from '../args';
import { existsSync, statSync } from 'node:fs';
import { looksLikeTraces, parseTracesJsonl } from '../../core/io/traces';
import { jsonLines } from '../../core/io/jsonl';
import { type SteppedTrace, rowsFromTraces } from '../../core/eval/traceRows';

/** A metrics row: the step and its numeric fields (StepMetrics, and the held-out fields on evaluation steps). */
type Row = { step: number; meanReward: number } & Record<string, number>;

/** Fields every table shows; `--curves` adds columns and one SVG per field. */
const TABLE: readonly { key: string; title: string; digits: number }[] = [
  { key: 'meanReward', title: 'reward', digits: 3 },
  { key: 'accuracy', title: 'accuracy', digits: 3 },
  { key: 'gateRate', title: 'gate rate', digits: 3 },
  { key: 'meanTotalTokens', title: 'tokens', digits: 1 },
  { key: 'clonesPerEpisode', title: 'clones', digits: 2 },
];

/** Digits a value is shown with: small ones (KL, clip shares) in exponent form. */
const shownValue = (v: number, digits = 3) => (!Number.isFinite(v) ? '—' : v !== 0 && Math.abs(v) < 1e-2 ? v.toExponential(2) : v.toFixed(digits));

/** Runs side by side (the gating ablation): final numbers and reward curves from metrics.jsonl. */
export const compare = defineCommand(
  'compare',
  'Compare training runs from their metrics.jsonl (or, without one, their traces: a run read back from verl): a table of the last steps and an SVG of the reward curves.',
  {
    runs: { type: 'string', required: true, help: 'comma list of run directories or traces .jsonl files (label=path to name one)' },
    last: { type: 'int', default: 10, min: 1, max: 1_000_000, help: 'average the final numbers over this many last steps' },
    out: { type: 'string', help: 'write compare.md and reward.svg here' },
    curves: {
      type: 'string',
      default: 'meanReward',
      help: 'comma list of metrics fields to tabulate and draw, one SVG each (e.g. meanReward,approxKl,clipFraction,entropy,clipOutOfReach,evalAccuracy; reward.svg for meanReward)',
    },
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
    const curves = [
      ...new Set(
        f.curves
          .split(',')
          .map((c) => c.trim())
          .filter((c) => c !== ''),
      ),
    ];
    if (curves.length === 0) throw new UsageError('--curves: name at least one metrics field');
    for (const c of curves) {
      if (!runs.some(({ rows }) => rows.some((r) => typeof r[c] === 'number'))) {
        throw new UsageError(
          `--curves: no run has a numeric field ${JSON.stringify(c)} (fields: ${Object.keys(runs[0].rows[0])
            .filter((x) => typeof runs[0].rows[0][x] === 'number')
            .join(', ')})`,
        );
      }
    }
    // The mean of the field over the last k steps that recorded it (held-out fields: the last k evaluations).
    const avg = (rows: Row[], key: string) => {
      const v = rows
        .map((r) => r[key])
        .filter((x): x is number => typeof x === 'number' && Number.isFinite(x))
        .slice(-k);
      return v.length === 0 ? NaN : v.reduce((a, b) => a + b, 0) / v.length;
    };
    const columns = [...TABLE, ...curves.filter((c) => !TABLE.some((t) => t.key === c)).map((key) => ({ key, title: key, digits: 3 }))];
    const table = [
      `| run | steps | ${columns.map((c, i) => (i === 0 ? `${c.title} (last ${k})` : c.title)).join(' | ')} |`,
      `|---|---|${columns.map(() => '---').join('|')}|`,
      ...runs.map(({ label, rows }) => `| ${label} | ${rows.at(-1)!.step} | ${columns.map((c) => shownValue(avg(rows, c.key), c.digits)).join(' | ')} |`),
    ].join('\n');
    console.log(table);
    if (f.out) {
      await mkdir(f.out, { recursive: true });
      await writeFile(join(f.out, 'compare.md'), table + '\n');
      const files = curves.map((c) => ({ c, name: c === 'meanReward' ? 'reward.svg' : `${c}.svg` }));
      for (const { c, name } of files) await writeFile(join(f.out, name), curvesSvg(runs, c));
      console.log(`wrote ${f.out}/compare.md and ${files.map((x) => x.name).join(', ')}`);
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
      return rowsFromTraces(parseTracesJsonl(text) as SteppedTrace[]) as unknown as Row[];
    } catch (e) {
      throw new Error(`${tracesFile}: ${(e as Error).message}`);
    }
  }
  const text = directText ?? (await readFile(metricsFile, 'utf8'));
  const rows = jsonLines(text, (line) => new Error(`${metricsFile} line ${line} is not JSON`)).map(({ value }) => value as Row);
  if (!rows.length || rows[0].meanReward === undefined) throw new Error(`${metricsFile} has no GRPO metrics (meanReward)`);
  return rows;
}

/** One field's curves, one line per run over the steps that recorded it (held-out fields: their evaluation steps). */
function curvesSvg(runs: { label: string; rows: Row[] }[], key: string): string {
  const W = 520;
  const H = 300;
  const m = { l: 54, r: 120, t: 14, b: 30 };
  const points = runs.map(({ rows }) => rows.filter((r) => typeof r[key] === 'number' && Number.isFinite(r[key])));
  const all = points.flat();
  const maxStep = Math.max(1, ...all.map((r) => r.step));
  const lo = Math.min(...all.map((r) => r[key]));
  const hi = Math.max(...all.map((r) => r[key]));
  const sx = (s: number) => m.l + (s / maxStep) * (W - m.l - m.r);
  const sy = (v: number) => m.t + (1 - (v - lo) / (hi - lo || 1)) * (H - m.t - m.b);
  const lines = runs.map(({ label }, i) => {
    const colour = `hsl(${(i * 67) % 360}, 65%, 40%)`;
    const d = points[i].map((r, j) => `${j ? 'L' : 'M'}${sx(r.step).toFixed(1)},${sy(r[key]).toFixed(1)}`).join('');
    return `<path d="${d}" fill="none" stroke="${colour}"/><text x="${W - m.r + 6}" y="${m.t + 12 * (i + 1)}" fill="${colour}">${label.replace(/[<>&]/g, '')}</text>`;
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="10">`,
    '<rect width="100%" height="100%" fill="white"/>',
    `<line x1="${m.l}" y1="${H - m.b}" x2="${W - m.r}" y2="${H - m.b}" stroke="#444"/><line x1="${m.l}" y1="${m.t}" x2="${m.l}" y2="${H - m.b}" stroke="#444"/>`,
    `<text x="${m.l - 4}" y="${sy(hi) + 3}" text-anchor="end">${shownValue(hi, 2)}</text><text x="${m.l - 4}" y="${sy(lo) + 3}" text-anchor="end">${shownValue(lo, 2)}</text>`,
    `<text x="${(m.l + W - m.r) / 2}" y="${H - 6}" text-anchor="middle">step (max ${maxStep}) · ${key === 'meanReward' ? 'mean reward' : key}</text>`,
    ...lines,
    '</svg>',
  ].join('\n');
}
