/**
 * Training throughput in one thread vs data parallel with gradient worker threads
 * (`npm run bench -- sft [workers]`), `small` preset, two workloads: the warm start's own
 * 4,096-token steps (sequences of mixed lengths) and the profile's uniform step (64 rows × 64
 * tokens). Each is timed one thread then parallel, alternating over rounds after a round that is
 * not counted; the median of the rounds' ratios is printed. The parallel gain needs idle cores.
 */
import { presetConfig } from '../src/core/model/config';
import { disposeParams, initParams } from '../src/core/model/params';
import { Rng } from '../src/core/rng';
import { ADAMW_DEFAULTS, AdamW } from '../src/core/rl/optim';
import type { TrainSequence } from '../src/core/rl/sequences';
import { SFT_DEFAULTS, sftSequences, sftStep } from '../src/core/rl/sft';
import { arithmetic } from '../src/core/tasks/arithmetic';
import { Tokenizer } from '../src/core/tokenizer/tokenizer';
import { UsageError } from '../src/cli/args';
import type { BackendName } from '../src/runtime/backend';
import type { GradPool } from '../src/runtime/gradPool';
import { startNodeGradPool } from '../src/runtime/node/gradWorkers';
import { median, trainingSequences } from './workloads';

const STEPS = 5;
const ROUNDS = 5;

export async function runSftBench(args: string[], backend: BackendName): Promise<void> {
  const workers = Number(args[0] ?? 1);
  if (!(Number.isInteger(workers) && workers >= 1 && workers <= 64)) throw new UsageError(`bench sft: the worker count must be an integer in [1, 64] (got ${args[0]})`);
  const tok = Tokenizer.builtin();
  const config = presetConfig('small');
  const cfg = { ...SFT_DEFAULTS, task: 'arithmetic', steps: 100, seed: 1 };
  const workloads: { name: string; step: (s: number) => TrainSequence[] }[] = [
    { name: 'warm-start steps (4,096 tokens, mixed lengths)', step: (s) => sftSequences(arithmetic, arithmetic.defaultOptions, cfg, s, (t) => tok.encode(t)) },
    { name: 'uniform step (64 rows × 64 tokens)', step: (s) => trainingSequences(64, 64, config.vocabSize, new Rng(1000 + s)) },
  ];
  // The same steps each time (problems by step index), from the same initial weights.
  const rate = async (step: (s: number) => TrainSequence[], pool: GradPool | null): Promise<number> => {
    const params = initParams(config, 0);
    const opt = new AdamW(params, ADAMW_DEFAULTS);
    let tokens = 0;
    let t0 = 0;
    for (let s = 0; s <= STEPS; s++) {
      if (s === 1) t0 = performance.now(); // step 0 warms up kernels and caches
      if (pool) await pool.sync(params, config);
      const r = await sftStep(params, config, opt, step(s), 1e-3, cfg.microTokens, pool?.sftRemotes() ?? []);
      if (s >= 1) tokens += r.tokens;
    }
    const perSec = tokens / ((performance.now() - t0) / 1000);
    opt.dispose();
    disposeParams(params);
    return perSec;
  };
  const pool = await startNodeGradPool(workers, backend);
  try {
    console.log(`sft bench: small, ${STEPS} steps a measurement, one thread then with ${workers} gradient worker(s), a round not counted then ${ROUNDS} (${backend})`);
    for (const w of workloads) {
      // The worker's kernels, JIT and heap warm up over more than one step.
      await rate(w.step, null);
      await rate(w.step, pool);
      const ratios: number[] = [];
      for (let round = 1; round <= ROUNDS; round++) {
        const single = await rate(w.step, null);
        const parallel = await rate(w.step, pool);
        ratios.push(parallel / single);
        console.log(`${w.name}, round ${round}: one thread ${single.toFixed(0)} tokens/s, with ${workers} gradient worker(s) ${parallel.toFixed(0)} tokens/s: ${(parallel / single).toFixed(2)}×`);
      }
      console.log(`${w.name}: median ${median(ratios).toFixed(2)}× (rounds ${ratios.map((r) => r.toFixed(2)).join(', ')})`);
    }
  } finally {
    pool.terminate();
  }
}
