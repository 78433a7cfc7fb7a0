/**
 * Training throughput in one thread vs data parallel with gradient worker threads
 * (`npm run bench -- sft [workers]`), `small` preset, two workloads: the warm start's own
 * 4,096-token steps (sequences of mixed lengths) and the profile's uniform step (64 rows × 64
 * tokens). Step by step, the same step is taken by a model in this thread alone and then by a
 * second model whose step is shared with the workers, so that the machine's drift (large on a
 * shared virtual machine) falls on both alike; printed: the ratio of the summed times and the
 * median of the steps' ratios. With them, the ceiling of that gain on this machine at that time:
 * the step's micro-batches computed (gradients only) once in this thread alone, then by this
 * thread and one worker at once, each the whole set; two threads' rate over one's is what a
 * data-parallel step could reach with no communication, no optimizer and perfect balance. The
 * parallel gain needs idle cores.
 */
import { type ModelConfig, presetConfig } from '../src/core/model/config';
import { type GPTParams, disposeParams, initParams } from '../src/core/model/params';
import { Rng } from '../src/core/rng';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import { releaseGradItem } from '../src/core/parallel/grads';
import { type TrainSequence, groupPlan, padBatch } from '../src/core/parallel/sequences';
import { defaultSftConfig } from '../src/core/runConfigTargets';
import { sftItem, sftSequences, sftStep } from '../src/core/sft/sft';
import { arithmetic } from '../src/core/tasks/arithmetic';
import { Tokenizer } from '../src/core/tokenizer/tokenizer';
import { UsageError } from '../src/cli/args';
import type { BackendName } from '../src/runtime/backend';
import type { GradPool } from '../src/runtime/gradient/gradPool';
import { startNodeGradPool } from '../src/runtime/node/gradWorkers';
import { median, trainingSequences } from './workloads';

const WARMUP = 2;
const PAIRS = 16;

/**
 * The step's micro-batches (gradients only, no optimizer) in this thread alone, then in this
 * thread and the first worker at once, each computing all of them: both wall times (ms). The
 * worker holds the weights of the pool's last sync.
 */
async function ceilingPair(
  params: GPTParams,
  config: ModelConfig,
  pool: GradPool,
  seqs: TrainSequence[],
  microTokens: number,
): Promise<{ alone: number; both: number }> {
  const plan = groupPlan(
    seqs.map((q) => q.tokens.length - 1),
    2,
    microTokens,
  );
  const batches = plan.groups.map((g) => padBatch(seqs, g));
  const totalWeight = seqs.reduce((n, q) => n + q.weights.reduce((a, b) => a + b, 0), 0);
  const all = batches.map((_, i) => i);
  const here = () => batches.forEach((b) => releaseGradItem(sftItem(params, config, b, totalWeight)));
  let t0 = performance.now();
  here();
  const alone = performance.now() - t0;
  t0 = performance.now();
  const away = pool.sftRemotes()[0](batches, totalWeight, 0, { fixed: all }, new AbortController().signal);
  here();
  if ((await away) === null) throw new Error('bench sft: the gradient worker is gone');
  return { alone, both: performance.now() - t0 };
}

/** A model and its optimizer that take training steps, in this thread alone or with a pool's workers. */
function trainer(config: ModelConfig, pool: GradPool | null, microTokens: number) {
  const params = initParams(config, 0);
  const opt = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
  return {
    params,
    /** One step's wall time (ms) and tokens. */
    async step(seqs: TrainSequence[]): Promise<{ ms: number; tokens: number }> {
      const t0 = performance.now();
      if (pool) await pool.sync(params, { kind: 'toy', config });
      const r = await sftStep(params, config, opt, seqs, 1e-3, microTokens, pool?.sftRemotes() ?? []);
      return { ms: performance.now() - t0, tokens: r.tokens };
    },
    dispose() {
      opt.dispose();
      disposeParams(params);
    },
  };
}

export async function runSftBench(args: string[], backend: BackendName): Promise<void> {
  const workers = Number(args[0] ?? 1);
  if (!(Number.isInteger(workers) && workers >= 1 && workers <= 64))
    throw new UsageError(`bench sft: the worker count must be an integer in [1, 64] (got ${args[0]})`);
  const tok = Tokenizer.builtin();
  const config = presetConfig('small');
  const cfg = { ...defaultSftConfig('arithmetic', 100), seed: 1 };
  const workloads: { name: string; step: (s: number) => TrainSequence[] }[] = [
    { name: 'warm-start steps (4,096 tokens, mixed lengths)', step: (s) => sftSequences(arithmetic, arithmetic.defaultOptions, cfg, s, (t) => tok.encode(t)) },
    { name: 'uniform step (64 rows × 64 tokens)', step: (s) => trainingSequences(64, 64, config.vocabSize, new Rng(1000 + s)) },
  ];
  const pool = await startNodeGradPool(workers, backend);
  try {
    console.log(
      `sft bench: small (${backend}); each workload's steps taken in pairs, the same step in one thread and then with ${workers} gradient worker(s), ${WARMUP} pairs not counted, then ${PAIRS}`,
    );
    for (const w of workloads) {
      const one = trainer(config, null, cfg.microTokens);
      const par = trainer(config, pool, cfg.microTokens);
      const ratios: number[] = [];
      let oneMs = 0;
      let parMs = 0;
      let tokens = 0;
      let aloneMs = 0;
      let bothMs = 0;
      try {
        for (let s = 0; s < WARMUP + PAIRS; s++) {
          const seqs = w.step(s);
          const a = await one.step(seqs);
          const b = await par.step(seqs);
          const c = workers === 1 ? await ceilingPair(par.params, config, pool, seqs, cfg.microTokens) : { alone: 0, both: 0 };
          if (s < WARMUP) continue;
          aloneMs += c.alone;
          bothMs += c.both;
          ratios.push(a.ms / b.ms);
          oneMs += a.ms;
          parMs += b.ms;
          tokens += a.tokens;
        }
      } finally {
        one.dispose();
        par.dispose();
      }
      const q = [...ratios].sort((x, y) => x - y);
      console.log(
        `${w.name}: one thread ${((tokens / oneMs) * 1000).toFixed(0)} tokens/s, with ${workers} gradient worker(s) ${((tokens / parMs) * 1000).toFixed(0)} tokens/s: ${(oneMs / parMs).toFixed(2)}× in all; a step's ratio: median ${median(ratios).toFixed(2)}×, quartiles ${q[Math.floor(PAIRS / 4)].toFixed(2)}–${q[Math.floor((3 * PAIRS) / 4)].toFixed(2)}×`,
      );
      if (workers === 1)
        console.log(
          `  ceiling: the same micro-batches, this thread alone ${((tokens / aloneMs) * 1000).toFixed(0)} tokens/s, this thread and the worker each all of them at once ${(((2 * tokens) / bothMs) * 1000).toFixed(0)} tokens/s: ${((2 * aloneMs) / bothMs).toFixed(2)}×; the step reaches ${((oneMs / parMs / ((2 * aloneMs) / bothMs)) * 100).toFixed(0)}% of it`,
        );
    }
  } finally {
    pool.terminate();
  }
}
