import { SFT_IMPLIED } from '../../core/io/savedConfig';
import { defineRunCommand } from '../command';
import { UsageError, usageErrors } from '../args';
import { MODEL_FLAG, WEIGHTS_FLAG } from '../hfModel';
import { LORA_FLAGS } from '../textPolicyRun';
import { type SftLmFlags, sftTextModel, toyOnlySettings } from './sftLm';
import { TEXT_LENGTHS } from '../../core/rollout/textLimits';
import { rolloutConfigOf, sftConfigOf, taskMixOf } from '../../core/runConfigTargets';
import type { RolloutConfig } from '../../core/rollout/config';
import { RunDir, allSkippedError, checkOutDir, checkResumeConfig, formatDuration, policyWeights } from '../runDir';
import { BACKEND_FLAG, freshPolicy, getTokenizer, loadPolicyFlag, setupBackend } from '../setup';
import { AdamW, ADAM_MOMENTS, cosineLr } from '../../core/optim/adamw';
import { sftMetricsRow, sftMixSequences, sftStep } from '../../core/sft/sft';
import type { Task } from '../../core/tasks';
import { PolicyDecoder } from '../../core/rollout';
import { heldOutProblems, runProblems, summarize } from '../../core/eval/evaluate';
import { HELD_OUT_SEED } from '../../core/eval/splits';
import type { Policy } from '../../core/policy';
import { startNodeGradPool } from '../../runtime/node/gradWorkers';

export const sft = defineRunCommand(
  'sft',
  'Warm start: supervised training on teacher demonstrations. Resumes from --out when it holds a run.',
  {
    init: { type: 'string', dir: true, help: 'start from this checkpoint instead of a random model' },
    steps: { type: 'int', required: true, min: 1, max: 10_000_000, help: 'total optimisation steps' },
    out: { type: 'string', required: true, help: 'run directory (resumable)' },
    'save-every': { type: 'int', default: 50, min: 1, max: 10_000_000, help: 'steps between saves' },
    'log-every': { type: 'int', default: 10, min: 1, max: 10_000_000, help: 'steps between progress lines' },
    workers: { type: 'int', default: 0, min: 0, max: 16, help: 'extra gradient worker threads (data parallel; 0 = this thread only)' },
    backend: BACKEND_FLAG,
    model: { ...MODEL_FLAG, required: false, help: `train this Hugging Face model in the text protocol instead of the toy (${MODEL_FLAG.help})` },
    ...LORA_FLAGS,
    'root-tokens': {
      type: 'int',
      min: 1,
      max: 1 << 20,
      help: `with --model: tokens a demonstrated root may write (default ${TEXT_LENGTHS.rootMaxTokens}; longer ones are left out)`,
    },
    'clone-budget': {
      type: 'int',
      min: 1,
      max: 1 << 20,
      help: `with --model: each clone's token budget (default ${TEXT_LENGTHS.cloneBudget}; a cut clone runs to it)`,
    },
    weights: WEIGHTS_FLAG,
  },
  async ({ flags: f, config: rc, given, argv }) => {
    const renames = { taskOptions: '--options', task: '--task' } as const;
    const mix = usageErrors(() => taskMixOf(rc), renames);
    let cfg = usageErrors(() => sftConfigOf(rc, f.steps), renames);
    // Flags of one path given to the other are refused by name, never ignored.
    const named = (names: readonly string[]) => names.filter((n) => argv.some((a) => a === n || a.startsWith(`${n}=`)));
    if (f.model !== undefined) {
      const refusal = toyOnlySettings(given, [...named(['--init']), ...(f.workers > 0 ? ['--workers'] : [])]);
      if (refusal !== null) throw new UsageError(refusal);
      return sftTextModel(f as SftLmFlags, rc, mix, given, argv, cfg);
    }
    const textOnly = named(['--lora-r', '--lora-alpha', '--lora-targets', '--root-tokens', '--clone-budget', '--weights']);
    if (textOnly.length > 0) throw new UsageError(`${textOnly.join(', ')}: only with --model (a Hugging Face model's warm start)`);
    await checkOutDir(f.out);
    const backend = await setupBackend(f.backend);
    const tok = getTokenizer();
    const encode = (t: string) => tok.encode(t);
    const out = f.out;

    let policy: Policy;
    let step = 0;
    let elapsed = 0;
    let tokensSeen = 0;
    const runDir = await RunDir.open(out, 'sft', policyWeights(rc.preset));
    const saved = runDir.saved;
    // The warm-up is the run's, stored in its config when it started: a resume with more --steps
    // keeps it (the default is derived from the step count); a --warmup given now must agree.
    const savedWarmup = saved?.state.config.warmup;
    if (typeof savedWarmup === 'number' && !given.has('sftWarmup')) cfg = { ...cfg, warmup: savedWarmup };
    const runConfig: Record<string, unknown> = { ...cfg, preset: rc.preset, init: f.init ?? null };
    let optimizer: AdamW;
    if (saved) {
      checkResumeConfig(saved.state.config, runConfig, ['steps', 'microTokens'], SFT_IMPLIED);
      policy = saved.weights;
      optimizer = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
      runDir.restoreOptimizer(optimizer);
      ({ step, elapsedSec: elapsed, tokensSeen } = saved.state);
      const before = saved.state.config.steps;
      console.log(
        `resuming ${out} at step ${step}/${cfg.steps}${typeof before === 'number' && before !== cfg.steps ? ` (extended from ${before} steps: the learning-rate schedule now ends at step ${cfg.steps})` : ''}`,
      );
    } else {
      policy = f.init ? (await loadPolicyFlag('init', f.init)).policy : freshPolicy(rc.preset, cfg.seed);
      optimizer = new AdamW(policy.params, { ...ADAM_MOMENTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
      await runDir.describe(argv, runConfig);
      console.log(`new run in ${out}: ${JSON.stringify(runConfig)}`);
    }
    const save = (rows: object[]) =>
      runDir.save(
        policy,
        optimizer,
        { kind: 'sft', step, config: runConfig, elapsedSec: elapsed, tokensSeen, savedAt: new Date().toISOString() },
        {
          'metrics.jsonl': rows,
        },
      );
    let appliedSteps = 0;
    let skippedSteps = 0;
    let skippedSinceLog = 0;

    const sessionStart = Date.now();
    const sessionFirstStep = step;
    // Data parallel: the workers take shares of each step's micro-batches.
    const grad = f.workers > 0 ? await startNodeGradPool(f.workers, backend) : null;
    let windowStart = Date.now();
    let windowTokens = 0;
    const pending: object[] = [];
    while (step < cfg.steps) {
      const t0 = Date.now();
      const lr = cosineLr(step, cfg.steps, cfg.lr, cfg.warmup, cfg.minLrFrac);
      const seqs = sftMixSequences(mix, cfg, step, encode, policy.config.nPositions);
      if (grad) await grad.sync(policy.params, policy.config);
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
        // Every task of the mix; the first keeps the plain keys, the others are `<task>.delegateAcc` and so on.
        for (const [i, { task: t, opts }] of mix.entries()) {
          const scores = await quickEval(policy, t, opts, rc.evalN, rolloutConfigOf(rc, { greedy: true }), encode);
          for (const [k, v] of Object.entries(scores)) row[i === 0 ? k : `${t.name}.${k}`] = v;
          evalText += ` | ${i === 0 ? 'eval' : t.name} delegate ${fmt(scores.delegateAcc)} mono ${fmt(scores.monoAcc)}`;
        }
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
        await save(pending.splice(0));
      }
    }
    grad?.terminate();
    const skipError = allSkippedError(appliedSteps, skippedSteps);
    if (skipError) throw new Error(skipError);
    console.log(`done: ${out} at step ${step}${skippedSteps > 0 ? ` (${skippedSteps} step(s) skipped as non-finite)` : ''}`);
  },
);

const fmt = (x: unknown) => (typeof x === 'number' ? x.toFixed(3) : String(x));

/** Greedy accuracy with and without delegation on a fixed held-out set (HELD_OUT_SEED). */
async function quickEval<O>(policy: Policy, task: Task<O>, opts: O, n: number, greedy: RolloutConfig, encode: (t: string) => number[]) {
  const problems = heldOutProblems(task, opts, n, HELD_OUT_SEED, 'monitor');
  const decoder = new PolicyDecoder(policy);
  try {
    const row: Record<string, number> = {};
    for (const mono of [false, true]) {
      const cfg = { ...greedy, allowSpawn: !mono };
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
