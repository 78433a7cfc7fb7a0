import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { SEED_MAX } from '../../core/rng';
import { defineCommand } from '../command';
import { UsageError } from '../args';
import { BACKEND_FLAG, getTokenizer, setupBackend } from '../setup';
import { LOOKUP_PROBE_DEFAULTS, type LookupProbeConfig, runLookupProbe, validateLookupProbeConfig } from '../../core/eval/lookupProbe';
import { presetConfig } from '../../core/model/config';

const D = LOOKUP_PROBE_DEFAULTS;

export const probeLookup = defineCommand(
  'probe-lookup',
  "What a fresh model learns of the multihop clone's lookup alone: trains on lookup drills from random weights and reports held-out greedy accuracy (finds the value / answers none) and the steps to the target.",
  {
    preset: { type: 'string', default: 'small', choices: ['tiny', 'small'], help: 'model shape' },
    size: { type: 'int', default: 3, min: 1, max: 6, help: 'assignments per chunk' },
    names: { type: 'int', default: 2, min: 1, max: 2, help: 'characters (tokens) per variable name' },
    layout: { type: 'string', default: 'last', choices: ['last', 'first'], help: 'the question after the chunk (protocol v1) or before it' },
    cot: { type: 'bool', default: false, help: 'the clone restates the lookup (=ab=12) before its answer' },
    adjacent: {
      type: 'bool',
      default: false,
      help: "multihop's one-letter notation: the value right after its name (q7.), the clone writing q7<ans>7<eos> (needs --names 1)",
    },
    mix: { type: 'bool', default: false, help: 'train on chunks of 1 to --size assignments (held out: --size)' },
    steps: { type: 'int', default: 3000, min: 1, max: 1_000_000, help: 'most training steps' },
    batch: { type: 'int', default: D.batch, min: 2, max: 4096, help: 'drills per step' },
    lr: { type: 'number', default: D.lr, min: 1e-6, max: 1, help: 'AdamW rate (constant after warm-up)' },
    warmup: { type: 'int', default: D.warmup, min: 0, max: 10_000_000, help: 'warm-up steps' },
    'eval-every': { type: 'int', default: D.evalEvery, min: 1, max: 10_000_000, help: 'steps between held-out readings' },
    'eval-n': { type: 'int', default: D.evalN, min: 1, max: 5000, help: 'held-out drills of each kind' },
    target: { type: 'number', default: D.target, min: 0, max: 1, help: 'stop when both kinds reach this accuracy (0 = never stop early)' },
    seed: { type: 'int', default: D.seed, min: 0, max: SEED_MAX, help: 'seed of weights and drills' },
    out: { type: 'string', help: 'JSON lines file: the configuration, then one row per reading, then the result' },
    backend: BACKEND_FLAG,
  },
  async (f) => {
    const cfg: LookupProbeConfig = {
      ...D,
      size: f.size,
      nameChars: f.names as 1 | 2,
      layout: f.layout as LookupProbeConfig['layout'],
      mix: f.mix,
      cot: f.cot,
      adjacent: f.adjacent,
      steps: f.steps,
      batch: f.batch,
      lr: f.lr,
      warmup: f.warmup,
      evalEvery: f['eval-every'],
      evalN: f['eval-n'],
      target: f.target,
      seed: f.seed,
    };
    try {
      validateLookupProbeConfig(cfg);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    const backend = await setupBackend(f.backend);
    const tok = getTokenizer();
    const out = f.out;
    // Written synchronously: on wasm the training loop's awaits never yield to file I/O, and a
    // reading must be on disk when it is printed (a killed probe keeps what it measured).
    const line = (o: object) => {
      if (out) appendFileSync(out, JSON.stringify(o) + '\n');
    };
    if (out) {
      mkdirSync(dirname(out), { recursive: true });
      writeFileSync(out, JSON.stringify({ kind: 'config', preset: f.preset, backend, ...cfg }) + '\n');
    }
    const result = await runLookupProbe(
      presetConfig(f.preset),
      cfg,
      (t) => tok.encode(t),
      (r) => {
        console.log(
          `step ${r.step}: finds ${(r.foundAccuracy * 100).toFixed(1)}%, none ${(r.missingAccuracy * 100).toFixed(1)}%, loss ${r.loss.toFixed(4)} (${r.elapsedSec}s)`,
        );
        line({ kind: 'row', ...r });
      },
    );
    const last = result.rows[result.rows.length - 1];
    line({ kind: 'result', stepsToTarget: result.stepsToTarget, final: last });
    console.log(
      result.stepsToTarget === null
        ? `target ${cfg.target} not reached in ${cfg.steps} steps (last: finds ${(last.foundAccuracy * 100).toFixed(1)}%, none ${(last.missingAccuracy * 100).toFixed(1)}%)`
        : `target ${cfg.target} reached at step ${result.stepsToTarget}`,
    );
  },
);
