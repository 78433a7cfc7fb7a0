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
import { FRONTIER_DEFAULTS, type FrontierPoint, type Method, frontier, validateLimits, validateMethods } from '../../core/eval/frontier';
import { TEXT_LENGTHS } from '../../core/rollout/textLimits';
import { MODEL_FLAG, WEIGHTS_FLAG, openTextDecoder } from '../hfModel';
import { disposeParams } from '../../core/model/params';
import { UsageError } from '../args';

/** Root limits of a frontier in a chat model's own tokens (its turns hold the chat's tool calls and answer line). */
const TEXT_FRONTIER_LIMITS = [64, 128, 256, 512];

export const frontierCommand = defineCommand(
  'frontier',
  'Accuracy–cost points of delegation, monolithic and self-consistency at a sweep of limits, and their Pareto set.',
  {
    task: { type: 'string', choices: TASK_NAMES, default: 'arithmetic', help: 'task' },
    options: OPTIONS_FLAG,
    checkpoint: { type: 'string', dir: true, help: 'checkpoint directory (or --model)' },
    model: {
      ...MODEL_FLAG,
      required: false,
      help: `${MODEL_FLAG.help}: its frontier under the text protocol (methods delegate and mono; limits in its own tokens)`,
    },
    adapter: { type: 'string', dir: true, help: 'with --model: a PEFT LoRA adapter folder the model decodes with' },
    'clone-budget': { type: 'int', min: 1, max: 1 << 20, help: `with --model: tokens each clone may generate (default ${TEXT_LENGTHS.cloneBudget})` },
    n: { type: 'int', default: 200, min: 1, max: 100_000, help: 'problems' },
    seed: { type: 'int', default: HELD_OUT_SEED, min: 0, max: SEED_MAX, help: 'seed of the problem set (sampling seeds derive from it)' },
    split: {
      type: 'string',
      choices: EVAL_SPLITS,
      default: 'final',
      help: 'problem set: final (the final evaluation) or monitor (the set watched during training); disjoint from each other and from training problems',
    },
    methods: { type: 'string', default: FRONTIER_DEFAULTS.methods.join(','), help: 'comma list of delegate, mono, scK' },
    limits: {
      type: 'string',
      help: `comma list of root token limits (default ${FRONTIER_DEFAULTS.limits.join(',')}; with --model, in its own tokens, ${TEXT_FRONTIER_LIMITS.join(',')})`,
    },
    json: { type: 'bool', default: false, help: 'print {"points": [...], "pareto": [...]}' },
    backend: BACKEND_FLAG,
    weights: { ...WEIGHTS_FLAG, help: `with --model: ${WEIGHTS_FLAG.help}` },
    workers: { type: 'int', default: 0, min: 0, max: 16, help: 'rollout worker threads (0 = decode in this process)' },
    'limit-in-prompt': LIMIT_IN_PROMPT_FLAG,
  },
  async (f) => {
    let methods: Method[];
    let limits: number[];
    try {
      methods = validateMethods(f.methods.split(',').map((m) => m.trim()));
      limits = validateLimits((f.limits ?? FRONTIER_DEFAULTS.limits.join(',')).split(',').map(Number));
    } catch (e) {
      throw new UsageError(`--${(e as Error).message}`);
    }
    const { task, opts } = taskFromFlags(f.task, f.options);
    if ((f.model === undefined) === (f.checkpoint === undefined))
      throw new UsageError('give --checkpoint (a playground checkpoint) or --model (a Hugging Face model), one of them');
    if (f.model !== undefined) {
      const backend = await setupBackend(f.backend);
      // The one runner: the decoder carries the model's text protocol; limits count the model's own tokens.
      const { decoder, close } = await openTextDecoder({ model: f.model, adapter: f.adapter, weights: f.weights, workers: f.workers }, 64, backend);
      const problems = heldOutProblems(task, opts, f.n, f.seed, f.split as EvalSplit);
      const result = await frontier(
        decoder,
        task,
        problems,
        {
          ...FRONTIER_DEFAULTS,
          methods,
          limits: f.limits === undefined ? TEXT_FRONTIER_LIMITS : limits,
          seed: f.seed,
          // A folder keeps no record of how it was trained: its root is told its limit when asked (yes), not by auto.
          rollout: {
            ...FRONTIER_DEFAULTS.rollout,
            budgets: [f['clone-budget'] ?? TEXT_LENGTHS.cloneBudget],
            ...(f['limit-in-prompt'] === 'yes' ? { rootLimitMin: 1 } : {}),
          },
        },
        () => [],
        f.json ? undefined : (p) => console.log(pointLine(p)),
      );
      close();
      report({ ...result, points: result.points.map((p) => ({ ...p, checkpoint: f.adapter ?? (f.model as string) })) });
      return;
    }
    if (f['clone-budget'] !== undefined) throw new UsageError('--clone-budget: a toy spawn names its own budget bucket (this is for --model)');
    const backend = await setupBackend(f.backend);
    const tok = getTokenizer();
    const { policy, meta } = await loadPolicyFlag('checkpoint', f.checkpoint as string, false);
    const told = limitInPrompt(f['limit-in-prompt'], meta);
    const { decoder, close } = await openDecoder(policy, f.workers, backend);
    const problems = heldOutProblems(task, opts, f.n, f.seed, f.split as EvalSplit);
    const result = await frontier(
      decoder,
      task,
      problems,
      { ...FRONTIER_DEFAULTS, methods, limits, seed: f.seed, rollout: { ...FRONTIER_DEFAULTS.rollout, ...told } },
      (t) => tok.encode(t),
      f.json ? undefined : (p) => console.log(pointLine(p)),
    );
    close();
    disposeParams(policy.params);
    report(result);

    function report(result: { points: FrontierPoint[]; pareto: number[] }) {
      if (f.json) console.log(JSON.stringify({ split: f.split, seed: f.seed, n: f.n, ...result }));
      else
        console.log(
          `${f.split} set, seed ${f.seed}, n ${f.n}; pareto: ${result.pareto.map((i) => `${result.points[i].method}@${result.points[i].limit}`).join(', ')}`,
        );
    }
  },
);

/** One point as a line of the frontier's table. */
function pointLine(p: FrontierPoint): string {
  return `${p.method.padEnd(8)} limit ${String(p.limit).padStart(4)}  acc ${(p.accuracy * 100).toFixed(1)}% [${(p.interval[0] * 100).toFixed(1)}, ${(p.interval[1] * 100).toFixed(1)}]  tokens ${p.meanTokens.toFixed(1)}  critical ${p.meanCriticalPathTokens.toFixed(1)}`;
}
