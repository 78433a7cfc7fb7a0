import { SEED_MAX } from '../../core/rng';
import { defineCommand } from '../command';
import { checkOutDir } from '../runDir';
import { BACKEND_FLAG, freshPolicy, savePolicy, setupBackend } from '../setup';
import { parameterCount } from '../../core/model/config';
import { disposeParams } from '../../core/model/params';

export const init = defineCommand(
  'init',
  'Write a randomly initialised checkpoint in the export format.',
  {
    preset: { type: 'string', choices: ['tiny', 'small'], required: true, help: 'model size' },
    seed: { type: 'int', default: 0, min: 0, max: SEED_MAX, help: 'initialisation seed' },
    out: { type: 'string', required: true, help: 'output directory' },
    backend: BACKEND_FLAG,
  },
  async (f) => {
    await checkOutDir(f.out);
    await setupBackend(f.backend);
    const policy = freshPolicy(f.preset, f.seed);
    await savePolicy(f.out, policy, { preset: f.preset, step: 0, training: { command: 'init', preset: f.preset, seed: f.seed } });
    console.log(`wrote ${f.preset} (${parameterCount(policy.config)} parameters, seed ${f.seed}) to ${f.out}`);
    disposeParams(policy.params);
  },
);
