/**
 * Rollout decoding in this thread vs in a pool of worker threads (`npm run bench -- pool [maxWorkers]`).
 *
 * The `small` preset (random init, wasm), 32 contexts with short prompts, 64 sampled tokens
 * each, all stepping together: the shape of a GRPO step's rollouts. Prints tokens/s of the
 * in-process BatchedDecoder and of PooledDecoder over 1, 2, … workers, and each one's ratio to
 * in-process. 1 worker shows the cost of the messages; more workers show the parallel gain,
 * which needs as many idle cores.
 */
import { PRESETS } from '../src/core/model/config';
import { BatchedDecoder } from '../src/core/model/decode';
import { disposeParams, initParams, paramsToArrays } from '../src/core/model/params';
import { sampleFromLogits } from '../src/core/model/sample';
import { Rng } from '../src/core/rng';
import type { ContextDecoder } from '../src/core/rollout/scheduler';
import type { BackendName } from '../src/runtime/backend';
import { startNodePool } from '../src/runtime/node/pool';
import { PooledDecoder } from '../src/runtime/rollout/pooledDecoder';
import { packWeights } from '../src/runtime/transport/weights';

const CONTEXTS = 32;
const NEW_TOKENS = 64;
const config = PRESETS.small;

async function decodeRun(decoder: Pick<ContextDecoder, 'open' | 'close' | 'feed'>): Promise<number> {
  const rng = new Rng(1);
  const V = config.vocabSize;
  const start = performance.now();
  const slots = Array.from({ length: CONTEXTS }, () => decoder.open());
  let logits = await decoder.feed(
    slots,
    slots.map(() => Array.from({ length: rng.int(4, 12) }, () => rng.int(21, V - 1))),
  );
  for (let i = 1; i < NEW_TOKENS; i++) {
    const next = slots.map((_, r) => [sampleFromLogits(logits, r * V, V, { temperature: 1, topK: 0 }, rng).id]);
    logits = await decoder.feed(slots, next);
  }
  for (const s of slots) decoder.close(s);
  return (CONTEXTS * NEW_TOKENS) / ((performance.now() - start) / 1000);
}

export async function runPoolBench(args: string[], backend: BackendName): Promise<void> {
  const maxWorkers = Number(args[0] ?? 2);
  const params = initParams(config, 0);
  const local = new BatchedDecoder(params, config, { capacity: CONTEXTS });
  await decodeRun(local); // warm-up
  const base = await decodeRun(local);
  local.dispose();
  console.log(`in-process (${backend}): ${base.toFixed(0)} tokens/s`);
  const weights = packWeights(await paramsToArrays(params), true);
  for (let n = 1; n <= maxWorkers; n++) {
    const pool = await startNodePool(n, backend);
    await pool.broadcast({ version: 0, model: { kind: 'toy', config }, payload: weights });
    const pooled = new PooledDecoder(pool, { kind: 'toy', config });
    await decodeRun(pooled); // warm-up
    const rate = await decodeRun(pooled);
    console.log(`pool of ${n}: ${rate.toFixed(0)} tokens/s, ratio ${(rate / base).toFixed(2)}`);
    pool.terminate();
  }
  disposeParams(params);
}
