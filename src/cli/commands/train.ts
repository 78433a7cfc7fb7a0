import { defineRunCommand } from '../command';
import { usageErrors } from '../args';
import { grpoConfigOf, taskMixOf } from '../../core/runConfigTargets';
import { RunDir, allSkippedError, policyWeights, checkOutDir, checkResumeConfig, formatDuration } from '../runDir';
import { BACKEND_FLAG, getTokenizer, loadPolicyFlag, setupBackend } from '../setup';
import { cloneParams } from '../../core/model/params';
import { GRPO_IMPLIED } from '../../core/io/savedConfig';
import { AdamW, ADAM_MOMENTS } from '../../core/optim/adamw';
import { GrpoRun, heldOutRowFields } from '../../core/rl/grpoRun';
import { scoredTrace } from '../../core/rollout/trace';
import { PolicyDecoder } from '../../core/rollout';
import type { Policy } from '../../core/policy';
import { startNodeGradPool } from '../../runtime/node/gradWorkers';
import { PolicyRollouts } from '../../runtime/node/pool';

export const train = defineRunCommand(
  'train',
  'GRPO with clone credit and rollout gating from a checkpoint. Resumes from --out when it holds a run.',
  {
    init: { type: 'string', dir: true, required: true, help: 'starting checkpoint (also the frozen KL reference)' },
    steps: { type: 'int', required: true, min: 1, max: 10_000_000, help: 'total GRPO steps' },
    out: { type: 'string', required: true, help: 'run directory (resumable)' },
    'save-every': { type: 'int', default: 10, min: 1, max: 10_000_000, help: 'steps between saves' },
    'trace-every': { type: 'int', default: 1, min: 1, max: 10_000_000, help: 'write the traces of every Nth step' },
    backend: BACKEND_FLAG,
    workers: { type: 'int', default: 0, min: 0, max: 16, help: 'rollout worker threads (0 = roll out in this process)' },
    'grad-workers': { type: 'int', default: 0, min: 0, max: 16, help: 'extra gradient worker threads for the updates (data parallel; 0 = this thread only)' },
  },
  async ({ flags: f, config: rc, argv }) => {
    const cfg = usageErrors(() => grpoConfigOf(rc, f.steps), { taskOptions: '--options', miniBatch: '--mini-batch' });
    await checkOutDir(f.out);
    const mix = usageErrors(() => taskMixOf(rc, '--options'), {});
    const backend = await setupBackend(f.backend);
    const tok = getTokenizer();
    const encode = (t: string) => tok.encode(t);
    const runConfig: Record<string, unknown> = { ...cfg, init: f.init };
    const out = f.out;
    const start = await loadPolicyFlag('init', f.init);
    const preset = String(start.meta.preset ?? 'custom');
    let policy: Policy = start.policy;
    let step = 0;
    let elapsed = 0;
    let tokensSeen = 0;
    const runDir = await RunDir.open(out, 'train', policyWeights(preset));
    const saved = runDir.saved;
    const optimizer = () => new AdamW(policy.params, { ...ADAM_MOMENTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
    let opt: AdamW;
    if (saved) {
      checkResumeConfig(saved.state.config, runConfig, ['steps', 'microTokens'], GRPO_IMPLIED);
      policy = saved.weights;
      opt = optimizer();
      runDir.restoreOptimizer(opt);
      ({ step, elapsedSec: elapsed, tokensSeen } = saved.state);
      console.log(`resuming ${out} at step ${step}/${cfg.steps}`);
    } else {
      opt = optimizer();
      await runDir.describe(argv, runConfig);
      console.log(`new run in ${out}: ${JSON.stringify(runConfig)}`);
    }
    // The frozen reference is the starting checkpoint, also after a resume.
    const reference = cfg.loss.beta > 0 ? (saved ? start.policy.params : cloneParams(start.policy.params, { trainable: false })) : null;
    const save = (rows: { 'metrics.jsonl': object[]; 'traces.jsonl': object[] }) =>
      runDir.save(policy, opt, { kind: 'train', step, config: runConfig, elapsedSec: elapsed, tokensSeen, savedAt: new Date().toISOString() }, rows);
    let appliedSteps = 0;
    let skippedSteps = 0;

    // With --workers, rollouts run in worker threads holding a replica tagged with the step.
    const rollouts = f.workers > 0 ? await PolicyRollouts.start(policy, f.workers, backend, step) : null;
    // With --grad-workers, each update's sequences are shared with gradient worker threads.
    const grads = await startNodeGradPool(f['grad-workers'], backend);
    // The weights a step starts from, as the rollout workers were sent them (with --workers): the gradient workers' first sync reuses them.
    let startCopy: Map<string, Float32Array> | undefined;
    const run = new GrpoRun(cfg, mix, { every: rc.evalEvery, n: rc.evalN, methods: ['delegate'] }, step);
    const pendingMetrics: object[] = [];
    const pendingTraces: object[] = [];
    const firstStep = step;
    const sessionStart = Date.now();
    while (!run.done) {
      const decoder = rollouts?.decoder;
      const gradients = grads.share(policy.config, startCopy);
      const restart = () => {
        opt.dispose();
        opt = optimizer();
        console.log(`step ${run.steps}: the token cost starts and Adam restarts from zero (--restart-optimizer)`);
        return opt;
      };
      const { metrics, episodes } = await run.step(
        { policy, reference, optimizer: opt, encode, ...(decoder ? { decoder } : {}), ...(gradients ? { gradients } : {}) },
        restart,
      );
      step = run.steps;
      startCopy = await rollouts?.sync(step);
      elapsed += metrics.wallSec;
      tokensSeen += episodes.reduce((n, e) => n + e.trace.tokens.total, 0);
      const row: Record<string, unknown> = { ...metrics };
      // Skipped: every update it tried was non-finite (a step with nothing to train is not).
      if (metrics.nonFiniteSkips > 0 && metrics.updates === 0) skippedSteps++;
      else appliedSteps++;
      if (run.evaluatesAt(step)) {
        const local = rollouts ? null : new PolicyDecoder(policy);
        Object.assign(row, heldOutRowFields(await run.evaluate(rollouts?.decoder ?? (local as PolicyDecoder), encode)));
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
    console.log(`done: ${out} at step ${step}${skippedSteps > 0 ? ` (${skippedSteps} step(s) skipped as non-finite)` : ''}`);
  },
);
