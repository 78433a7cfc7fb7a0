/**
 * GRPO on a Hugging Face model (gpt2, llama, qwen2, qwen3) under the reference's text protocol: LoRA
 * adapters over frozen weights (`--lora-r` > 0), or every weight (`--lora-r 0`). The run config is
 * train's (the table's fields: group, batch, lr, loss, credit, gating, reward, spawn limits), the
 * loop core/rl/textGrpo.ts. The run directory is resumable as train's is (runDir.ts): each save
 * holds the adapter in PEFT's format (or the weights), the optimizer and the state; metrics.jsonl
 * and traces.jsonl (text episode traces) beside them.
 */
import { defineRunCommand } from '../command';
import { UsageError, usageErrors } from '../args';
import { BACKEND_FLAG, setupBackend } from '../setup';
import { MODEL_FLAG, WEIGHTS_FLAG, loadTextModel, modelSummary } from '../hfModel';
import { LORA_FLAGS, openTextPolicyRun, textHeldOut, trainingOf } from '../textPolicyRun';
import { checkOutDir, checkResumeConfig, formatDuration } from '../runDir';
import { grpoConfigOf, taskMixOf } from '../../core/runConfigTargets';
import { fieldOf, flagName } from '../../core/runConfig';
import { REFERENCE_RECIPE, withReferenceRecipe } from '../../core/verl/config';
import { ADAM_MOMENTS, AdamW } from '../../core/optim/adamw';
import { restartsOptimizerAt } from '../../core/rl/grpoStep';
import { type TextPolicy, textGrpoStep } from '../../core/rl/textGrpo';
import { textEpisodeTrace } from '../../core/rollout/textEpisode';
import { TEXT_LENGTHS } from '../../core/rollout/textLimits';

const RECIPES = ['project', 'reference'] as const;

export const trainLm = defineRunCommand(
  'train-lm',
  "GRPO with clone credit and gating on a Hugging Face model under the spawn_clone text protocol: LoRA adapters (PEFT's format) or full fine-tuning. Takes train's run-config flags. Resumes from --out when it holds a run.",
  {
    model: MODEL_FLAG,
    steps: { type: 'int', required: true, min: 1, max: 10_000_000, help: 'total GRPO steps' },
    out: { type: 'string', required: true, help: 'run directory (resumable)' },
    recipe: {
      type: 'string',
      choices: RECIPES,
      default: 'project',
      help: "whose settings the run-config flags not given take: the project's table, or the reference's (SELFCEST's verl recipe: batch 32, group 4, lr 6e-7, …; its response and clone lengths)",
    },
    ...LORA_FLAGS,
    'root-tokens': {
      type: 'int',
      min: 1,
      max: 1 << 20,
      help: `tokens the root may generate over an episode (default ${TEXT_LENGTHS.rootMaxTokens}; reference recipe ${REFERENCE_RECIPE.lengths.responseLength})`,
    },
    'clone-budget': {
      type: 'int',
      min: 1,
      max: 1 << 20,
      help: `tokens each clone may generate (default ${TEXT_LENGTHS.cloneBudget}; reference recipe ${REFERENCE_RECIPE.lengths.cloneLength})`,
    },
    'save-every': { type: 'int', default: 5, min: 1, max: 10_000_000, help: 'steps between saves' },
    'trace-every': { type: 'int', default: 1, min: 1, max: 10_000_000, help: 'write the traces of every Nth step' },
    backend: BACKEND_FLAG,
    weights: WEIGHTS_FLAG,
  },
  async ({ flags: f, config: given, given: named, argv }) => {
    const recipe = f.recipe as (typeof RECIPES)[number];
    const rc = recipe === 'reference' ? withReferenceRecipe(given, named) : given;
    const cfg = usageErrors(() => grpoConfigOf(rc, f.steps), { taskOptions: '--options', miniBatch: '--mini-batch' });
    const mix = usageErrors(() => taskMixOf(rc, '--options'), {});
    if (mix.length !== 1) throw new UsageError(`--task: train-lm trains one task (got the mix ${JSON.stringify(rc.task)})`);
    const [{ task, opts }] = mix;
    // The toy protocol's rollout settings have no meaning for a text episode: refused, not ignored.
    const toyOnly = (['rootMaxTokens', 'budgets', 'rootLimitMin', 'rootLimitStraddle'] as const).filter((k) => named.has(k));
    if (toyOnly.length > 0) {
      throw new UsageError(
        `${toyOnly.map((k) => `--${flagName(fieldOf(k))}`).join(', ')}: the token protocol's settings do not apply to a text episode (its lengths are --root-tokens and --clone-budget)`,
      );
    }
    // Dynamic sampling is the toy trainer's (grpoStep's sampleBatch); the text step samples one batch.
    const unsampled = (['dynamicSampling', 'oversample', 'sampleRounds'] as const).filter((k) => named.has(k));
    if (unsampled.length > 0) {
      throw new UsageError(
        `${unsampled.map((k) => `--${flagName(fieldOf(k))}`).join(', ')}: train-lm samples one batch a step; dynamic sampling is not in its step`,
      );
    }
    await checkOutDir(f.out);
    await setupBackend(f.backend);
    const loaded = await loadTextModel('model', f.model, f.weights);
    const { model } = loaded;
    console.log(modelSummary(loaded));
    const lengths =
      recipe === 'reference' ? { rootMaxTokens: REFERENCE_RECIPE.lengths.responseLength, cloneBudget: REFERENCE_RECIPE.lengths.cloneLength } : TEXT_LENGTHS;
    const limits = {
      rootMaxTokens: f['root-tokens'] ?? lengths.rootMaxTokens,
      cloneBudget: f['clone-budget'] ?? lengths.cloneBudget,
      maxClones: rc.maxClones,
      maxRounds: rc.maxRounds,
    };
    const training = trainingOf(f as Parameters<typeof trainingOf>[0], model);
    const { full, lora } = training;
    // The toy protocol's rollout block does not apply: the text episode's limits are `limits`.
    const { rollout: _toyRollout, ...grpoSettings } = cfg;
    const runConfig: Record<string, unknown> = {
      ...grpoSettings,
      model: f.model,
      recipe,
      limits,
      training: full ? { full: true } : { lora },
    };

    // The run directory: its saves hold the adapter (or every weight), the optimizer and the state.
    const state = () => ({ kind: 'train-lm' as const, step, config: runConfig, elapsedSec: elapsed, tokensSeen, savedAt: new Date().toISOString() });
    const pendingMetrics: object[] = [];
    const pendingTraces: object[] = [];
    let step = 0;
    let elapsed = 0;
    let tokensSeen = 0;
    let optimizer: AdamW;
    const newOptimizer = (p: TextPolicy) => new AdamW(p.trainable, { ...ADAM_MOMENTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
    const run = await openTextPolicyRun(f.out, 'train-lm', loaded, training, f.model, cfg.seed);
    const { policy, runDir } = run;
    const saveWeights = () => run.save(optimizer, state(), { 'metrics.jsonl': pendingMetrics.splice(0), 'traces.jsonl': pendingTraces.splice(0) });
    optimizer = newOptimizer(policy);
    if (runDir.saved) {
      checkResumeConfig(runDir.saved.state.config, runConfig, ['steps']);
      runDir.restoreOptimizer(optimizer);
      ({ step, elapsedSec: elapsed, tokensSeen } = runDir.saved.state);
      console.log(`resuming ${f.out} at step ${step}/${cfg.steps}`);
    } else {
      await runDir.describe(argv, runConfig);
      console.log(`new run in ${f.out}: ${JSON.stringify(runConfig)}`);
    }
    const firstStep = step;
    const started = Date.now();
    while (step < cfg.steps) {
      if (restartsOptimizerAt(cfg, step)) {
        optimizer.dispose();
        optimizer = newOptimizer(policy);
        console.log(`step ${step}: the token cost starts and Adam restarts from zero (--restart-optimizer)`);
      }
      const { metrics, episodes } = await textGrpoStep(policy, optimizer, task, opts, { grpo: cfg, limits }, step);
      step = metrics.step;
      elapsed += metrics.wallSec;
      tokensSeen += episodes.reduce((n, e) => n + e.episode.contexts.reduce((k, c) => k + c.generatedTokens, 0), 0);
      const row: Record<string, unknown> = { ...metrics };
      if (rc.evalEvery > 0 && (step % rc.evalEvery === 0 || step === cfg.steps))
        Object.assign(row, (await textHeldOut(policy.model, mix, rc.evalN, limits)).fields);
      pendingMetrics.push(row);
      if (step % f['trace-every'] === 0) {
        pendingTraces.push(
          ...episodes.map((e) => ({
            step,
            ...textEpisodeTrace(e.episode, model.tokenizer, e.problem, e.correct, { reward: e.reward, credits: e.credits }),
          })),
        );
      }
      const eta = ((cfg.steps - step) * (Date.now() - started)) / 1000 / Math.max(1, step - firstStep);
      console.log(
        `step ${step}/${cfg.steps} reward ${metrics.meanReward.toFixed(3)} acc ${metrics.accuracy.toFixed(3)} tokens ${metrics.meanTotalTokens.toFixed(0)} clones ${metrics.clonesPerEpisode.toFixed(2)} delegating ${metrics.delegationRate.toFixed(2)} gate ${metrics.gateRate.toFixed(3)} zvar ${metrics.zeroVarianceFraction.toFixed(2)} kl ${metrics.kl.toExponential(2)} clip ${metrics.clipFraction.toFixed(3)} upd ${metrics.updates} gnorm ${metrics.gradNorm.toFixed(3)} ${metrics.wallSec.toFixed(1)}s eta ${formatDuration(eta)}` +
          ('evalAccuracy' in row ? ` | eval acc ${Number(row.evalAccuracy).toFixed(3)}` : ''),
      );
      if (step % f['save-every'] === 0 || step === cfg.steps) await saveWeights();
    }
    console.log(`done: ${f.out} at step ${step}`);
  },
);
