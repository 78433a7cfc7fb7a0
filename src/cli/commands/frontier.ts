import { TASK_NAMES } from '../../core/tasks';
import { EVAL_SPLITS, type EvalSplit, HELD_OUT_SEED } from '../../core/eval/splits';
import { SEED_MAX } from '../../core/rng';
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
import { heldOutProblems } from '../../core/eval/evaluate';
import { FRONTIER_DEFAULTS, type Method, frontier, validateLimits, validateMethods } from '../../core/eval/frontier';
import { disposeParams } from '../../core/model/params';
import { UsageError } from '../args';

export const frontierCommand = defineCommand(
  'frontier',
  'Accuracy–cost points of delegation, monolithic and self-consistency at a sweep of limits, and their Pareto set.',
  {
    task: { type: 'string', choices: TASK_NAMES, default: 'arithmetic', help: 'task' },
    options: OPTIONS_FLAG,
    checkpoint: { type: 'string', dir: true, required: true, help: 'checkpoint directory' },
    n: { type: 'int', default: 200, min: 1, max: 100_000, help: 'problems' },
    seed: { type: 'int', default: HELD_OUT_SEED, min: 0, max: SEED_MAX, help: 'seed of the problem set (sampling seeds derive from it)' },
    split: {
      type: 'string',
      choices: EVAL_SPLITS,
      default: 'final',
      help: 'problem set: final (the final evaluation) or monitor (the set watched during training); disjoint from each other and from training problems',
    },
    methods: { type: 'string', default: FRONTIER_DEFAULTS.methods.join(','), help: 'comma list of delegate, mono, scK' },
    limits: { type: 'string', default: FRONTIER_DEFAULTS.limits.join(','), help: 'comma list of root token limits' },
    json: { type: 'bool', default: false, help: 'print {"points": [...], "pareto": [...]}' },
    backend: BACKEND_FLAG,
    workers: { type: 'int', default: 0, min: 0, max: 16, help: 'rollout worker threads (0 = decode in this process)' },
    'limit-in-prompt': LIMIT_IN_PROMPT_FLAG,
  },
  async (f) => {
    let methods: Method[];
    let limits: number[];
    try {
      methods = validateMethods(f.methods.split(',').map((m) => m.trim()));
      limits = validateLimits(f.limits.split(',').map(Number));
    } catch (e) {
      throw new UsageError(`--${(e as Error).message}`);
    }
    const { task, opts } = taskFromFlags(f.task, f.options);
    const backend = await setupBackend(f.backend);
    const tok = getTokenizer();
    const { policy, meta } = await loadPolicyFlag('checkpoint', f.checkpoint, false);
    const told = limitInPrompt(f['limit-in-prompt'], meta);
    const { decoder, close } = await openDecoder(policy, f.workers, backend);
    const problems = heldOutProblems(task, opts, f.n, f.seed, f.split as EvalSplit);
    const result = await frontier(
      decoder,
      task,
      problems,
      { ...FRONTIER_DEFAULTS, methods, limits, seed: f.seed, rollout: { ...FRONTIER_DEFAULTS.rollout, ...told } },
      (t) => tok.encode(t),
      f.json
        ? undefined
        : (p) =>
            console.log(
              `${p.method.padEnd(8)} limit ${String(p.limit).padStart(4)}  acc ${(p.accuracy * 100).toFixed(1)}% [${(p.interval[0] * 100).toFixed(1)}, ${(p.interval[1] * 100).toFixed(1)}]  tokens ${p.meanTokens.toFixed(1)}  critical ${p.meanCriticalPathTokens.toFixed(1)}`,
            ),
    );
    close();
    disposeParams(policy.params);
    if (f.json) console.log(JSON.stringify({ split: f.split, seed: f.seed, n: f.n, ...result }));
    else
      console.log(
        `${f.split} set, seed ${f.seed}, n ${f.n}; pareto: ${result.pareto.map((i) => `${result.points[i].method}@${result.points[i].limit}`).join(', ')}`,
      );
  },
);
