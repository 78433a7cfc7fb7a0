/**
 * `train`: GRPO with clone credit and rollout gating, for any model: a toy checkpoint (`--init`,
 * the token grammar) or a Hugging Face model (`--model`, the reference's text protocol under its
 * chat template; LoRA adapters in PEFT's format, or every weight with `--lora-r 0`). Both run the
 * one trainer (core/rl/grpoRun.ts, grpoStep.ts) over the model seam (core/policyModel.ts) with the
 * same run-config flags; a flag one kind of model cannot honour is refused by name. Resumable.
 */
import type * as tf from '@tensorflow/tfjs';
import { type PolicyModel, type Scorer, hfPolicyModel, hfReferenceScorer, toyPolicyModel, toyScorer } from '../../core/policyModel';
import { defineRunCommand } from '../command';
import { UsageError, usageErrors } from '../args';
import { grpoConfigOf, taskMixOf } from '../../core/runConfigTargets';
import { HF_MODEL_ONLY, type RunConfig, type RunConfigKey, fieldOf, flagName } from '../../core/runConfig';
import { RunDir, type RunState, allSkippedError, policyWeights, checkOutDir, checkResumeConfig, formatDuration } from '../runDir';
import { BACKEND_FLAG, getTokenizer, loadPolicyFlag, setupBackend } from '../setup';
import { cloneParams } from '../../core/model/params';
import { GRPO_IMPLIED } from '../../core/io/savedConfig';
import { AdamW, ADAM_MOMENTS } from '../../core/optim/adamw';
import { GrpoRun, heldOutRowFields } from '../../core/rl/grpoRun';
import type { StepProgress } from '../../core/rl/grpoStep';
import { scoredTrace } from '../../core/rollout/trace';
import type { ContextDecoder } from '../../core/rollout/scheduler';
import { TEXT_LENGTHS } from '../../core/rollout/textLimits';
import { REFERENCE_RECIPE, withReferenceRecipe } from '../../core/verl/config';
import type { Policy } from '../../core/policy';
import { failureWarnings, startNodeGradPool } from '../../runtime/node/gradWorkers';
import { PolicyRollouts } from '../../runtime/node/pool';
import { loadTextModel, modelSummary, warnTextFit } from '../hfModel';
import { openTextPolicyRun, trainingOf } from '../textPolicyRun';

const RECIPES = ['project', 'reference'] as const;

/** Run-config fields a Hugging Face model has no form for: refused with `--model`, by flag. */
const TOY_ONLY: readonly RunConfigKey[] = ['preset', 'rootLimitStraddle'];

type Rows = { 'metrics.jsonl': object[]; 'traces.jsonl': object[] };

/** How often a step in progress prints where it is (ms). */
const PROGRESS_MS = 5000;

/** What the loop needs of the model a run trains, whichever kind it is. */
interface Trainee {
  model: PolicyModel;
  reference: Scorer | null;
  /** What the run directory holds about the run so far; null for a new run. */
  saved: RunState | null;
  restoreOptimizer(opt: AdamW): void;
  describe(argv: readonly string[], runConfig: Record<string, unknown>): Promise<void>;
  save(opt: AdamW, state: RunState, rows: Rows): Promise<void>;
  /** The toy's policy (rollout and gradient workers replicate it); absent for a Hugging Face model. */
  toy?: Policy;
}

export const train = defineRunCommand(
  'train',
  'GRPO with clone credit and rollout gating from a toy checkpoint (--init) or a Hugging Face model (--model: the spawn_clone text protocol, LoRA or every weight). Resumes from --out when it holds a run.',
  {
    init: { type: 'string', dir: true, help: 'starting toy checkpoint (also the frozen KL reference); or give --model' },
    model: {
      type: 'string',
      help: 'a Hugging Face model to train instead: a folder (gpt2, llama, qwen2, qwen3: config.json, model.safetensors, tokenizer.json, tokenizer_config.json) or a Hub id; its weights as given are the KL reference',
    },
    steps: { type: 'int', required: true, min: 1, max: 10_000_000, help: 'total GRPO steps' },
    out: { type: 'string', required: true, help: 'run directory (resumable)' },
    'save-every': { type: 'int', default: 10, min: 1, max: 10_000_000, help: 'steps between saves' },
    'trace-every': { type: 'int', default: 1, min: 1, max: 10_000_000, help: 'write the traces of every Nth step' },
    backend: BACKEND_FLAG,
    workers: { type: 'int', default: 0, min: 0, max: 16, help: 'rollout worker threads (0 = roll out in this process; a Hugging Face model with --lora-r 0)' },
    'grad-workers': {
      type: 'int',
      default: 0,
      min: 0,
      max: 16,
      help: 'extra gradient worker threads for the updates (data parallel; 0 = this thread only; a Hugging Face model with --lora-r 0)',
    },
    recipe: {
      type: 'string',
      choices: RECIPES,
      default: 'project',
      help: "whose settings the run-config flags not given take: the project's table, or the reference's (SELFCEST's verl recipe: batch 32, group 4, lr 6e-7, clip 0.1, 30 clones a round, 9 rounds, its reward constants; with --model its root length, 4,096 tokens)",
    },
  },
  async ({ flags: f, config: given, given: named, argv }) => {
    if ((f.init === undefined) === (f.model === undefined)) {
      throw new UsageError('give the model to train: --init (a toy checkpoint) or --model (a Hugging Face model), one of them');
    }
    const hf = f.model !== undefined;
    const refuse = (flags: string[], why: string) => {
      if (flags.length > 0) throw new UsageError(`${flags.join(', ')}: ${why}`);
    };
    if (hf) {
      refuse(
        TOY_ONLY.filter((k) => named.has(k)).map((k) => `--${flagName(fieldOf(k))}`),
        "a fresh toy preset, or a limit drawn below the problem's chain counted in the toy's tokens",
      );
      refuse(
        given.loraR !== 0 ? (['workers', 'grad-workers'] as const).filter((k) => f[k] > 0).map((k) => `--${k}`) : [],
        'worker threads rebuild the model from its trained weights: with --lora-r 0 (every weight trained), not LoRA adapters',
      );
    } else {
      refuse(
        HF_MODEL_ONLY.filter((k) => named.has(k)).map((k) => `--${flagName(fieldOf(k))}`),
        'a toy checkpoint trains every weight in float32 (these are for --model)',
      );
    }
    const reference = f.recipe === 'reference';
    const recipe = reference ? withReferenceRecipe(given, named) : given;
    // A text root writes chat turns: its limit defaults to the text protocol's (or the reference's response length), not the token grammar's.
    const textRoot = reference ? REFERENCE_RECIPE.lengths.responseLength : TEXT_LENGTHS.rootMaxTokens;
    const rc: RunConfig = hf && !named.has('rootMaxTokens') ? { ...recipe, rootMaxTokens: textRoot } : recipe;
    const cfg = usageErrors(() => grpoConfigOf(rc, f.steps), { taskOptions: '--options', miniBatch: '--mini-batch' });
    await checkOutDir(f.out);
    const mix = usageErrors(() => taskMixOf(rc, '--options'), {});
    const backend = await setupBackend(f.backend);
    const tok = getTokenizer();
    const encode = (t: string) => tok.encode(t);
    let runConfig: Record<string, unknown>;
    let trainee: Trainee;
    if (f.model !== undefined) {
      const loaded = await loadTextModel('model', f.model, rc.weights);
      console.log(modelSummary(loaded));
      warnTextFit(loaded.model, mix, { ...cfg.rollout, cloneBudget: Math.max(...cfg.rollout.budgets) });
      const training = trainingOf(rc, loaded.model);
      runConfig = { ...cfg, model: f.model, recipe: f.recipe, training: training.full ? { full: true } : { lora: training.lora } };
      const run = await openTextPolicyRun(f.out, 'train', loaded, training, f.model, cfg.seed);
      const { policy, runDir } = run;
      trainee = {
        model: hfPolicyModel(policy.model, policy.model.tokenizer, policy.trainable),
        // The reference decodes without adapters: the frozen base (LoRA), or the weights as given (full).
        reference: cfg.loss.beta > 0 ? hfReferenceScorer(policy.model.config, policy.reference) : null,
        saved: runDir.saved?.state ?? null,
        restoreOptimizer: (opt) => runDir.restoreOptimizer(opt),
        describe: (a, c) => runDir.describe(a, c),
        save: (opt, state, rows) => run.save(opt, state, rows),
      };
    } else {
      runConfig = { ...cfg, init: f.init, ...(reference ? { recipe: f.recipe } : {}) };
      const start = await loadPolicyFlag('init', f.init as string);
      const runDir = await RunDir.open(f.out, 'train', policyWeights(String(start.meta.preset ?? 'custom')));
      const policy = runDir.saved?.weights ?? start.policy;
      trainee = {
        model: toyPolicyModel(policy, encode),
        // The frozen reference is the starting checkpoint, also after a resume.
        reference:
          cfg.loss.beta > 0 ? toyScorer(runDir.saved ? start.policy.params : cloneParams(start.policy.params, { trainable: false }), policy.config) : null,
        saved: runDir.saved?.state ?? null,
        restoreOptimizer: (opt) => runDir.restoreOptimizer(opt),
        describe: (a, c) => runDir.describe(a, c),
        save: (opt, state, rows) => runDir.save(policy, opt, state, rows),
        toy: policy,
      };
    }
    const { model, saved } = trainee;
    const optimizer = () =>
      new AdamW(model.params as Map<string, tf.Variable>, { ...ADAM_MOMENTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
    let opt = optimizer();
    let step = 0;
    let elapsed = 0;
    let tokensSeen = 0;
    if (saved) {
      checkResumeConfig(saved.config, runConfig, ['steps', 'microTokens'], GRPO_IMPLIED);
      trainee.restoreOptimizer(opt);
      ({ step, elapsedSec: elapsed, tokensSeen } = saved);
      console.log(`resuming ${f.out} at step ${step}/${cfg.steps}`);
    } else {
      await trainee.describe(argv, runConfig);
      console.log(`new run in ${f.out}: ${JSON.stringify(runConfig)}`);
    }
    const save = (rows: Rows) =>
      trainee.save(opt, { kind: 'train', step, config: runConfig, elapsedSec: elapsed, tokensSeen, savedAt: new Date().toISOString() }, rows);
    let appliedSteps = 0;
    let skippedSteps = 0;

    // With --workers, rollouts run in worker threads holding a replica tagged with the step.
    const rollouts = f.workers > 0 ? await PolicyRollouts.start(model, f.workers, backend, step) : null;
    // With --grad-workers, each update's sequences are shared with gradient worker threads.
    const grads = await startNodeGradPool(f['grad-workers'], backend);
    const warnFailures = failureWarnings(grads);
    // The weights a step starts from, as the rollout workers were sent them (with --workers): the gradient workers' first sync reuses them.
    let startCopy: Map<string, Float32Array> | undefined;
    const run = new GrpoRun(cfg, mix, { every: rc.evalEvery, n: rc.evalN, methods: ['delegate'] }, step);
    const pendingMetrics: object[] = [];
    const pendingTraces: object[] = [];
    const firstStep = step;
    const sessionStart = Date.now();
    while (!run.done) {
      const decoder = rollouts?.decoder;
      const gradients = model.replica ? grads.share(model.replica, startCopy) : undefined;
      const restart = () => {
        opt.dispose();
        opt = optimizer();
        console.log(`step ${run.steps}: the token cost starts and Adam restarts from zero (--restart-optimizer)`);
        return opt;
      };
      // A long step says where it is, at most every PROGRESS_MS.
      let noted = Date.now();
      const onProgress = (p: StepProgress) => {
        if (Date.now() - noted < PROGRESS_MS) return;
        noted = Date.now();
        console.log(`step ${run.steps + 1}: ${p.phase === 'rollouts' ? 'episodes rolled out' : 'updates'} ${p.done}/${p.total}`);
      };
      const { metrics, episodes } = await run.step(
        { model, reference: trainee.reference, optimizer: opt, encode, onProgress, ...(decoder ? { decoder } : {}), ...(gradients ? { gradients } : {}) },
        restart,
      );
      step = run.steps;
      warnFailures();
      startCopy = await rollouts?.sync(step);
      elapsed += metrics.wallSec;
      tokensSeen += episodes.reduce((n, e) => n + e.trace.tokens.total, 0);
      const row: Record<string, unknown> = { ...metrics };
      // Skipped: every update it tried was non-finite (a step with nothing to train is not).
      if (metrics.nonFiniteSkips > 0 && metrics.updates === 0) skippedSteps++;
      else appliedSteps++;
      if (run.evaluatesAt(step)) {
        const local = rollouts ? null : model.decoder(64);
        Object.assign(row, heldOutRowFields(await run.evaluate(rollouts?.decoder ?? (local as ContextDecoder), encode)));
        local?.dispose();
      }
      pendingMetrics.push(row);
      if (step % f['trace-every'] === 0) pendingTraces.push(...episodes.map((e) => ({ step, ...scoredTrace(e) })));
      const eta = ((cfg.steps - step) * (Date.now() - sessionStart)) / 1000 / Math.max(1, step - firstStep);
      console.log(
        `step ${step}/${cfg.steps} reward ${metrics.meanReward.toFixed(3)} acc ${metrics.accuracy.toFixed(3)} tokens ${metrics.meanTotalTokens.toFixed(0)} (cp ${metrics.meanCriticalPathTokens.toFixed(0)}) clones ${metrics.clonesPerEpisode.toFixed(2)} gate ${metrics.gateRate.toFixed(3)} (mass ${metrics.gatedMassShare.toFixed(3)}, bias ${Number.isFinite(metrics.gatedCloneAdvantage) ? metrics.gatedCloneAdvantage.toFixed(3) : '—'}) zvar ${metrics.zeroVarianceFraction.toFixed(2)}${cfg.dynamicSampling ? ` kept ${metrics.groupsSampled - metrics.groupsDropped}/${metrics.groupsSampled}` : ''} kl ${metrics.kl.toExponential(2)} clip ${metrics.clipFraction.toFixed(3)} ppo-kl ${metrics.approxKl.toExponential(2)} upd ${metrics.updates} gnorm ${metrics.gradNorm.toFixed(2)} ${metrics.wallSec.toFixed(1)}s eta ${formatDuration(eta)}` +
          (metrics.nonFiniteSkips > 0 ? ` | SKIPPED ${metrics.nonFiniteSkips} non-finite update(s)` : '') +
          ('evalAccuracy' in row ? ` | eval acc ${Number(row.evalAccuracy).toFixed(3)} reward ${Number(row.evalReward).toFixed(3)}` : '') +
          (mix.length > 1 && 'evalAccuracy' in row
            ? ` (${mix.map(({ task }) => `${task.name} ${Number(row[`evalAccuracy_${task.name}`]).toFixed(3)}`).join(', ')})`
            : ''),
      );
      if (step % f['save-every'] === 0 || step === cfg.steps) {
        await save({ 'metrics.jsonl': pendingMetrics.splice(0), 'traces.jsonl': pendingTraces.splice(0) });
      }
    }
    rollouts?.close();
    grads.terminate();
    const skipError = allSkippedError(appliedSteps, skippedSteps);
    if (skipError) throw new Error(skipError);
    console.log(`done: ${f.out} at step ${step}${skippedSteps > 0 ? ` (${skippedSteps} step(s) skipped as non-finite)` : ''}`);
  },
);
