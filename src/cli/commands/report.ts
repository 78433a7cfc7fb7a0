import { EVAL_SPLITS, type EvalSplit, HELD_OUT_SEED } from '../../core/eval/splits';
import { SEED_MAX } from '../../core/rng';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { defineCommand } from '../command';
import { LATEST, checkOutDir } from '../runDir';
import { BACKEND_FLAG, getTokenizer, loadPolicy, openDecoder, setupBackend } from '../setup';
import { withOptions } from '../../core/tasks';
import { heldOutProblems } from '../../core/eval/evaluate';
import { FRONTIER_DEFAULTS, type FrontierPoint, frontier, frontierCsv, validateLimits } from '../../core/eval/frontier';
import { UsageError } from '../args';
import { type FrontierPanel, frontierSvg } from '../../core/eval/frontierSvg';
import { disposeParams } from '../../core/model/params';

/** The settings of the full comparison: task, options, label. */
const SETTINGS = [
  { label: 'arithmetic 3–8 operands (in distribution)', task: 'arithmetic', options: {} },
  { label: 'arithmetic 9–16 operands (out of distribution)', task: 'arithmetic', options: { minOperands: 9, maxOperands: 16 } },
  { label: 'multihop 6 chunks, 2 hops', task: 'multihop', options: {} },
  // The task's long-context setting: 6 chunks of 4 assignments among filler, the whole context
  // (≈ 320 tokens) past the 256-token window of one monolithic prompt, each clone reading one chunk.
  { label: 'multihop 6 chunks × 4 assignments among filler, 2 hops (long context)', task: 'multihop', options: { chunks: 6, perChunk: 4, filler: 24 } },
  // Fits one window, and the delegating root's context is under half the monolithic one.
  { label: 'multihop 6 chunks × 3 among filler, 2 hops (fits)', task: 'multihop', options: { filler: 16 } },
  { label: 'multihop 8 chunks, 3 hops (out of distribution)', task: 'multihop', options: { chunks: 8, hops: 3 } },
] as const;

export const report = defineCommand(
  'report',
  'The full comparison: each checkpoint × delegation, monolithic and self-consistency (k = 1, 2, 4, 8) × both tasks, in and out of distribution. Writes frontier.json, frontier.csv, frontier.svg and report.md.',
  {
    out: { type: 'string', required: true, help: 'output directory' },
    n: { type: 'int', default: 100, min: 1, max: 100_000, help: 'problems per setting' },
    seed: { type: 'int', default: HELD_OUT_SEED, min: 0, max: SEED_MAX, help: 'seed of the problem sets' },
    split: {
      type: 'string',
      choices: EVAL_SPLITS,
      default: 'final',
      help: 'problem set: final (the final evaluation) or monitor (the set watched during training); disjoint from each other and from training problems',
    },
    checkpoints: {
      type: 'string',
      default: 'warmstart=public/checkpoints/warmstart,grpo=public/checkpoints/selfcest-arith',
      help: 'comma list of label=dir (missing dirs are skipped and noted)',
    },
    limits: { type: 'string', default: FRONTIER_DEFAULTS.limits.join(','), help: 'root token limits' },
    backend: BACKEND_FLAG,
    workers: { type: 'int', default: 0, min: 0, max: 16, help: 'rollout worker threads (0 = decode in this process)' },
  },
  async (f) => {
    await checkOutDir(f.out);
    const backend = await setupBackend(f.backend);
    const tok = getTokenizer();
    const encode = (t: string) => tok.encode(t);
    let limits: number[];
    try {
      limits = validateLimits(f.limits.split(',').map(Number));
    } catch (e) {
      throw new UsageError(`--${(e as Error).message}`);
    }
    const entries = f.checkpoints.split(',').map((e) => e.split('=') as [string, string]);
    // A checkpoint directory, or a run directory (its committed save).
    const skipped = entries.filter(([, dir]) => !existsSync(join(dir, 'model.safetensors')) && !existsSync(join(dir, LATEST)));
    const comparisons: { checkpoint: string; setting: string; points: FrontierPoint[]; pareto: number[] }[] = [];
    for (const [label, dir] of entries) {
      if (skipped.some(([l]) => l === label)) continue;
      const { policy } = await loadPolicy(dir, false);
      const { decoder, close } = await openDecoder(policy, f.workers, backend);
      for (const s of SETTINGS) {
        const { task, opts } = withOptions(s.task, s.options);
        const problems = heldOutProblems(task, opts, f.n, f.seed, f.split as EvalSplit);
        const r = await frontier(decoder, task, problems, { ...FRONTIER_DEFAULTS, limits, seed: f.seed }, encode, (p) =>
          console.log(`${label} | ${s.label} | ${p.method} @${p.limit}: ${(p.accuracy * 100).toFixed(1)}% at ${p.meanTokens.toFixed(0)} tokens`),
        );
        r.points.forEach((p) => (p.checkpoint = label));
        comparisons.push({ checkpoint: label, setting: s.label, ...r });
      }
      close();
      disposeParams(policy.params);
    }
    const out = f.out;
    await mkdir(out, { recursive: true });
    const meta = {
      n: f.n,
      seed: f.seed,
      split: f.split,
      limits,
      checkpoints: Object.fromEntries(entries),
      skipped: skipped.map(([l, d]) => `${l} (${d}: no checkpoint)`),
    };
    await writeFile(join(out, 'frontier.json'), JSON.stringify({ ...meta, comparisons }, null, 1) + '\n');
    await writeFile(
      join(out, 'frontier.csv'),
      frontierCsv(comparisons.flatMap((c) => c.points.map((p) => ({ ...p, checkpoint: `${c.checkpoint} | ${c.setting}` })))),
    );
    const panels: FrontierPanel[] = comparisons.map((c) => ({ title: `${c.checkpoint}: ${c.setting}`, points: c.points }));
    await writeFile(join(out, 'frontier.svg'), frontierSvg(panels));
    await writeFile(join(out, 'report.md'), markdown(comparisons, meta.skipped, f.n, f.seed, f.split));
    console.log(`wrote ${out}/frontier.json, frontier.csv, frontier.svg, report.md${skipped.length ? ` (skipped: ${meta.skipped.join('; ')})` : ''}`);
  },
);

function markdown(
  comparisons: { checkpoint: string; setting: string; points: FrontierPoint[]; pareto: number[] }[],
  skipped: string[],
  n: number,
  seed: number,
  split: string,
): string {
  const lines = [
    `# Frontier report`,
    '',
    `n = ${n} problems per setting from the ${split} set (disjoint from training and from the other held-out set), problem seed ${seed}. Pareto points marked ★ (by total generated tokens). Root tokens: generated by the root; root context: the longest context one model call holds (prompt, own tokens, injected answers).`,
    '',
  ];
  if (skipped.length) lines.push(`Skipped: ${skipped.join('; ')}.`, '');
  for (const c of comparisons) {
    lines.push(
      `## ${c.checkpoint}: ${c.setting}`,
      '',
      '| method | limit | accuracy | 95% interval | tokens | critical path | root tokens | root context | |',
      '|---|---|---|---|---|---|---|---|---|',
    );
    const num = (x: number | undefined) => (x === undefined ? '—' : x.toFixed(1));
    c.points.forEach((p, i) =>
      lines.push(
        `| ${p.method} | ${p.limit} | ${(p.accuracy * 100).toFixed(1)}% | ${(p.interval[0] * 100).toFixed(1)}–${(p.interval[1] * 100).toFixed(1)}% | ${num(p.meanTokens)} | ${num(p.meanCriticalPathTokens)} | ${num(p.meanRootTokens)} | ${num(p.meanRootContextTokens)} | ${c.pareto.includes(i) ? '★' : ''} |`,
      ),
    );
    lines.push('');
  }
  return lines.join('\n');
}
