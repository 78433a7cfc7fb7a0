import { defineCommand } from '../command';
import { RunDir, checkOutDir, checkResumeConfig, formatDuration } from '../runDir';
import { freshPolicy, getTokenizer, loadPolicy, setupBackend } from '../setup';
import { AdamW, ADAMW_DEFAULTS, cosineLr } from '../../core/rl/optim';
import { SFT_DEFAULTS, type SftConfig, type TaskMixEntry, sftMixSequences, sftStep, validateSftConfig } from '../../core/rl/sft';
import { UsageError } from '../args';
import { getTask } from '../../core/tasks';
import { PolicyDecoder, validateRolloutConfig } from '../../core/rollout';
import { heldOutProblems, runProblems, summarize } from '../../core/eval/evaluate';
import type { Policy } from '../../core/policy';
import { GradWorkers } from '../../runtime/node/gradWorkers';

export const sft = defineCommand(
  'sft',
  'Warm start: supervised training on teacher demonstrations. Resumes from --out when it holds a run.',
  {
    task: { type: 'string', default: 'arithmetic', help: 'task, or a comma list of tasks mixed by weight (arithmetic,multihop or arithmetic:1,multihop:2; default weight 1)' },
    preset: { type: 'string', choices: ['tiny', 'small'], default: 'small', help: 'model size (fresh runs)' },
    init: { type: 'string', help: 'start from this checkpoint instead of a random model' },
    steps: { type: 'int', required: true, min: 1, help: 'total optimisation steps' },
    seed: { type: 'int', default: 0, help: 'seed for init and data' },
    out: { type: 'string', required: true, help: 'run directory (resumable)' },
    lr: { type: 'number', default: SFT_DEFAULTS.lr, help: 'peak learning rate' },
    'batch-tokens': { type: 'int', default: SFT_DEFAULTS.batchTokens, min: 64, help: 'tokens per step' },
    'micro-tokens': { type: 'int', default: SFT_DEFAULTS.microTokens, min: 64, help: 'largest padded micro-batch' },
    warmup: { type: 'int', default: SFT_DEFAULTS.warmup, min: 0, help: 'warm-up steps' },
    options: { type: 'string', help: 'task options as JSON, by task name for a mix (e.g. {"multihop":{"perChunk":1}}; a single task may give its options directly)' },
    'delegate-fraction': { type: 'number', default: SFT_DEFAULTS.delegateFraction, min: 0, max: 1, help: 'share of delegation demos' },
    'save-every': { type: 'int', default: 50, min: 1, help: 'steps between saves' },
    'log-every': { type: 'int', default: 10, min: 1, help: 'steps between progress lines' },
    'eval-every': { type: 'int', default: 0, min: 0, help: 'steps between greedy evaluations (0 = off)' },
    'eval-n': { type: 'int', default: 64, min: 1, help: 'problems per evaluation' },
    workers: { type: 'int', default: 0, min: 0, max: 16, help: 'extra gradient worker threads (data parallel; 0 = this thread only)' },
    backend: { type: 'string', choices: ['wasm', 'cpu'], default: 'wasm', help: 'tfjs backend' },
  },
  async (f) => {
    await checkOutDir(f.out!);
    await setupBackend(f.backend);
    const tok = getTokenizer();
    const encode = (t: string) => tok.encode(t);
    const mix = parseTaskMix(f.task!, f.options);
    const names = mix.map((m) => m.task.name);
    const cfg: SftConfig = validateSftConfig({
      ...SFT_DEFAULTS,
      task: f.task!.split(',').map((t) => t.trim()).join(','),
      // Resolved options, so the run records the exact data distribution it trained on (one
      // task: its options; a mix: options by task name).
      taskOptions: (mix.length === 1 ? mix[0].opts : Object.fromEntries(names.map((n, i) => [n, mix[i].opts]))) as Record<string, unknown>,
      steps: f.steps!,
      seed: f.seed!,
      lr: f.lr!,
      batchTokens: f['batch-tokens']!,
      microTokens: f['micro-tokens']!,
      warmup: f.warmup!,
      delegateFraction: f['delegate-fraction']!,
    });
    const runConfig = { ...cfg, preset: f.preset, init: f.init ?? null } as Record<string, unknown>;
    const out = f.out!;

    let policy: Policy;
    let step = 0;
    let elapsed = 0;
    let tokensSeen = 0;
    const runDir = await RunDir.open(out, 'sft');
    const saved = runDir.saved;
    let optimizer: AdamW;
    if (saved) {
      checkResumeConfig(saved.state.config, runConfig, ['steps', 'microTokens']);
      policy = saved.policy;
      optimizer = new AdamW(policy.params, { ...ADAMW_DEFAULTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
      optimizer.load(saved.optimizerStep, saved.optimizerTensors);
      ({ step, elapsedSec: elapsed, tokensSeen } = saved.state);
      console.log(`resuming ${out} at step ${step}/${cfg.steps}`);
    } else {
      policy = f.init ? (await loadPolicy(f.init)).policy : freshPolicy(f.preset!, cfg.seed);
      optimizer = new AdamW(policy.params, { ...ADAMW_DEFAULTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
      console.log(`new run in ${out}: ${JSON.stringify(runConfig)}`);
    }
    const preset = String(f.preset);
    const save = (rows: object[]) =>
      runDir.save(policy, optimizer, { kind: 'sft', step, config: runConfig, elapsedSec: elapsed, tokensSeen, savedAt: new Date().toISOString() }, preset, { 'metrics.jsonl': rows });
    let appliedSteps = 0;
    let skippedSteps = 0;
    let skippedSinceLog = 0;

    const sessionStart = Date.now();
    const sessionFirstStep = step;
    // Data parallel: the workers take shares of each step's micro-batches.
    const grad = f.workers! > 0 ? await GradWorkers.start(f.workers!, policy.config, (f.backend ?? 'wasm') as 'wasm') : null;
    let windowStart = Date.now();
    let windowTokens = 0;
    const pending: object[] = [];
    while (step < cfg.steps) {
      const t0 = Date.now();
      const lr = cosineLr(step, cfg.steps, cfg.lr, cfg.warmup, cfg.minLrFrac);
      const seqs = sftMixSequences(mix, cfg, step, encode);
      if (grad) await grad.sync(policy.params);
      const r = await sftStep(policy.params, policy.config, optimizer, seqs, lr, cfg.microTokens, grad?.remotes() ?? []);
      step++;
      elapsed += (Date.now() - t0) / 1000;
      tokensSeen += r.tokens;
      windowTokens += r.tokens;
      const row: Record<string, unknown> = {
        step,
        loss: r.loss,
        lr,
        gradNorm: r.gradNorm,
        skipped: !r.applied,
        tokens: r.tokens,
        trainedTokens: r.trainedTokens,
        elapsedSec: Math.round(elapsed * 10) / 10,
      };
      if (r.applied) appliedSteps++;
      else {
        skippedSteps++;
        skippedSinceLog++;
      }
      let evalText = '';
      if (f['eval-every']! > 0 && (step % f['eval-every']! === 0 || step === cfg.steps)) {
        // Every task of the mix; the first keeps the plain keys, the others are `<task>.delegateAcc` and so on.
        for (const [i, { task: t, opts }] of mix.entries()) {
          const scores = await quickEval(policy, t, opts, f['eval-n']!, encode);
          for (const [k, v] of Object.entries(scores)) row[i === 0 ? k : `${t.name}.${k}`] = v;
          evalText += ` | ${i === 0 ? 'eval' : t.name} delegate ${fmt(scores.delegateAcc)} mono ${fmt(scores.monoAcc)}`;
        }
      }
      pending.push(row);
      if (step % f['log-every']! === 0 || step === cfg.steps) {
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
      if (step % f['save-every']! === 0 || step === cfg.steps) {
        await save(pending.splice(0));
      }
    }
    grad?.close();
    if (skippedSteps > 0 && appliedSteps === 0) {
      throw new Error(`every step of this session (${skippedSteps}) was skipped: the loss or the gradient was not finite; the weights did not change`);
    }
    console.log(`done: ${out} at step ${step}${skippedSteps > 0 ? ` (${skippedSteps} step(s) skipped as non-finite)` : ''}`);
  },
);

/** `--task`: one task, or a comma list of `name[:weight]`; `--options`: JSON options by task name. */
export function parseTaskMix(text: string, optionsJson?: string): TaskMixEntry[] {
  const entries = text.split(',').map((part) => {
    const [name, w, ...rest] = part.trim().split(':');
    let task;
    try {
      task = getTask(name);
    } catch (e) {
      throw new UsageError(`--task: ${(e as Error).message}`);
    }
    const weight = w === undefined ? 1 : Number(w);
    if (rest.length > 0 || !(w === undefined || (/^\d*\.?\d+$/.test(w) && weight > 0))) {
      throw new UsageError(`--task: the weight of ${name} must be a positive number (got ${JSON.stringify(part.trim())})`);
    }
    return { name, task, weight };
  });
  let options: Record<string, unknown> = {};
  if (optionsJson !== undefined) {
    try {
      options = JSON.parse(optionsJson);
    } catch (e) {
      throw new UsageError(`--options: not JSON (${(e as Error).message})`);
    }
    if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new UsageError('--options: give a JSON object');
  }
  const names = entries.map((e) => e.name);
  // One task may give its options directly; a mix gives them by task name.
  const byName = names.length === 1 && !(names[0] in options) ? { [names[0]]: options } : options;
  const unknown = Object.keys(byName).filter((k) => !names.includes(k));
  if (unknown.length > 0) throw new UsageError(`--options: ${unknown.join(', ')} is not a task of --task ${text}`);
  return entries.map(({ name, task, weight }) => {
    const given = byName[name] ?? {};
    if (typeof given !== 'object' || given === null || Array.isArray(given)) throw new UsageError(`--options: the options of ${name} must be a JSON object`);
    const known = Object.keys(task.defaultOptions as object);
    const stray = Object.keys(given).filter((k) => !known.includes(k));
    if (stray.length > 0) throw new UsageError(`--options: ${name} has no option ${stray.join(', ')} (it has ${known.join(', ')})`);
    try {
      return { task, opts: task.validateOptions(given as never) as never, weight };
    } catch (e) {
      throw new UsageError(`--options: ${(e as Error).message}`);
    }
  });
}

const fmt = (x: unknown) => (typeof x === 'number' ? x.toFixed(3) : String(x));

/** Greedy accuracy with and without delegation on a fixed held-out set (seed 12345). */
async function quickEval<O>(policy: Policy, task: ReturnType<typeof getTask>, opts: O, n: number, encode: (t: string) => number[]) {
  const problems = heldOutProblems(task, opts as never, n, 12345);
  const decoder = new PolicyDecoder(policy);
  try {
    const row: Record<string, number> = {};
    for (const mono of [false, true]) {
      const cfg = validateRolloutConfig({ ...task.rolloutDefaults, greedy: true, allowSpawn: !mono });
      const s = summarize(await runProblems(decoder, task, problems, cfg, 1, encode));
      row[mono ? 'monoAcc' : 'delegateAcc'] = s.accuracy;
      row[mono ? 'monoTokens' : 'delegateTokens'] = s.meanTokens;
      if (!mono) row.delegationRate = s.delegationRate;
    }
    return row;
  } finally {
    decoder.dispose();
  }
}
