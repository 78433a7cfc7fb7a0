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
import { MODEL_FLAG, WEIGHTS_FLAG, loadAdapter, loadTextModel, modelSummary } from '../hfModel';
import { runTextEpisode, textEpisodeTrace } from '../../core/rollout/textEpisode';
import { formatTextEpisode } from '../../core/rollout/textTrace';
import { TEXT_LENGTHS } from '../../core/rollout/textLimits';
import { samplingChooser } from '../../core/model/decoder';
import { rootChat } from '../../core/verl/dataset';
import type { Task } from '../../core/tasks/types';
import type { TaskName } from '../../core/tasks';

export const rollout = defineCommand(
  'rollout',
  'Run one episode and print its delegation tree (or the trace as JSON).',
  {
    task: { type: 'string', choices: TASK_NAMES, default: 'arithmetic', help: 'task' },
    checkpoint: { type: 'string', dir: true, help: 'checkpoint directory (default: a random tiny model)' },
    model: { ...MODEL_FLAG, required: false, help: `${MODEL_FLAG.help}: the episode runs under the spawn_clone text protocol` },
    adapter: { type: 'string', dir: true, help: "with --model: a PEFT LoRA adapter folder (a train-lm save's) the model decodes with" },
    'root-tokens': { type: 'int', min: 1, max: 1 << 20, help: `with --model: tokens the root may generate (default ${TEXT_LENGTHS.rootMaxTokens})` },
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
    if (f.model !== undefined) {
      if (f.checkpoint !== undefined) throw new UsageError('--checkpoint and --model: give one (a playground checkpoint, or a Hugging Face folder)');
      await textRollout(f.model, f.adapter, task, opts, f);
      return;
    }
    if (f.adapter !== undefined) throw new UsageError('--adapter needs --model (the folder the adapter was trained on)');
    const tok = getTokenizer();
    const policy = f.checkpoint ? (await loadPolicyFlag('checkpoint', f.checkpoint, false)).policy : freshPolicy('tiny', 0);
    const cfg = defaultRolloutConfig(task.name, { temperature: f.temperature, greedy: f.greedy, allowSpawn: !f.mono });
    const rng = new Rng(f.seed);
    const problem = task.generate(rng, opts, `seed${f.seed}`);
    const decoder = new PolicyDecoder(policy);
    const scheduler = new RolloutScheduler(decoder, cfg, { policyVersion: 0, encode: (t) => tok.encode(t) });
    scheduler.addEpisode(task, problem, rng.fork());
    const [trace] = await scheduler.run();
    console.log(f.json ? JSON.stringify(trace) : formatEpisode(trace));
    decoder.dispose();
    disposeParams(policy.params);
  },
);

/** One text episode of a Hugging Face model (with an adapter, if given) on the seed's problem. */
async function textRollout<O>(
  modelDir: string,
  adapterDir: string | undefined,
  task: Task<O>,
  opts: O,
  f: { seed: number; temperature: number; greedy: boolean; mono: boolean; json: boolean; weights: string; 'root-tokens'?: number; 'clone-budget'?: number },
): Promise<void> {
  if (f.mono) throw new UsageError('--mono applies to the token protocol; a text episode offers the spawn_clone tool');
  const loaded = await loadTextModel('model', modelDir, f.weights);
  const adapters = adapterDir !== undefined ? await loadAdapter('adapter', adapterDir, loaded.model) : undefined;
  const model = { ...loaded.model, adapters };
  const rng = new Rng(f.seed);
  const problem = task.generate(rng, opts, `seed${f.seed}`);
  const vocab = model.config.vocabSize;
  // The task's spawn limits in the config table.
  const spawn = defaultRolloutConfig(task.name);
  const episode = await runTextEpisode(
    model,
    rootChat(task.name as TaskName, problem),
    {
      rootMaxTokens: f['root-tokens'] ?? TEXT_LENGTHS.rootMaxTokens,
      cloneBudget: f['clone-budget'] ?? TEXT_LENGTHS.cloneBudget,
      maxClones: spawn.maxClonesPerRound,
      maxRounds: spawn.maxRounds,
    },
    {
      context: problem.context ?? {},
      choose: samplingChooser(vocab, f.greedy ? 0 : f.temperature, rng),
    },
  );
  const trace = textEpisodeTrace(episode, model.tokenizer, problem, task.verify(problem, episode.answer).correct);
  if (f.json) console.log(JSON.stringify(trace));
  else console.log(`${modelSummary(loaded)}${adapterDir ? ` with the adapter ${adapterDir}` : ''}\n${formatTextEpisode(trace)}`);
  adapters?.dispose();
  model.params.forEach((t) => t.dispose());
}
