/**
 * How the rates scale with the work (`npm run bench -- scaling [--backend ...] [--presets
 * tiny,small,medium] [--quick]`), for each preset:
 *
 *   training: tokens/s of a training step (sftStep: forward, backward, AdamW) against sequence
 *             length × rows (lengths past the preset's context skipped);
 *   decode:   tokens/s of KV-cached single-token steps (BatchedDecoder, no sampling) against rows;
 *   GRPO:     time of a GRPO step (grpoStep as `train` runs it, then the weight sync) against
 *             rollout worker threads (0 = rollouts in this thread) and gradient worker threads
 *             (0 = every update's gradient in this thread; n: shared with n threads).
 *
 * Each measurement: a warm-up step, then `--reps` timed steps, median. Each table's ratios are
 * to its first row, measured in the same run. Training and decode use random init (their time
 * depends only on the shapes). GRPO rollouts depend on the policy: a random one breaks the
 * protocol within a few tokens and the episode ends, so GRPO starts from a shipped warm start
 * whose shape matches the preset (`--grpo-init`), random init only where none does (`medium`);
 * the table prints the tokens per episode with the time.
 * `--quick` shrinks the grids and the GRPO step to one repetition each, for a smoke check (well under a minute).
 */
import { toyPolicyModel, toyScorer } from '../src/core/policyModel';
import { parseFlags } from '../src/cli/args';
import { loadPolicy } from '../src/cli/setup';
import type { ModelConfig } from '../src/core/model/config';
import type { Policy } from '../src/core/policy';
import { cloneParams, disposeParams, initParams } from '../src/core/model/params';
import { Rng } from '../src/core/rng';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import { type GrpoConfig, grpoStep } from '../src/core/rl/grpoStep';
import { defaultGrpoConfig, defaultSftConfig } from '../src/core/runConfigTargets';

/** The GRPO step this bench times unless flags say otherwise: 8 prompts × 4, one update per step (the figures in docs/BENCHMARKS.md). */
const BENCH_GRPO = { batch: 8, group: 4, miniBatch: null };
import { arithmetic } from '../src/core/tasks/arithmetic';
import { Tokenizer } from '../src/core/tokenizer/tokenizer';
import type { BackendName } from '../src/runtime/backend';
import { startNodeGradPool } from '../src/runtime/node/gradWorkers';
import { PolicyRollouts } from '../src/runtime/node/pool';
import { type BenchPreset, benchPreset, decodeStep, intList, median, prefilledDecoder, printTable, timeMs, trainStep, trainingSequences } from './workloads';

const FLAGS = {
  presets: { type: 'string', default: 'tiny,small,medium', help: 'comma list of tiny, small, medium' },
  quick: { type: 'bool', default: false, help: 'small grids, one repetition: a smoke check' },
  reps: { type: 'int', min: 1, max: 100, help: 'timed steps per measurement (default 3; --quick: 1)' },
  seqs: { type: 'string', help: 'training sequence lengths (default 32,64,128,256)' },
  rows: { type: 'string', help: 'training rows (default 8,32,64)' },
  'decode-rows': { type: 'string', help: 'decode rows (default 1,4,16,64,256)' },
  'decode-steps': { type: 'int', min: 1, max: 4096, help: 'single-token steps timed per repetition (default 32)' },
  'decode-prompt': { type: 'int', default: 16, min: 1, max: 4096, help: 'tokens prefilled in each context before the steps' },
  workers: { type: 'string', help: 'GRPO rollout workers (default 0,1,2)' },
  'grad-workers': { type: 'string', help: 'GRPO gradient workers, each with every rollout-worker count (default 0,1)' },
  'mini-batch': { type: 'int', min: 1, max: 1024, help: 'prompts per PPO mini-batch, one update each (default: the whole batch, one update)' },
  'grpo-batch': { type: 'int', min: 1, max: 1024, help: `prompts per GRPO step (default ${BENCH_GRPO.batch})` },
  'grpo-group': { type: 'int', min: 1, max: 64, help: `episodes per prompt (default ${BENCH_GRPO.group})` },
  'root-max-tokens': { type: 'int', min: 1, max: 8192, help: 'root tokens per episode at most (default 64)' },
  'micro-tokens': { type: 'int', default: defaultSftConfig().microTokens, min: 1, max: 1 << 20, help: 'largest padded training micro-batch (as sft)' },
  'grpo-init': {
    type: 'string',
    default: 'public/checkpoints/warmstart,public/checkpoints/warmstart-tiny',
    help: 'checkpoint directories GRPO starts from, each for the preset of its shape',
  },
} as const;

interface Plan {
  presets: BenchPreset[];
  reps: number;
  seqs: number[];
  rows: number[];
  decodeRows: number[];
  decodeSteps: number;
  decodePrompt: number;
  workers: number[];
  gradWorkers: number[];
  grpo: GrpoConfig;
  grpoInit: string[];
  microTokens: number;
}

function planOf(args: string[]): Plan {
  const f = parseFlags(args, FLAGS);
  const q = f.quick;
  const pick = <T>(given: T | undefined, full: T, quick: T): T => given ?? (q ? quick : full);
  const reps = pick(f.reps, 3, 1);
  return {
    presets: f.presets.split(',').map((name) => benchPreset(name.trim())),
    reps,
    seqs: intList('seqs', pick(f.seqs, '32,64,128,256', '32,64')),
    rows: intList('rows', pick(f.rows, '8,32,64', '8')),
    decodeRows: intList('decode-rows', pick(f['decode-rows'], '1,4,16,64,256', '1,16')),
    decodeSteps: pick(f['decode-steps'], 32, 4),
    decodePrompt: f['decode-prompt'],
    workers: intList('workers', pick(f.workers, '0,1,2', '0,1')),
    gradWorkers: intList('grad-workers', pick(f['grad-workers'], '0,1', '0,1')),
    grpo: {
      ...defaultGrpoConfig('arithmetic'),
      steps: reps + 1,
      seed: 1,
      batch: pick(f['grpo-batch'], BENCH_GRPO.batch, 2),
      group: pick(f['grpo-group'], BENCH_GRPO.group, 2),
      miniBatch: f['mini-batch'] ?? BENCH_GRPO.miniBatch,
      rollout: { ...defaultGrpoConfig('arithmetic').rollout, rootMaxTokens: pick(f['root-max-tokens'], 64, 16) },
    },
    grpoInit: f['grpo-init']
      .split(',')
      .map((d) => d.trim())
      .filter((d) => d.length > 0),
    microTokens: f['micro-tokens'],
  };
}

const rate = (x: number) => (x >= 100 ? x.toFixed(0) : x.toPrecision(2));
const ratio = (x: number) => x.toFixed(2);

async function trainingTable(p: BenchPreset, plan: Plan): Promise<void> {
  const { config } = p;
  const params = initParams(config, 0);
  const opt = new AdamW(params, { ...ADAM_MOMENTS, lr: 1e-3, weightDecay: 0, gradClip: 1 });
  const rng = new Rng(1);
  const rows: string[][] = [];
  let first = 0;
  const skipped: number[] = [];
  for (const seq of plan.seqs) {
    if (seq < 1 || seq > config.nPositions) {
      skipped.push(seq);
      continue;
    }
    for (const r of plan.rows) {
      const seqs = trainingSequences(r, seq, config.vocabSize, rng);
      const step = () => trainStep(params, config, opt, seqs, plan.microTokens);
      await step(); // warm-up: kernels and XNNPACK operators for these shapes
      const ms: number[] = [];
      for (let i = 0; i < plan.reps; i++) ms.push(await timeMs(step));
      const perSec = (r * seq) / (median(ms) / 1000);
      first ||= perSec;
      rows.push([String(seq), String(r), String(r * seq), median(ms).toFixed(0), rate(perSec), ratio(perSec / first)]);
    }
  }
  opt.dispose();
  disposeParams(params);
  console.log(`training step (forward, backward, AdamW; micro-batches of ≤ ${plan.microTokens} tokens):`);
  printTable(['seq', 'rows', 'tokens', 'ms/step', 'tokens/s', 'vs first'], rows);
  if (skipped.length > 0) console.log(`  skipped seq ${skipped.join(', ')}: past the context of ${config.nPositions}`);
}

async function decodeTable(p: BenchPreset, plan: Plan): Promise<void> {
  const { config } = p;
  const warmups = 2;
  const context = plan.decodePrompt + warmups + plan.decodeSteps;
  if (context > config.nPositions) {
    console.log(`decode: skipped, ${context} tokens per context is past the context of ${config.nPositions}`);
    return;
  }
  const params = initParams(config, 0);
  const rng = new Rng(2);
  const rows: string[][] = [];
  let first = 0;
  for (const r of plan.decodeRows) {
    if (r < 1) continue;
    const perSec: number[] = [];
    // One more round than timed: the first compiles the kernels of this row count.
    for (let rep = 0; rep <= plan.reps; rep++) {
      const { decoder, slots } = await prefilledDecoder(params, config, r, plan.decodePrompt, rng);
      for (let i = 0; i < warmups; i++) await decodeStep(decoder, slots, rng);
      const ms = await timeMs(async () => {
        for (let i = 0; i < plan.decodeSteps; i++) await decodeStep(decoder, slots, rng);
      });
      decoder.dispose();
      if (rep > 0) perSec.push((r * plan.decodeSteps) / (ms / 1000));
    }
    const m = median(perSec);
    first ||= m;
    rows.push([String(r), ((r / m) * 1000).toFixed(2), rate(m), ratio(m / first)]);
  }
  disposeParams(params);
  console.log(`decode (KV cache, contexts of ${plan.decodePrompt + warmups}..${context} tokens, ${plan.decodeSteps} steps, no sampling):`);
  printTable(['rows', 'ms/step', 'tokens/s', 'vs first'], rows);
}

const sameShape = (a: ModelConfig, b: ModelConfig) =>
  a.nLayer === b.nLayer && a.nEmbd === b.nEmbd && a.nHead === b.nHead && a.nPositions === b.nPositions && a.vocabSize === b.vocabSize;

/** The first `--grpo-init` checkpoint of the preset's shape (its directory and weights), or null. */
async function grpoStart(config: ModelConfig, dirs: readonly string[]): Promise<{ dir: string; policy: Policy } | null> {
  for (const dir of dirs) {
    const { policy } = await loadPolicy(dir, false);
    if (sameShape(policy.config, config)) return { dir, policy };
    disposeParams(policy.params);
  }
  return null;
}

async function grpoTable(p: BenchPreset, plan: Plan, backend: BackendName): Promise<void> {
  const { config } = p;
  const cfg = plan.grpo;
  const tok = Tokenizer.builtin();
  const encode = (t: string) => tok.encode(t);
  const start = await grpoStart(config, plan.grpoInit);
  const startParams = start?.policy.params ?? initParams(config, 0, { trainable: false });
  const rows: string[][] = [];
  let first = 0;
  for (const workers of plan.workers) {
    for (const gradWorkers of plan.gradWorkers) {
      // The same initial weights and the same steps (hence prompts) for every worker count.
      const policy: Policy = { config, params: cloneParams(startParams, { trainable: true }) };
      const reference = cfg.loss.beta > 0 ? startParams : null;
      const optimizer = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
      const startMs = performance.now();
      const rollouts = workers > 0 ? await PolicyRollouts.start(toyPolicyModel(policy, encode), workers, backend, 0) : null;
      const grads = await startNodeGradPool(gradWorkers, backend);
      const gradients = grads.share({ kind: 'toy', config });
      const startup = performance.now() - startMs;
      const ms: number[] = [];
      const episodeTokens: number[] = [];
      const rolloutRates: number[] = [];
      const rolloutShares: number[] = [];
      try {
        for (let step = 0; step <= plan.reps; step++) {
          const decoder = rollouts?.decoder;
          let tokens = 0;
          let rolloutRate = 0;
          let rolloutMs = 0;
          const t = await timeMs(async () => {
            const { metrics } = await grpoStep(
              {
                model: toyPolicyModel(policy, encode),
                reference: reference === null ? null : toyScorer(reference, policy.config),
                optimizer,
                task: arithmetic,
                encode,
                ...(decoder ? { decoder } : {}),
                ...(gradients ? { gradients } : {}),
              },
              cfg,
              step,
            );
            tokens = metrics.meanTotalTokens;
            rolloutRate = metrics.rolloutTokensPerSec;
            rolloutMs = rolloutRate > 0 ? (1000 * tokens * cfg.batch * cfg.group) / rolloutRate : 0;
            await rollouts?.sync(step + 1);
          });
          if (step === 0) continue; // warm-up
          ms.push(t);
          episodeTokens.push(tokens);
          rolloutRates.push(rolloutRate);
          rolloutShares.push(rolloutMs / t);
        }
      } finally {
        rollouts?.close();
        grads.terminate();
        optimizer.dispose();
        disposeParams(policy.params);
      }
      const m = median(ms);
      first ||= m;
      const started = workers + gradWorkers > 0 ? (startup / 1000).toFixed(1) : '-';
      rows.push([
        String(workers),
        String(gradWorkers),
        (m / 1000).toFixed(2),
        `${(100 * median(rolloutShares)).toFixed(0)}%`,
        median(episodeTokens).toFixed(0),
        rate(median(rolloutRates)),
        ratio(first / m),
        started,
      ]);
    }
  }
  disposeParams(startParams);
  const from = start ? `from ${start.dir}` : 'from random init (no --grpo-init checkpoint of this shape: episodes end at the first protocol violation)';
  const updates = cfg.miniBatch === null ? 'one update' : `${Math.ceil(cfg.batch / cfg.miniBatch)} updates (mini-batches of ${cfg.miniBatch} prompts)`;
  console.log(
    `GRPO step (${cfg.batch} prompts × ${cfg.group} episodes, arithmetic, root ≤ ${cfg.rollout.rootMaxTokens} tokens, ${updates}, then the weight sync; ${from}):`,
  );
  printTable(['rollout workers', 'grad workers', 's/step', 'rollouts', 'tokens/episode', 'rollout tokens/s', 'speed-up vs first', 'pool start s'], rows);
}

export async function runScalingBench(args: string[], backend: BackendName): Promise<void> {
  const plan = planOf(args);
  const t0 = performance.now();
  console.log(`scaling bench: backend ${backend}; ${plan.reps} timed step(s) per measurement after a warm-up, median; training and decode from random init`);
  for (const p of plan.presets) {
    console.log(`\n== ${p.label}`);
    await trainingTable(p, plan);
    await decodeTable(p, plan);
    await grpoTable(p, plan, backend);
  }
  console.log(`\n(${((performance.now() - t0) / 1000).toFixed(0)} s in all)`);
}
