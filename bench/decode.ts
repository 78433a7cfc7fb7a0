/**
 * Cached vs uncached decoding on the `small` preset (random init, one thread, `--backend`: wasm by default).
 *
 *   (a) BatchedDecoder: 32 contexts with short prompts, 128 sampled tokens each, all contexts
 *       stepping together (prefill included in the time);
 *   (b) no cache: one context, the full forward over the whole prefix for every new token.
 *
 * Prints tokens/s of both (best of two alternating rounds) and `ratio: a/b`. `--profile` adds
 * the kernel time of one decode step per op type. On wasm it also compares, alternating, one
 * kernel a layer against the layer composed of tfjs ops, and (composed) the project's matMul
 * kernel against tfjs's and the in-place cache write against the scatter. `--against DIR` names a second checkout (an
 * earlier commit in a git worktree, its node_modules linked): its own `bench decode` runs in a
 * child process, alternating with (a) here, three rounds, and the median ratio is printed.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseFlags } from '../src/cli/args';
import { inPlaceCacheWriteAvailable, setInPlaceCacheWrite } from '../src/core/model/cacheWrite';
import { fusedDecodeLayerAvailable, setFusedDecodeLayer } from '../src/core/model/decodeLayer';
import * as tf from '@tensorflow/tfjs';
import { Rng } from '../src/core/rng';
import { PRESETS } from '../src/core/model/config';
import { BatchedDecoder } from '../src/core/model/decode';
import { forwardLogits } from '../src/core/model/gpt';
import { initParams, type GPTParams } from '../src/core/model/params';
import { sampleFromLogits } from '../src/core/model/sample';
import { T } from '../src/core/tokenizer/vocab';
import type { BackendName } from '../src/runtime/backend';
import { fastBatchMatMulActive, setFastBatchMatMul } from '../src/runtime/wasmKernels/batchMatMul';
import { median } from './workloads';

const CONTEXTS = 32;
const NEW_TOKENS = 128;
const ROUNDS = 2;
const SAMPLING = { temperature: 1, topK: 0 };
const BANNED: ReadonlySet<number> = new Set([T.pad]);
const AGAINST_ROUNDS = 3;

const FLAGS = {
  profile: { type: 'bool', default: false, help: 'add the kernel time of one decode step per op type' },
  reference: {
    type: 'bool',
    default: false,
    help: "print only the cached batched rate (the machine's speed, as other benches quote it) and stop",
  },
  against: {
    type: 'string',
    default: '',
    help: 'another checkout of this project (e.g. an earlier commit in a worktree) whose cached decode is measured in the same run',
  },
} as const;

/** Tokens/s of one cached run of CONTEXTS × NEW_TOKENS that took `seconds`. */
const rate = (seconds: number) => (CONTEXTS * NEW_TOKENS) / seconds;

function prompt(rng: Rng, vocab: number): number[] {
  const length = rng.int(4, 12);
  return Array.from({ length }, () => rng.int(21, vocab - 1));
}

async function cachedRun(params: GPTParams, contexts: number, newTokens: number, rng: Rng): Promise<{ seconds: number; stepMs: number }> {
  const config = PRESETS.small;
  const V = config.vocabSize;
  const decoder = new BatchedDecoder(params, config, { capacity: contexts });
  const start = performance.now();
  const slots = Array.from({ length: contexts }, () => decoder.open());
  let logits = await decoder.feed(
    slots,
    slots.map(() => prompt(rng, V)),
  );
  let stepTime = 0;
  for (let i = 1; i < newTokens; i++) {
    const next = slots.map((_, s) => [sampleFromLogits(logits, s * V, V, SAMPLING, rng, BANNED).id]);
    const t0 = performance.now();
    logits = await decoder.feed(slots, next);
    stepTime += performance.now() - t0;
  }
  for (let s = 0; s < contexts; s++) sampleFromLogits(logits, s * V, V, SAMPLING, rng, BANNED);
  const seconds = (performance.now() - start) / 1000;
  decoder.dispose();
  return { seconds, stepMs: stepTime / Math.max(1, newTokens - 1) };
}

async function uncachedRun(params: GPTParams, newTokens: number, rng: Rng): Promise<number> {
  const config = PRESETS.small;
  const V = config.vocabSize;
  const seq = prompt(rng, V);
  const start = performance.now();
  for (let i = 0; i < newTokens; i++) {
    const logits = tf.tidy(() => {
      const all = forwardLogits(params, config, tf.tensor2d([seq], [1, seq.length], 'int32'));
      return tf.slice(all, [0, seq.length - 1, 0], [1, 1, V]);
    });
    const row = (await logits.data()) as Float32Array;
    logits.dispose();
    seq.push(sampleFromLogits(row, 0, V, SAMPLING, rng, BANNED).id);
  }
  return (performance.now() - start) / 1000;
}

async function profileStep(params: GPTParams, rng: Rng): Promise<void> {
  const config = PRESETS.small;
  const V = config.vocabSize;
  const decoder = new BatchedDecoder(params, config, { capacity: CONTEXTS });
  const slots = Array.from({ length: CONTEXTS }, () => decoder.open());
  await decoder.feed(
    slots,
    slots.map(() => prompt(rng, V)),
  );
  for (let i = 0; i < 64; i++)
    await decoder.feed(
      slots,
      slots.map(() => [rng.int(21, V - 1)]),
    );
  const info = await tf.profile(async () => {
    await decoder.feed(
      slots,
      slots.map(() => [rng.int(21, V - 1)]),
    );
  });
  const byKernel = new Map<string, { ms: number; count: number }>();
  for (const k of info.kernels) {
    const ms = typeof k.kernelTimeMs === 'number' ? k.kernelTimeMs : 0;
    const e = byKernel.get(k.name) ?? { ms: 0, count: 0 };
    byKernel.set(k.name, { ms: e.ms + ms, count: e.count + 1 });
  }
  const total = [...byKernel.values()].reduce((a, b) => a + b.ms, 0);
  console.log(`profile of one step at context ~${decoder.length(slots[0])} (${info.kernels.length} kernels, ${total.toFixed(2)} ms kernel time):`);
  for (const [name, { ms, count }] of [...byKernel.entries()].sort((a, b) => b[1].ms - a[1].ms)) {
    console.log(`  ${name.padEnd(22)} ${String(count).padStart(4)} × ${ms.toFixed(2).padStart(7)} ms`);
  }
  decoder.dispose();
}

export async function runDecodeBench(args: string[], backend: BackendName): Promise<void> {
  const f = parseFlags(args, FLAGS);
  const against = f.against === '' ? null : againstRoot(f.against);
  const config = PRESETS.small;
  const params = initParams(config, 1);
  console.log(`decode bench: preset small (${config.nLayer} layers, d=${config.nEmbd}), backend ${backend}, ${CONTEXTS} contexts × ${NEW_TOKENS} new tokens`);

  // Warm-up: wasm kernels, XNNPACK operators, derived weights.
  await cachedRun(params, 4, 8, new Rng(7));
  if (f.reference) {
    console.log(`cached batched: ${(await decodeReferenceRate(params)).toFixed(0)} tokens/s`);
    return;
  }
  await uncachedRun(params, 4, new Rng(7));

  // Alternate the two measurements and keep the best of each: on a shared machine a burst of
  // load from elsewhere should not decide the ratio.
  let cached = { seconds: Infinity, stepMs: Infinity };
  let uncachedSeconds = Infinity;
  for (let round = 0; round < ROUNDS; round++) {
    const c = await cachedRun(params, CONTEXTS, NEW_TOKENS, new Rng(1));
    if (c.seconds < cached.seconds) cached = c;
    uncachedSeconds = Math.min(uncachedSeconds, await uncachedRun(params, NEW_TOKENS, new Rng(2)));
  }
  const cachedRate = rate(cached.seconds);
  const uncachedRate = NEW_TOKENS / uncachedSeconds;
  console.log(`cached batched: ${cachedRate.toFixed(0)} tokens/s (${cached.seconds.toFixed(2)} s; one ${CONTEXTS}-row step ${cached.stepMs.toFixed(2)} ms)`);
  console.log(`uncached single: ${uncachedRate.toFixed(1)} tokens/s (${uncachedSeconds.toFixed(2)} s)`);
  console.log(`ratio: ${(cachedRate / uncachedRate).toFixed(1)}`);

  const fusedLayer = fusedDecodeLayerAvailable();
  if (fusedLayer) {
    // The same cached decode with each layer composed of tfjs ops (~60 kernel calls a layer).
    const { on, off } = await alternating(setFusedDecodeLayer, () => cachedRun(params, CONTEXTS, NEW_TOKENS, new Rng(1)));
    console.log(
      `one kernel a decode layer: ${rate(on).toFixed(0)} tokens/s against ${rate(off).toFixed(0)} with the layer composed of tfjs ops: ${(off / on).toFixed(2)}×`,
    );
  }
  // The two comparisons below are of the composed layer (the fused one runs neither tfjs's
  // matMul kernels nor the scatter), so it is off while they run.
  setFusedDecodeLayer(false);
  try {
    if (fastBatchMatMulActive()) {
      // The same cached decode with tfjs's own wasm kernels for every matMul (the same graph).
      const { on, off } = await alternating(setFastBatchMatMul, () => cachedRun(params, CONTEXTS, NEW_TOKENS, new Rng(1)));
      console.log(
        `project's matMul kernel (composed layers): ${rate(on).toFixed(0)} tokens/s against ${rate(off).toFixed(0)} with tfjs's own kernels for the same graph: ${(off / on).toFixed(2)}×`,
      );
    }
    if (inPlaceCacheWriteAvailable()) {
      // The same cached decode with the cache written by tfjs's scatter (a copy of the cache per write).
      const { on, off } = await alternating(setInPlaceCacheWrite, () => cachedRun(params, CONTEXTS, NEW_TOKENS, new Rng(1)));
      console.log(
        `in-place cache writes (composed layers): ${rate(on).toFixed(0)} tokens/s against ${rate(off).toFixed(0)} with tfjs's scatter (a cache copy a write): ${(off / on).toFixed(2)}×`,
      );
    }
  } finally {
    setFusedDecodeLayer(fusedLayer);
  }

  if (f.profile) await profileStep(params, new Rng(3));
  if (against !== null) await againstCheckout(against, backend, () => cachedRun(params, CONTEXTS, NEW_TOKENS, new Rng(1)));
}

/** The machine's speed as the benches quote it: cached batched decoding on `small`, tokens/s, best of ROUNDS. */
async function decodeReferenceRate(params: GPTParams): Promise<number> {
  let best = Infinity;
  for (let round = 0; round < ROUNDS; round++) best = Math.min(best, (await cachedRun(params, CONTEXTS, NEW_TOKENS, new Rng(1))).seconds);
  return rate(best);
}

/** The checkout `dir` names, checked before anything is measured. */
function againstRoot(dir: string): string {
  const root = resolve(dir);
  if (!existsSync(join(root, 'bench', 'main.ts'))) throw new Error(`bench decode: --against ${dir}: no bench/main.ts there`);
  if (!existsSync(join(root, 'node_modules', '.bin', 'tsx')))
    throw new Error(`bench decode: --against ${dir}: no node_modules/.bin/tsx there (link this checkout's node_modules)`);
  return root;
}

/**
 * (a) of another checkout against this one, alternating rounds (theirs, then ours), each side's
 * best of two; prints every round and the median ratio. Their rate is read from their own
 * bench's `cached batched:` line, so any earlier commit with this bench can be named.
 */
async function againstCheckout(root: string, backend: BackendName, run: () => Promise<{ seconds: number }>): Promise<void> {
  const tsx = join(root, 'node_modules', '.bin', 'tsx');
  const theirs: number[] = [];
  const ours: number[] = [];
  for (let round = 1; round <= AGAINST_ROUNDS; round++) {
    const child = spawnSync(tsx, ['bench/main.ts', 'decode', '--backend', backend], { cwd: root, encoding: 'utf8', timeout: 600_000 });
    const m = /cached batched: (\d+) tokens\/s/.exec(child.stdout ?? '');
    if (child.status !== 0 || m === null)
      throw new Error(
        `bench decode: --against ${root}: its bench failed (exit ${child.status}): ${(child.stderr ?? '').trim().split('\n').slice(-3).join(' | ')}`,
      );
    const best = await bestSeconds(run);
    theirs.push(Number(m[1]));
    ours.push(rate(best));
    console.log(
      `against ${root}, round ${round}: theirs ${theirs[round - 1]} tokens/s, this checkout ${ours[round - 1].toFixed(0)} tokens/s: ${(ours[round - 1] / theirs[round - 1]).toFixed(2)}×`,
    );
  }
  console.log(
    `against ${root}: median ${median(ours).toFixed(0)} / ${median(theirs).toFixed(0)} tokens/s = ${(median(ours) / median(theirs)).toFixed(2)}× (cached, ${CONTEXTS} rows)`,
  );
}

/** The best of ROUNDS runs, in seconds. */
async function bestSeconds(run: () => Promise<{ seconds: number }>): Promise<number> {
  let best = Infinity;
  for (let k = 0; k < ROUNDS; k++) best = Math.min(best, (await run()).seconds);
  return best;
}

/** Seconds of `run` with a kernel switched off and on, alternating rounds, best of each (the switch ends on). */
async function alternating(set: (on: boolean) => unknown, run: () => Promise<{ seconds: number }>): Promise<{ on: number; off: number }> {
  let on = Infinity;
  let off = Infinity;
  try {
    for (let round = 0; round < ROUNDS; round++) {
      set(false);
      off = Math.min(off, (await run()).seconds);
      set(true);
      on = Math.min(on, (await run()).seconds);
    }
  } finally {
    set(true);
  }
  return { on, off };
}
