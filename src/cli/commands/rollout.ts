import { TASK_NAMES } from '../../core/tasks';
import { SEED_MAX } from '../../core/rng';
import { TEMPERATURE } from '../../core/runConfig';
import { defineCommand } from '../command';
import { BACKEND_FLAG, OPTIONS_FLAG, freshPolicy, getTokenizer, loadPolicyFlag, setupBackend, taskFromFlags } from '../setup';
import { Rng } from '../../core/rng';
import { PolicyDecoder, RolloutScheduler, formatEpisode } from '../../core/rollout';
import { defaultRolloutConfig } from '../../core/runConfigTargets';
import { disposeParams } from '../../core/model/params';
import { UsageError } from '../args';
import { MODEL_FLAG, WEIGHTS_FLAG, modelSummary, openTextDecoder } from '../hfModel';
import type { ContextDecoder } from '../../core/rollout/scheduler';
import { TEXT_LENGTHS } from '../../core/rollout/textLimits';

export const rollout = defineCommand(
  'rollout',
  'Run one episode and print its delegation tree (or the trace as JSON).',
  {
    task: { type: 'string', choices: TASK_NAMES, default: 'arithmetic', help: 'task' },
    checkpoint: { type: 'string', dir: true, help: 'checkpoint directory (default: a random tiny model)' },
    model: { ...MODEL_FLAG, required: false, help: `${MODEL_FLAG.help}: the episode runs under the spawn_clone text protocol` },
    adapter: { type: 'string', dir: true, help: "with --model: a PEFT LoRA adapter folder (a train-lm save's) the model decodes with" },
    'root-tokens': {
      type: 'int',
      min: 1,
      max: 1 << 20,
      help: `tokens the root may generate (default the task's root limit; with --model ${TEXT_LENGTHS.rootMaxTokens})`,
    },
    'clone-budget': { type: 'int', min: 1, max: 1 << 20, help: `with --model: tokens each clone may generate (default ${TEXT_LENGTHS.cloneBudget})` },
    seed: { type: 'int', default: 0, min: 0, max: SEED_MAX, help: 'problem and sampling seed' },
    temperature: { type: 'number', default: 1, min: TEMPERATURE.min, max: TEMPERATURE.max, help: 'sampling temperature' },
    greedy: { type: 'bool', default: false, help: 'greedy decoding' },
    mono: { type: 'bool', default: false, help: 'forbid spawning (monolithic)' },
    options: OPTIONS_FLAG,
    json: { type: 'bool', default: false, help: 'print the trace as JSON' },
    backend: BACKEND_FLAG,
    weights: { ...WEIGHTS_FLAG, help: `with --model: ${WEIGHTS_FLAG.help}` },
  },
  async (f) => {
    const { task, opts } = taskFromFlags(f.task, f.options);
    await setupBackend(f.backend);
    if (f.model !== undefined && f.checkpoint !== undefined)
      throw new UsageError('--checkpoint and --model: give one (a playground checkpoint, or a Hugging Face folder)');
    if (f.model === undefined && f.adapter !== undefined) throw new UsageError('--adapter needs --model (the folder the adapter was trained on)');
    if (f.model === undefined && f['clone-budget'] !== undefined)
      throw new UsageError('--clone-budget: a toy spawn names its own budget bucket (this is for --model)');
    const tok = getTokenizer();
    const rng = new Rng(f.seed);
    const problem = task.generate(rng, opts, `seed${f.seed}`);
    // One runner for every model: the toy's token grammar, or a Hugging Face model's text protocol (its decoder carries it).
    let summary = '';
    let decoder: ContextDecoder & { dispose(): void };
    let release: () => void;
    if (f.model !== undefined) {
      const opened = await openTextDecoder({ model: f.model, adapter: f.adapter, weights: f.weights }, 8);
      summary = `${modelSummary(opened.loaded)}${f.adapter ? ` with the adapter ${f.adapter}` : ''}\n`;
      decoder = opened.decoder;
      release = opened.close;
    } else {
      const policy = f.checkpoint ? (await loadPolicyFlag('checkpoint', f.checkpoint, false)).policy : freshPolicy('tiny', 0);
      decoder = new PolicyDecoder(policy);
      release = () => disposeParams(policy.params);
    }
    const text = f.model !== undefined;
    const cfg = defaultRolloutConfig(task.name, {
      temperature: f.temperature,
      greedy: f.greedy,
      allowSpawn: !f.mono,
      ...(f['root-tokens'] !== undefined || text ? { rootMaxTokens: f['root-tokens'] ?? TEXT_LENGTHS.rootMaxTokens } : {}),
      ...(text ? { budgets: [f['clone-budget'] ?? TEXT_LENGTHS.cloneBudget] } : {}),
    });
    const scheduler = new RolloutScheduler(decoder, cfg, { policyVersion: 0, encode: (t) => tok.encode(t) });
    scheduler.addEpisode(task, problem, rng.fork());
    const [trace] = await scheduler.run();
    console.log(f.json ? JSON.stringify(trace) : `${summary}${formatEpisode(trace)}`);
    decoder.dispose();
    release();
  },
);
