import { defineCommand } from '../command';
import { RunDir, checkOutDir, checkResumeConfig, formatDuration } from '../runDir';
import { getTokenizer, loadPolicy, setupBackend } from '../setup';
import { cloneParams } from '../../core/model/params';
import { AdamW, ADAMW_DEFAULTS } from '../../core/rl/optim';
import { GRPO_DEFAULTS, type GrpoConfig, grpoStep, validateGrpoConfig } from '../../core/rl/train';
import { getTask } from '../../core/tasks';
import { PolicyDecoder, validateRolloutConfig } from '../../core/rollout';
import { heldOutProblems, meanReward, runProblems, summarize } from '../../core/eval/evaluate';
import type { Policy } from '../../core/policy';
import { PolicyRollouts } from '../../runtime/node/pool';

export const train = defineCommand(
  'train',
  'GRPO with clone credit and rollout gating from a checkpoint. Resumes from --out when it holds a run.',
  {
    task: { type: 'string', choices: ['arithmetic', 'multihop'], default: 'arithmetic', help: 'task' },
    init: { type: 'string', required: true, help: 'starting checkpoint (also the frozen KL reference)' },
    steps: { type: 'int', required: true, min: 1, help: 'total GRPO steps' },
    group: { type: 'int', default: GRPO_DEFAULTS.group, min: 2, help: 'episodes per prompt (G)' },
    batch: { type: 'int', default: GRPO_DEFAULTS.batch, min: 1, help: 'prompts per step (B)' },
    seed: { type: 'int', default: 0, help: 'seed for prompts and sampling' },
    out: { type: 'string', required: true, help: 'run directory (resumable)' },
    gating: { type: 'bool', default: true, help: 'rollout gating (--no-gating for the ablation)' },
    'gate-roots': { type: 'bool', default: false, help: 'also gate roots with protocol violations' },
    credit: { type: 'string', choices: ['ratio', 'broadcast'], default: 'ratio', help: 'clone credit' },
    std: { type: 'bool', default: true, help: 'divide advantages by the group std (--no-std: Dr. GRPO)' },
    beta: { type: 'number', default: GRPO_DEFAULTS.loss.beta, min: 0, help: 'KL coefficient' },
    lr: { type: 'number', default: GRPO_DEFAULTS.lr, help: 'learning rate' },
    clip: { type: 'number', default: GRPO_DEFAULTS.loss.clipLow, help: 'ratio clip ε (low and high)' },
    'clip-high': { type: 'number', help: 'upper clip ε (default: --clip)' },
    epochs: { type: 'int', default: 1, min: 1, help: 'inner epochs per batch' },
    aggregation: { type: 'string', choices: ['token-mean', 'sequence-mean'], default: 'token-mean', help: 'loss aggregation' },
    temperature: { type: 'number', default: 1, help: 'rollout temperature' },
    'partial-credit': { type: 'bool', default: true, help: 'partial numeric credit for wrong answers' },
    'save-every': { type: 'int', default: 10, min: 1, help: 'steps between saves' },
    'trace-every': { type: 'int', default: 1, min: 1, help: 'write the traces of every Nth step' },
    'eval-every': { type: 'int', default: 0, min: 0, help: 'steps between greedy evaluations (0 = off)' },
    'eval-n': { type: 'int', default: 64, min: 1, help: 'problems per evaluation' },
    backend: { type: 'string', choices: ['wasm', 'cpu'], default: 'wasm', help: 'tfjs backend' },
    workers: { type: 'int', default: 0, min: 0, max: 16, help: 'rollout worker threads (0 = roll out in this process)' },
  },
  async (f) => {
    await checkOutDir(f.out!);
    await setupBackend(f.backend);
    const tok = getTokenizer();
    const encode = (t: string) => tok.encode(t);
    const task = getTask(f.task!);
    const cfg: GrpoConfig = validateGrpoConfig({
      ...GRPO_DEFAULTS,
      task: f.task!,
      taskOptions: task.validateOptions({} as never) as Record<string, unknown>,
      steps: f.steps!,
      seed: f.seed!,
      group: f.group!,
      batch: f.batch!,
      lr: f.lr!,
      innerEpochs: f.epochs!,
      loss: { ...GRPO_DEFAULTS.loss, beta: f.beta!, clipLow: f.clip!, clipHigh: f['clip-high'] ?? f.clip!, aggregation: f.aggregation as 'token-mean', temperature: f.temperature! },
      advantage: { ...GRPO_DEFAULTS.advantage, gating: f.gating!, gateRoots: f['gate-roots']!, credit: f.credit as 'ratio', stdNormalize: f.std! },
      reward: { ...GRPO_DEFAULTS.reward, partialCredit: f['partial-credit']! },
      rollout: validateRolloutConfig({ ...GRPO_DEFAULTS.rollout, ...task.rolloutDefaults, temperature: f.temperature! }),
    });
    const runConfig = { ...cfg, init: f.init } as unknown as Record<string, unknown>;
    const out = f.out!;
    const start = await loadPolicy(f.init!);
    const preset = String(start.meta.preset ?? 'custom');
    let policy: Policy = start.policy;
    let step = 0;
    let elapsed = 0;
    let tokensSeen = 0;
    const runDir = await RunDir.open(out, 'train');
    const saved = runDir.saved;
    const optimizer = () => new AdamW(policy.params, { ...ADAMW_DEFAULTS, lr: cfg.lr, weightDecay: cfg.weightDecay, gradClip: cfg.gradClip });
    let opt: AdamW;
    if (saved) {
      checkResumeConfig(saved.state.config, runConfig, ['steps', 'microTokens']);
      policy = saved.policy;
      opt = optimizer();
      opt.load(saved.optimizerStep, saved.optimizerTensors);
      ({ step, elapsedSec: elapsed, tokensSeen } = saved.state);
      console.log(`resuming ${out} at step ${step}/${cfg.steps}`);
    } else {
      opt = optimizer();
      console.log(`new run in ${out}: ${JSON.stringify(runConfig)}`);
    }
    // The frozen reference is the starting checkpoint, also after a resume.
    const reference = cfg.loss.beta > 0 ? (saved ? start.policy.params : cloneParams(start.policy.params, { trainable: false })) : null;
    const save = (rows: { 'metrics.jsonl': object[]; 'traces.jsonl': object[] }) =>
      runDir.save(policy, opt, { kind: 'train', step, config: runConfig, elapsedSec: elapsed, tokensSeen, savedAt: new Date().toISOString() }, preset, rows);
    let appliedSteps = 0;
    let skippedSteps = 0;

    // With --workers, rollouts run in worker threads holding a replica tagged with the step.
    const rollouts = f.workers! > 0 ? await PolicyRollouts.start(policy, f.workers!, f.backend as 'wasm', step) : null;
    const pendingMetrics: object[] = [];
    const pendingTraces: object[] = [];
    const firstStep = step;
    const sessionStart = Date.now();
    while (step < cfg.steps) {
      const decoder = rollouts?.decoder;
      const { metrics, traces } = await grpoStep({ policy, reference, optimizer: opt, task, encode, ...(decoder ? { decoder } : {}) }, cfg, step);
      step++;
      await rollouts?.sync(step);
      elapsed += metrics.wallSec;
      tokensSeen += traces.reduce((n, t) => n + t.tokens.total, 0);
      const row: Record<string, unknown> = { ...metrics };
      if (metrics.nonFiniteSkips > 0 && metrics.nonFiniteSkips >= cfg.innerEpochs) skippedSteps++;
      else appliedSteps++;
      if (f['eval-every']! > 0 && (step % f['eval-every']! === 0 || step === cfg.steps)) {
        const problems = heldOutProblems(task, task.validateOptions(cfg.taskOptions as never), f['eval-n']!, 12345);
        const local = rollouts ? null : new PolicyDecoder(policy);
        const evalTraces = await runProblems(rollouts?.decoder ?? (local as PolicyDecoder), task, problems, validateRolloutConfig({ ...task.rolloutDefaults, greedy: true }), 1, encode, 64, step);
        local?.dispose();
        const s = summarize(evalTraces);
        row.evalAccuracy = s.accuracy;
        row.evalTokens = s.meanTokens;
        row.evalReward = meanReward(task, problems, evalTraces, cfg.reward);
      }
      pendingMetrics.push(row);
      if (step % f['trace-every']! === 0) pendingTraces.push(...traces.map((t) => ({ step, ...t })));
      const eta = ((cfg.steps - step) * (Date.now() - sessionStart)) / 1000 / Math.max(1, step - firstStep);
      console.log(
        `step ${step}/${cfg.steps} reward ${metrics.meanReward.toFixed(3)} acc ${metrics.accuracy.toFixed(3)} tokens ${metrics.meanTotalTokens.toFixed(0)} (cp ${metrics.meanCriticalPathTokens.toFixed(0)}) clones ${metrics.clonesPerEpisode.toFixed(2)} gate ${metrics.gateRate.toFixed(3)} zvar ${metrics.zeroVarianceFraction.toFixed(2)} kl ${metrics.kl.toExponential(2)} gnorm ${metrics.gradNorm.toFixed(2)} ${metrics.wallSec.toFixed(1)}s eta ${formatDuration(eta)}` +
          (metrics.nonFiniteSkips > 0 ? ` | SKIPPED ${metrics.nonFiniteSkips} non-finite update(s)` : '') +
          ('evalAccuracy' in row ? ` | eval acc ${Number(row.evalAccuracy).toFixed(3)} reward ${Number(row.evalReward).toFixed(3)}` : ''),
      );
      if (step % f['save-every']! === 0 || step === cfg.steps) {
        await save({ 'metrics.jsonl': pendingMetrics.splice(0), 'traces.jsonl': pendingTraces.splice(0) });
      }
    }
    rollouts?.close();
    if (skippedSteps > 0 && appliedSteps === 0) {
      throw new Error(`every step of this session (${skippedSteps}) was skipped: the loss or the gradient was not finite (see the step lines); the weights did not change`);
    }
    console.log(`done: ${out} at step ${step}${skippedSteps > 0 ? ` (${skippedSteps} step(s) skipped as non-finite)` : ''}`);
  },
);
