/**
 * SFT throughput in one thread vs data parallel with gradient worker threads
 * (`npm run bench -- sft [workers]`): the `small` preset, the warm start's 4,096-token steps,
 * the same steps timed both ways in one run. The parallel gain needs as many idle cores.
 */
import { presetConfig } from '../src/core/model/config';
import { disposeParams, initParams } from '../src/core/model/params';
import { ADAMW_DEFAULTS, AdamW } from '../src/core/rl/optim';
import { SFT_DEFAULTS, sftSequences, sftStep } from '../src/core/rl/sft';
import { arithmetic } from '../src/core/tasks/arithmetic';
import { Tokenizer } from '../src/core/tokenizer/tokenizer';
import type { BackendName } from '../src/runtime/backend';
import type { GradPool } from '../src/runtime/gradPool';
import { startNodeGradPool } from '../src/runtime/node/gradWorkers';

const STEPS = 4;

export async function runSftBench(args: string[], backend: BackendName): Promise<void> {
  const workers = Number(args[0] ?? 1);
  const tok = Tokenizer.builtin();
  const config = presetConfig('small');
  const cfg = { ...SFT_DEFAULTS, task: 'arithmetic', steps: 100, seed: 1 };
  const rate = async (pool: GradPool | null): Promise<number> => {
    const params = initParams(config, 0);
    const opt = new AdamW(params, ADAMW_DEFAULTS);
    let tokens = 0;
    let t0 = 0;
    for (let s = 0; s <= STEPS; s++) {
      if (s === 1) t0 = performance.now(); // step 0 warms up kernels and caches
      if (pool) await pool.sync(params, config);
      const seqs = sftSequences(arithmetic, arithmetic.defaultOptions, cfg, s, (t) => tok.encode(t));
      const r = await sftStep(params, config, opt, seqs, 1e-3, cfg.microTokens, pool?.sftRemotes() ?? []);
      if (s >= 1) tokens += r.tokens;
    }
    const perSec = tokens / ((performance.now() - t0) / 1000);
    opt.dispose();
    disposeParams(params);
    return perSec;
  };
  const single = await rate(null);
  console.log(`one thread (${backend}): ${single.toFixed(0)} tokens/s`);
  const pool = await startNodeGradPool(workers, backend);
  const parallel = await rate(pool);
  pool.terminate();
  console.log(`with ${workers} gradient worker(s): ${parallel.toFixed(0)} tokens/s`);
  console.log(`ratio: ${(parallel / single).toFixed(2)}`);
}
