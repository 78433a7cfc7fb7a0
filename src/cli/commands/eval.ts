import { defaultGrpoConfig, defaultRolloutConfig } from '../../core/runConfigTargets';
import { rewardAt } from '../../core/rl/grpoStep';
import { TASK_NAMES } from '../../core/tasks';
import { wilsonInterval } from '../../core/eval/stats';
import { arithmeticProbe, strategyOf } from '../../core/eval/strategy';
import { EVAL_SPLITS, type EvalSplit, HELD_OUT_SEED } from '../../core/eval/splits';
import { SEED_MAX } from '../../core/rng';
import { ROOT_LIMIT, TEMPERATURE } from '../../core/runConfig';
import { defineCommand } from '../command';
import {
  BACKEND_FLAG,
  LIMIT_IN_PROMPT_FLAG,
  OPTIONS_FLAG,
  getTokenizer,
  limitInPrompt,
  loadPolicyFlag,
  openDecoder,
  setupBackend,
  taskFromFlags,
} from '../setup';
import { heldOutProblems, meanReward, runProblems, summarize } from '../../core/eval/evaluate';
import { disposeParams } from '../../core/model/params';
import type { RolloutConfig } from '../../core/rollout/config';
import { TEXT_LENGTHS } from '../../core/rollout/textLimits';
import { UsageError } from '../args';
import { MODEL_FLAG, WEIGHTS_FLAG, openTextDecoder } from '../hfModel';

export const evaluate = defineCommand(
  'eval',
  'Accuracy and token costs of a checkpoint or a Hugging Face model on held-out problems (greedy unless --temperature).',
  {
    task: { type: 'string', choices: TASK_NAMES, default: 'arithmetic', help: 'task' },
    checkpoint: { type: 'string', dir: true, help: 'checkpoint directory (or --model)' },
    model: { ...MODEL_FLAG, required: false, help: `${MODEL_FLAG.help}: evaluated under its text protocol, limits in its own tokens` },
    adapter: { type: 'string', dir: true, help: 'with --model: a PEFT LoRA adapter folder the model decodes with' },
    'clone-budget': { type: 'int', min: 1, max: 1 << 20, help: `with --model: tokens each clone may generate (default ${TEXT_LENGTHS.cloneBudget})` },
    weights: { ...WEIGHTS_FLAG, help: `with --model: ${WEIGHTS_FLAG.help}` },
    n: { type: 'int', default: 500, min: 1, max: 100_000, help: 'number of problems' },
    seed: { type: 'int', default: HELD_OUT_SEED, min: 0, max: SEED_MAX, help: 'seed of the held-out problem set' },
    split: {
      type: 'string',
      choices: EVAL_SPLITS,
      default: 'final',
      help: 'problem set: final (the final evaluation) or monitor (the set watched during training); disjoint from each other and from training problems',
    },
    method: { type: 'string', choices: ['delegate', 'mono'], default: 'delegate', help: 'delegate may spawn; mono masks spawning' },
    temperature: { type: 'number', min: TEMPERATURE.min, max: TEMPERATURE.max, help: 'sample at this temperature instead of greedy' },
    options: OPTIONS_FLAG,
    'min-operands': { type: 'int', min: 1, max: 16, help: 'arithmetic: fewest operands (over --options)' },
    'max-operands': { type: 'int', min: 1, max: 16, help: 'arithmetic: most operands (up to 16)' },
    json: { type: 'bool', default: false, help: 'print JSON' },
    backend: BACKEND_FLAG,
    workers: { type: 'int', default: 0, min: 0, max: 16, help: 'rollout worker threads (0 = decode in this process)' },
    'root-limit': {
      type: 'int',
      min: ROOT_LIMIT.min,
      max: ROOT_LIMIT.max,
      help: `tokens the root may generate (default: the task's root limit in the config table; with --model ${TEXT_LENGTHS.rootMaxTokens})`,
    },
    'limit-in-prompt': LIMIT_IN_PROMPT_FLAG,
  },
  async (f) => {
    const entry = taskFromFlags(f.task, f.options, {
      ...(f['min-operands'] !== undefined ? { minOperands: f['min-operands'] } : {}),
      ...(f['max-operands'] !== undefined ? { maxOperands: f['max-operands'] } : {}),
    });
    const { task, opts } = entry;
    if ((f.model === undefined) === (f.checkpoint === undefined))
      throw new UsageError('give --checkpoint (a playground checkpoint) or --model (a Hugging Face model), one of them');
    const text = f.model !== undefined;
    if (!text) {
      for (const flag of ['adapter', 'clone-budget'] as const)
        if (f[flag] !== undefined)
          throw new UsageError(`--${flag} applies to --model (a toy spawn names its own budget bucket, and a toy checkpoint has no adapter)`);
    } else {
    }
    const backend = await setupBackend(f.backend);
    const problems = heldOutProblems(task, opts, f.n, f.seed, f.split as EvalSplit);
    const sampling = f.temperature === undefined ? { greedy: true } : { temperature: f.temperature };
    let cfg: RolloutConfig;
    let told: { rootLimitMin?: number } = {};
    let traces;
    if (text) {
      // The one runner: the decoder carries the model's text protocol; the limits count its own tokens.
      const { decoder, close } = await openTextDecoder({ model: f.model as string, adapter: f.adapter, weights: f.weights, workers: f.workers }, 64, backend);
      // A folder keeps no record of how it was trained: its root is told its limit when asked (yes), not by auto.
      told = f['limit-in-prompt'] === 'yes' ? { rootLimitMin: 1 } : {};
      cfg = defaultRolloutConfig(task.name, {
        ...told,
        rootMaxTokens: f['root-limit'] ?? TEXT_LENGTHS.rootMaxTokens,
        budgets: [f['clone-budget'] ?? TEXT_LENGTHS.cloneBudget],
        ...sampling,
        allowSpawn: f.method === 'delegate',
      });
      try {
        traces = await runProblems(decoder, task, problems, cfg, f.seed, () => []);
      } finally {
        close();
      }
    } else {
      const tok = getTokenizer();
      const { policy, meta } = await loadPolicyFlag('checkpoint', f.checkpoint as string, false);
      told = limitInPrompt(f['limit-in-prompt'], meta);
      cfg = defaultRolloutConfig(task.name, {
        ...(f['root-limit'] !== undefined ? { rootMaxTokens: f['root-limit'] } : {}),
        ...sampling,
        allowSpawn: f.method === 'delegate',
        ...told,
      });
      const { decoder, close } = await openDecoder(policy, f.workers, backend);
      try {
        traces = await runProblems(decoder, task, problems, cfg, f.seed, (t) => tok.encode(t));
      } finally {
        close();
        disposeParams(policy.params);
      }
    }
    const s = summarize(traces);
    const result = {
      split: f.split,
      seed: f.seed,
      model: f.model ?? null,
      rootLimit: cfg.rootMaxTokens,
      /** Whether the root was told its limit in its prompt. */
      limitInPrompt: told.rootLimitMin !== undefined,
      accuracy: s.accuracy,
      /** Wilson 95% interval of the accuracy. */
      interval: wilsonInterval(Math.round(s.accuracy * s.n), s.n),
      meanTokens: s.meanTokens,
      meanCriticalPathTokens: s.meanCriticalPathTokens,
      meanClones: s.meanClones,
      violations: s.violations,
      n: s.n,
      meanRootTokens: s.meanRootTokens,
      delegationRate: s.delegationRate,
      /** The training reward on these episodes: the table's reward settings, as a run's first step scores them. */
      meanReward: meanReward(task, problems, traces, rewardAt(defaultGrpoConfig(task.name), 0)),
      /** How the root delegates (arithmetic): rate, accuracy and tokens by operand count, clones, budgets, too-small budgets. */
      ...(task.name === 'arithmetic' ? { strategy: strategyOf(traces, arithmeticProbe, cfg.budgets) } : {}),
    };
    if (f.json) console.log(JSON.stringify(result));
    else {
      console.log(
        `${f.method} on ${s.n} ${f.split}-set problems (seed ${f.seed}): accuracy ${(s.accuracy * 100).toFixed(1)}% [${(result.interval[0] * 100).toFixed(1)}, ${(result.interval[1] * 100).toFixed(1)}], mean reward ${result.meanReward.toFixed(3)}, tokens ${s.meanTokens.toFixed(1)} (critical path ${s.meanCriticalPathTokens.toFixed(1)}), clones ${s.meanClones.toFixed(2)}`,
      );
      const v = Object.entries(s.violations).filter(([, n]) => n > 0);
      if (v.length) console.log(`violations: ${v.map(([k, n]) => `${k} ${n}`).join(', ')}`);
      if (result.strategy) {
        const st = result.strategy;
        console.log(`delegation by operands: ${st.bySize.map((r) => `${r.size}: ${(r.rate * 100).toFixed(0)}% of ${r.episodes}`).join(', ')}`);
        console.log(
          `accuracy by operands: ${st.bySize.map((r) => `${r.size}: ${(r.accuracy * 100).toFixed(1)}% at ${r.meanTokens.toFixed(1)} tokens`).join(', ')}`,
        );
        console.log(
          `budgets: ${Object.entries(st.budgets)
            .map(([b, n]) => `${b}: ${n}`)
            .join(', ')}`,
        );
      }
    }
  },
);
