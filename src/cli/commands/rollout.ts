import { TASK_NAMES } from '../../core/tasks';
import { SEED_MAX } from '../../core/rng';
import { TEMPERATURE } from '../../core/runConfig';
import { defineCommand } from '../command';
import { BACKEND_FLAG, OPTIONS_FLAG, freshPolicy, getTokenizer, loadPolicyFlag, setupBackend, taskFromFlags } from '../setup';
import { Rng } from '../../core/rng';
import { PolicyDecoder, RolloutScheduler, formatEpisode } from '../../core/rollout';
import { defaultRolloutConfig } from '../../core/runConfigTargets';
import { disposeParams } from '../../core/model/params';

export const rollout = defineCommand(
  'rollout',
  'Run one episode and print its delegation tree (or the trace as JSON).',
  {
    task: { type: 'string', choices: TASK_NAMES, default: 'arithmetic', help: 'task' },
    checkpoint: { type: 'string', dir: true, help: 'checkpoint directory (default: a random tiny model)' },
    seed: { type: 'int', default: 0, min: 0, max: SEED_MAX, help: 'problem and sampling seed' },
    temperature: { type: 'number', default: 1, min: TEMPERATURE.min, max: TEMPERATURE.max, help: 'sampling temperature' },
    greedy: { type: 'bool', default: false, help: 'greedy decoding' },
    mono: { type: 'bool', default: false, help: 'forbid spawning (monolithic)' },
    options: OPTIONS_FLAG,
    json: { type: 'bool', default: false, help: 'print the trace as JSON' },
    backend: BACKEND_FLAG,
  },
  async (f) => {
    const { task, opts } = taskFromFlags(f.task, f.options);
    await setupBackend(f.backend);
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
