/**
 * `sft --model DIR`: the warm start of a Hugging Face model, the toy's run config and data
 * (sft.ts draws the same demonstrations by seed and step) rendered in the text protocol
 * (core/sft/textDemos.ts) and trained by core/sft/textSft.ts over LoRA adapters (default) or every
 * weight (`--lora-r 0`). The run directory is resumable as the toy's is; each save holds the PEFT
 * adapter (or the weights in the model's format), the optimizer and the state, metrics.jsonl beside.
 */
import { loadTextModel, modelSummary } from '../hfModel';
import { checkOutDir, checkResumeConfig, formatDuration } from '../runDir';
import { setupBackend } from '../setup';
import { openTextPolicyRun, textHeldOut, trainingOf } from '../textPolicyRun';
import { SFT_IMPLIED } from '../../core/io/savedConfig';
import { ADAM_MOMENTS, AdamW, cosineLr } from '../../core/optim/adamw';
import { TEXT_LENGTHS } from '../../core/rollout/textLimits';
import { type RunConfig, type RunConfigKey, fieldOf, flagName } from '../../core/runConfig';
import { type SftConfig, type TaskMixEntry, sftMetricsRow } from '../../core/sft/sft';
import { textSftSequences, textSftStep } from '../../core/sft/textSft';

export interface SftLmFlags {
  model: string;
  steps: number;
  out: string;
  'save-every': number;
  'log-every': number;
  'lora-r': number;
  'lora-alpha': number;
  'lora-targets'?: string;
  'root-tokens'?: number;
  'clone-budget'?: number;
  backend: string;
  weights: string;
}

/** Run-config fields of the toy path that a text model's warm start cannot honour: refused by name. */
const TOY_ONLY: readonly RunConfigKey[] = ['preset', 'rootMaxTokens', 'rootLimitMin', 'rootLimitStraddle', 'sftLabelSmoothing'];

/** The toy-only settings given, as a refusal naming their flags; null when none. */
export function toyOnlySettings(given: ReadonlySet<string>, commandFlags: readonly string[]): string | null {
  const named = [...TOY_ONLY.filter((k) => given.has(k)).map((k) => `--${flagName(fieldOf(k))}`), ...commandFlags];
  return named.length === 0
    ? null
    : `${named.join(', ')}: not for a Hugging Face model's warm start (the toy model's size, root limit and label smoothing; a text episode's lengths are --root-tokens and --clone-budget)`;
}

export async function sftTextModel(
  f: SftLmFlags,
  rc: RunConfig,
  mix: readonly TaskMixEntry[],
  given: ReadonlySet<string>,
  argv: readonly string[],
  cfg0: SftConfig,
): Promise<void> {
  let cfg = cfg0;
  await checkOutDir(f.out);
  await setupBackend(f.backend);
  const loaded = await loadTextModel('model', f.model, f.weights);
  const { model } = loaded;
  console.log(modelSummary(loaded));
  const lengths = { rootMaxTokens: f['root-tokens'] ?? TEXT_LENGTHS.rootMaxTokens, cloneBudget: f['clone-budget'] ?? TEXT_LENGTHS.cloneBudget };
  const training = trainingOf(f, model);
  const run = await openTextPolicyRun(f.out, 'sft', loaded, training, f.model, cfg.seed);
  const { policy, runDir } = run;
  const saved = runDir.saved;
  // As the toy's: the warm-up is the run's, stored in its config when it started.
  const savedWarmup = saved?.state.config.warmup;
  if (typeof savedWarmup === 'number' && !given.has('sftWarmup')) cfg = { ...cfg, warmup: savedWarmup };
  const runConfig: Record<string, unknown> = { ...cfg, model: f.model, lengths, training: training.full ? { full: true } : { lora: training.lora } };
  const optimizer = new AdamW(policy.trainable, { ...ADAM_MOMENTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
  let step = 0;
  let elapsed = 0;
  let tokensSeen = 0;
  if (saved) {
    checkResumeConfig(saved.state.config, runConfig, ['steps', 'microTokens'], SFT_IMPLIED);
    runDir.restoreOptimizer(optimizer);
    ({ step, elapsedSec: elapsed, tokensSeen } = saved.state);
    console.log(`resuming ${f.out} at step ${step}/${cfg.steps}`);
  } else {
    await runDir.describe(argv, runConfig);
    console.log(`new run in ${f.out}: ${JSON.stringify(runConfig)}`);
  }
  const limits = { cloneBudget: lengths.cloneBudget, maxClones: rc.maxClones, maxRounds: rc.maxRounds };
  const pending: object[] = [];
  const started = Date.now();
  const firstStep = step;
  let windowStart = Date.now();
  let windowTokens = 0;
  let applied = 0;
  while (step < cfg.steps) {
    const t0 = Date.now();
    const lr = cosineLr(step, cfg.steps, cfg.lr, cfg.warmup, cfg.minLrFrac);
    const seqs = textSftSequences(mix, cfg, step, model.tokenizer, lengths, model.config.maxPositions);
    const r = await textSftStep(policy, optimizer, seqs, lr, cfg.microTokens);
    step++;
    elapsed += (Date.now() - t0) / 1000;
    tokensSeen += r.tokens;
    windowTokens += r.tokens;
    if (r.applied) applied++;
    const row: Record<string, unknown> = { ...sftMetricsRow(step, r, lr, elapsed) };
    let evalText = '';
    if (rc.evalEvery > 0 && (step % rc.evalEvery === 0 || step === cfg.steps)) {
      const e = await textHeldOut(policy.model, mix, rc.evalN, { ...limits, rootMaxTokens: lengths.rootMaxTokens });
      Object.assign(row, e.fields);
      evalText = e.text;
    }
    pending.push(row);
    if (step % f['log-every'] === 0 || step === cfg.steps) {
      const rate = windowTokens / ((Date.now() - windowStart) / 1000);
      const eta = ((cfg.steps - step) * (Date.now() - started)) / 1000 / Math.max(1, step - firstStep);
      console.log(
        `step ${step}/${cfg.steps} loss ${r.loss.toFixed(4)} lr ${lr.toExponential(2)} gnorm ${r.gradNorm.toFixed(2)} tok/s ${Math.round(rate)} eta ${formatDuration(eta)}${evalText}`,
      );
      windowStart = Date.now();
      windowTokens = 0;
    }
    if (step % f['save-every'] === 0 || step === cfg.steps)
      await run.save(
        optimizer,
        { kind: 'sft', step, config: runConfig, elapsedSec: elapsed, tokensSeen, savedAt: new Date().toISOString() },
        { 'metrics.jsonl': pending.splice(0) },
      );
  }
  if (applied === 0 && step > firstStep) throw new Error('every step was skipped: the loss or the gradient was not finite');
  console.log(`done: ${f.out} at step ${step}`);
}
