import { SEED_MAX } from '../../core/rng';
import { defineCommand } from '../command';
import { UsageError } from '../args';
import { BACKEND_FLAG, getTokenizer, loadPolicyFlag, setupBackend } from '../setup';
import { lookupProbe } from '../../core/eval/lookup';
import { disposeParams } from '../../core/model/params';

export const lookup = defineCommand(
  'lookup',
  "The multihop clone's lookup on its own: greedy accuracy of a clone asked a variable its chunk assigns (answer the value) or does not (answer none), by chunk size.",
  {
    checkpoint: { type: 'string', dir: true, required: true, help: 'checkpoint directory' },
    n: { type: 'int', default: 100, min: 1, max: 5000, help: 'lookups of each kind per chunk size' },
    sizes: { type: 'string', default: '1,3,6', help: 'chunk sizes (assignments per chunk, 1–6)' },
    seed: { type: 'int', default: 1, min: 0, max: SEED_MAX, help: 'seed of the lookups' },
    filler: {
      type: 'int',
      default: 0,
      min: 0,
      max: 96,
      help: "filler characters among each chunk's assignments, as multihop's filler option (its long context: 24 for 4 assignments)",
    },
    names: {
      type: 'int',
      default: 1,
      min: 1,
      max: 2,
      help: 'the multihop option names: 1 (one-letter names, q7.) or 2 (qx=7., the notation of the first multihop runs)',
    },
    json: { type: 'bool', default: false, help: 'print JSON' },
    backend: BACKEND_FLAG,
  },
  async (f) => {
    await setupBackend(f.backend);
    const sizes = f.sizes.split(',').map((s) => Number(s.trim()));
    const bad = sizes.find((s) => !Number.isInteger(s) || s < 1 || s > 6);
    if (bad !== undefined) throw new UsageError(`--sizes: each chunk size must be an integer in [1, 6] (got ${JSON.stringify(f.sizes)})`);
    const { policy } = await loadPolicyFlag('checkpoint', f.checkpoint, false);
    const tok = getTokenizer();
    try {
      const rows = lookupProbe(policy.params, policy.config, (t) => tok.encode(t), sizes, f.n, f.seed, f.names, f.filler);
      if (f.json) console.log(JSON.stringify(rows));
      else
        for (const r of rows)
          console.log(
            `chunk of ${r.size}: finds ${(r.foundAccuracy * 100).toFixed(1)}% of ${r.foundN}, answers none ${(r.missingAccuracy * 100).toFixed(1)}% of ${r.missingN}`,
          );
    } finally {
      disposeParams(policy.params);
    }
  },
);
