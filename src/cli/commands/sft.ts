/**
 * `sft`: the warm start, supervised training on the teachers' demonstrations, for any model: a toy
 * model (fresh, or `--init`), or a Hugging Face model (`--model`: the same demonstrations, drawn by
 * seed and step, rendered in the reference's text protocol by core/sft/textDemos.ts and trained by
 * core/sft/textSft.ts over LoRA adapters or every weight). One loop and one run directory for both;
 * a flag one kind of model cannot honour is refused by name. Resumable.
 */
import { SFT_IMPLIED } from '../../core/io/savedConfig';
import { defineRunCommand } from '../command';
import { UsageError, usageErrors } from '../args';
import { MODEL_FLAG, loadTextModel, modelSummary, warnTextFit } from '../hfModel';
import { openTextPolicyRun, trainingOf } from '../textPolicyRun';
import { TEXT_LENGTHS } from '../../core/rollout/textLimits';
import { rolloutConfigOf, sftConfigOf, taskMixOf } from '../../core/runConfigTargets';
import { HF_MODEL_ONLY, type RunConfig, type RunConfigKey, fieldOf, flagName } from '../../core/runConfig';
import type { RolloutConfig } from '../../core/rollout/config';
import { RunDir, type RunState, allSkippedError, checkOutDir, checkResumeConfig, formatDuration, policyWeights } from '../runDir';
import { BACKEND_FLAG, freshPolicy, getTokenizer, loadPolicyFlag, setupBackend } from '../setup';
import { AdamW, ADAM_MOMENTS, cosineLr } from '../../core/optim/adamw';
import { type SftConfig, type SftStepOutcome, type TaskMixEntry, scorerLearner, sftMetricsRow, sftMixSequences, sftStep, sftStepOf } from '../../core/sft/sft';
import { textSftSequences } from '../../core/sft/textSft';
import { type PolicyModel, hfPolicyModel, hfScorer, toyPolicyModel } from '../../core/policyModel';
import type { TrainSequence } from '../../core/parallel/sequences';
import { heldOutProblems, runProblems, summarize } from '../../core/eval/evaluate';
import { HELD_OUT_SEED } from '../../core/eval/splits';
import type { Policy } from '../../core/policy';
import { failureWarnings, startNodeGradPool } from '../../runtime/node/gradWorkers';

/** Run-config fields a Hugging Face model's warm start has no form for: refused with `--model`, by flag. */
const TOY_ONLY: readonly RunConfigKey[] = ['preset', 'rootLimitStraddle', 'sftLabelSmoothing'];

/** What the loop needs of the model a warm start trains, whichever kind it is. */
interface Student {
  /** The run's config as its state records it (a resume must match it). */
  runConfig: Record<string, unknown>;
  saved: RunState | null;
  optimizer: AdamW;
  restoreOptimizer(): void;
  describe(argv: readonly string[]): Promise<void>;
  sequences(step: number): TrainSequence[];
  step(seqs: readonly TrainSequence[], lr: number): Promise<SftStepOutcome>;
  /** The held-out reading as metrics-row fields, and a few words for the progress line. */
  evaluate(): Promise<{ fields: Record<string, unknown>; text: string }>;
  save(state: RunState, rows: object[]): Promise<void>;
  close(): void;
}

export const sft = defineRunCommand(
  'sft',
  'Warm start: supervised training on teacher demonstrations, of a toy model or a Hugging Face model (--model: the spawn_clone text protocol, LoRA or every weight). Resumes from --out when it holds a run.',
  {
    init: { type: 'string', dir: true, help: 'start from this toy checkpoint instead of a random model' },
    steps: { type: 'int', required: true, min: 1, max: 10_000_000, help: 'total optimisation steps' },
    out: { type: 'string', required: true, help: 'run directory (resumable)' },
    'save-every': { type: 'int', default: 50, min: 1, max: 10_000_000, help: 'steps between saves' },
    'log-every': { type: 'int', default: 10, min: 1, max: 10_000_000, help: 'steps between progress lines' },
    workers: {
      type: 'int',
      default: 0,
      min: 0,
      max: 16,
      help: 'extra gradient worker threads (data parallel; 0 = this thread only; a Hugging Face model with --lora-r 0)',
    },
    backend: BACKEND_FLAG,
    model: {
      ...MODEL_FLAG,
      required: false,
      help: `train this Hugging Face model in the text protocol instead of the toy (${MODEL_FLAG.help}); a demonstrated root may write --root-max-tokens (default ${TEXT_LENGTHS.rootMaxTokens}) of its tokens, a clone the largest of --budgets`,
    },
  },
  async ({ flags: f, config: given0, given, argv }) => {
    const renames = { taskOptions: '--options', task: '--task' } as const;
    // A text root writes chat turns: its length (and the largest limit it may be told) defaults to the text protocol's.
    const rc: RunConfig = f.model !== undefined && !given.has('rootMaxTokens') ? { ...given0, rootMaxTokens: TEXT_LENGTHS.rootMaxTokens } : given0;
    const mix = usageErrors(() => taskMixOf(rc), renames);
    let cfg = usageErrors(() => sftConfigOf(rc, f.steps), renames);
    // Flags of one kind of model given to the other are refused by name, never ignored.
    const named = (names: readonly string[]) => names.filter((n) => argv.some((a) => a === n || a.startsWith(`${n}=`)));
    if (f.model !== undefined) {
      const refused = [...TOY_ONLY.filter((k) => given.has(k)).map((k) => `--${flagName(fieldOf(k))}`), ...named(['--init'])];
      if (refused.length > 0)
        throw new UsageError(
          `${refused.join(', ')}: not for a Hugging Face model's warm start (the toy model's size and init, a straddled limit, label smoothing)`,
        );
      if (f.workers > 0 && rc.loraR !== 0)
        throw new UsageError(
          '--workers: gradient workers rebuild the model from its trained weights: with --lora-r 0 (every weight trained), not LoRA adapters',
        );
    } else {
      const textOnly = HF_MODEL_ONLY.filter((k) => given.has(k)).map((k) => `--${flagName(fieldOf(k))}`);
      if (textOnly.length > 0) throw new UsageError(`${textOnly.join(', ')}: only with --model (a Hugging Face model's warm start)`);
    }
    await checkOutDir(f.out);
    const backend = await setupBackend(f.backend);
    const student = f.model !== undefined ? await textStudent(f as TextFlags, rc, given, mix, cfg, backend) : await toyStudent(f, rc, given, mix, cfg, backend);
    const { saved } = student;
    cfg = { ...cfg, warmup: student.runConfig.warmup as number };
    let step = 0;
    let elapsed = 0;
    let tokensSeen = 0;
    if (saved) {
      checkResumeConfig(saved.config, student.runConfig, ['steps', 'microTokens'], SFT_IMPLIED);
      student.restoreOptimizer();
      ({ step, elapsedSec: elapsed, tokensSeen } = saved);
      const before = saved.config.steps;
      console.log(
        `resuming ${f.out} at step ${step}/${cfg.steps}${typeof before === 'number' && before !== cfg.steps ? ` (extended from ${before} steps: the learning-rate schedule now ends at step ${cfg.steps})` : ''}`,
      );
    } else {
      await student.describe(argv);
      console.log(`new run in ${f.out}: ${JSON.stringify(student.runConfig)}`);
    }
    let appliedSteps = 0;
    let skippedSteps = 0;
    let skippedSinceLog = 0;
    const sessionStart = Date.now();
    const sessionFirstStep = step;
    let windowStart = Date.now();
    let windowTokens = 0;
    const pending: object[] = [];
    while (step < cfg.steps) {
      const t0 = Date.now();
      const lr = cosineLr(step, cfg.steps, cfg.lr, cfg.warmup, cfg.minLrFrac);
      const r = await student.step(student.sequences(step), lr);
      step++;
      elapsed += (Date.now() - t0) / 1000;
      tokensSeen += r.tokens;
      windowTokens += r.tokens;
      const row: Record<string, unknown> = { ...sftMetricsRow(step, r, lr, elapsed) };
      if (r.applied) appliedSteps++;
      else {
        skippedSteps++;
        skippedSinceLog++;
      }
      let evalText = '';
      if (rc.evalEvery > 0 && (step % rc.evalEvery === 0 || step === cfg.steps)) {
        const e = await student.evaluate();
        Object.assign(row, e.fields);
        evalText = e.text;
      }
      pending.push(row);
      if (step % f['log-every'] === 0 || step === cfg.steps) {
        const rate = windowTokens / ((Date.now() - windowStart) / 1000);
        const eta = ((cfg.steps - step) * (Date.now() - sessionStart)) / 1000 / Math.max(1, step - sessionFirstStep);
        console.log(
          `step ${step}/${cfg.steps} loss ${r.loss.toFixed(4)} lr ${lr.toExponential(2)} gnorm ${r.gradNorm.toFixed(2)} tok/s ${Math.round(rate)} eta ${formatDuration(eta)}${evalText}` +
            (skippedSinceLog > 0 ? ` | SKIPPED ${skippedSinceLog} non-finite step(s) since the last line` : ''),
        );
        skippedSinceLog = 0;
        windowStart = Date.now();
        windowTokens = 0;
      }
      if (step % f['save-every'] === 0 || step === cfg.steps) {
        await student.save(
          { kind: 'sft', step, config: student.runConfig, elapsedSec: elapsed, tokensSeen, savedAt: new Date().toISOString() },
          pending.splice(0),
        );
      }
    }
    student.close();
    const skipError = allSkippedError(appliedSteps, skippedSteps);
    if (skipError) throw new Error(skipError);
    console.log(`done: ${f.out} at step ${step}${skippedSteps > 0 ? ` (${skippedSteps} step(s) skipped as non-finite)` : ''}`);
  },
);

/** The run's warm-up: the one stored when it started (a resume with more --steps keeps it; the default derives from the step count), unless given now. */
function warmupOf(cfg: SftConfig, saved: RunState | null, given: ReadonlySet<string>): SftConfig {
  const savedWarmup = saved?.config.warmup;
  return typeof savedWarmup === 'number' && !given.has('sftWarmup') ? { ...cfg, warmup: savedWarmup } : cfg;
}

/** The toy model's warm start: a fresh model of the preset or `--init`, every weight, gradient workers with `--workers`. */
async function toyStudent(
  f: { out: string; init?: string; workers: number },
  rc: RunConfig,
  given: ReadonlySet<string>,
  mix: readonly TaskMixEntry[],
  cfg0: SftConfig,
  backend: Awaited<ReturnType<typeof setupBackend>>,
): Promise<Student> {
  const tok = getTokenizer();
  const encode = (t: string) => tok.encode(t);
  const runDir = await RunDir.open(f.out, 'sft', policyWeights(rc.preset));
  const saved = runDir.saved?.state ?? null;
  const cfg = warmupOf(cfg0, saved, given);
  const policy: Policy = runDir.saved?.weights ?? (f.init ? (await loadPolicyFlag('init', f.init)).policy : freshPolicy(rc.preset, cfg.seed));
  const optimizer = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
  // Data parallel: the workers take shares of each step's micro-batches.
  const grad = f.workers > 0 ? await startNodeGradPool(f.workers, backend) : null;
  const warnFailures = failureWarnings(grad);
  const runConfig: Record<string, unknown> = { ...cfg, preset: rc.preset, init: f.init ?? null };
  return {
    runConfig,
    saved,
    optimizer,
    restoreOptimizer: () => runDir.restoreOptimizer(optimizer),
    describe: (argv) => runDir.describe(argv, runConfig),
    sequences: (step) => sftMixSequences(mix, cfg, step, encode, policy.config.nPositions),
    step: async (seqs, lr) => {
      if (grad) await grad.sync(policy.params, { kind: 'toy', config: policy.config });
      const r = await sftStep(
        policy.params,
        policy.config,
        optimizer,
        seqs,
        lr,
        cfg.microTokens,
        grad?.sftRemotes() ?? [],
        grad?.patience,
        cfg.labelSmoothing ?? 0,
      );
      warnFailures();
      return r;
    },
    evaluate: () => heldOut(toyPolicyModel(policy, encode), mix, rc.evalN, rolloutConfigOf(rc, { greedy: true }), encode),
    save: (state, rows) => runDir.save(policy, optimizer, state, { 'metrics.jsonl': rows }),
    close: () => grad?.terminate(),
  };
}

interface TextFlags {
  model: string;
  out: string;
  workers: number;
}

/**
 * A Hugging Face model's warm start: the demonstrations in the text protocol, LoRA or every weight.
 * A demonstrated root may write `rootMaxTokens` of the model's tokens (256 unless given: a chat turn,
 * not the toy's characters), a clone the run's largest budget; a longer demonstration is left out.
 */
async function textStudent(
  f: TextFlags,
  rc: RunConfig,
  given: ReadonlySet<string>,
  mix: readonly TaskMixEntry[],
  cfg0: SftConfig,
  backend: Awaited<ReturnType<typeof setupBackend>>,
): Promise<Student> {
  const loaded = await loadTextModel('model', f.model, rc.weights);
  const { model } = loaded;
  console.log(modelSummary(loaded));
  const lengths = {
    rootMaxTokens: given.has('rootMaxTokens') ? rc.rootMaxTokens : TEXT_LENGTHS.rootMaxTokens,
    cloneBudget: Math.max(...cfg0.limits.budgets),
  };
  warnTextFit(model, mix, { ...lengths, maxClonesPerRound: cfg0.limits.maxClonesPerRound, maxRounds: cfg0.limits.maxRounds });
  const training = trainingOf(rc, model);
  const run = await openTextPolicyRun(f.out, 'sft', loaded, training, f.model, cfg0.seed);
  const { policy, runDir } = run;
  const saved = runDir.saved?.state ?? null;
  const cfg = warmupOf(cfg0, saved, given);
  const runConfig: Record<string, unknown> = { ...cfg, model: f.model, lengths, training: training.full ? { full: true } : { lora: training.lora } };
  const optimizer = new AdamW(policy.trainable, { ...ADAM_MOMENTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
  // The one warm-start step, over the model's scorer (its adapters, or every weight).
  const learner = scorerLearner(hfScorer(policy.model, policy.trainable));
  // Data parallel (every weight trained): the workers rebuild the model from its weights and take shares of each step's micro-batches.
  const grad = f.workers > 0 ? await startNodeGradPool(f.workers, backend) : null;
  const warnFailures = failureWarnings(grad);
  const replica = { kind: 'hf', config: model.config } as const;
  return {
    runConfig,
    saved,
    optimizer,
    restoreOptimizer: () => runDir.restoreOptimizer(optimizer),
    describe: (argv) => runDir.describe(argv, runConfig),
    sequences: (step) => textSftSequences(mix, cfg, step, model.tokenizer, lengths, model.config.maxPositions),
    step: async (seqs, lr) => {
      if (grad) await grad.sync(policy.trainable, replica);
      const r = await sftStepOf(learner, optimizer, seqs, lr, cfg.microTokens, grad?.sftRemotes() ?? [], grad?.patience);
      warnFailures();
      return r;
    },
    evaluate: () =>
      heldOut(
        hfPolicyModel(policy.model, model.tokenizer, new Map()),
        mix,
        rc.evalN,
        rolloutConfigOf(rc, { greedy: true, rootMaxTokens: lengths.rootMaxTokens, budgets: [lengths.cloneBudget] }),
        () => [],
      ),
    save: (state, rows) => run.save(optimizer, state, { 'metrics.jsonl': rows }),
    close: () => grad?.terminate(),
  };
}

const fmt = (x: unknown) => (typeof x === 'number' ? x.toFixed(3) : String(x));

/**
 * The warm start's held-out reading, for every model: greedy accuracy with and without delegation
 * on the first `n` monitor problems (HELD_OUT_SEED) of every task of the mix, decoded by the one
 * runner in the model's protocol. The first task keeps the plain keys (delegateAcc, monoAcc,
 * delegateTokens, monoTokens, delegationRate), the others are `<task>.delegateAcc` and so on.
 */
async function heldOut(
  model: PolicyModel,
  mix: readonly Pick<TaskMixEntry, 'task' | 'opts'>[],
  n: number,
  greedy: RolloutConfig,
  encode: (t: string) => number[],
): Promise<{ fields: Record<string, unknown>; text: string }> {
  const decoder = model.decoder(64);
  const fields: Record<string, unknown> = {};
  let text = '';
  try {
    for (const [i, { task, opts }] of mix.entries()) {
      const problems = heldOutProblems(task, opts, n, HELD_OUT_SEED, 'monitor');
      const row: Record<string, number> = {};
      for (const mono of [false, true]) {
        const s = summarize(await runProblems(decoder, task, problems, { ...greedy, allowSpawn: !mono }, 1, encode));
        row[mono ? 'monoAcc' : 'delegateAcc'] = s.accuracy;
        row[mono ? 'monoTokens' : 'delegateTokens'] = s.meanTokens;
        if (!mono) row.delegationRate = s.delegationRate;
      }
      for (const [k, v] of Object.entries(row)) fields[i === 0 ? k : `${task.name}.${k}`] = v;
      text += ` | ${i === 0 ? 'eval' : task.name} delegate ${fmt(row.delegateAcc)} (delegating ${fmt(row.delegationRate)}) mono ${fmt(row.monoAcc)}`;
    }
  } finally {
    decoder.dispose();
  }
  return { fields, text };
}
