import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

import {
  PAGE_DEFAULTS,
  RENAMED_CHECKPOINTS,
  RUN_CONFIG_FIELDS,
  RunConfigError,
  SHIPPED_CHECKPOINTS,
  checkField,
  configFromHash,
  configToHash,
  fieldOf,
  fieldsOf,
  flagName,
  runConfigDefaults,
  startCheckpoint,
  validateRunConfig,
} from './runConfig';
import { grpoConfigOf, rolloutConfigOf, sftConfigOf, taskMixOf } from './runConfigTargets';
import { defaultGrpoConfig, defaultRolloutConfig, defaultSftConfig } from './runConfigTargets';
import { rewardAt } from './rl/grpoStep';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();
const TABLE_REWARD = rewardAt(TABLE_GRPO, 0);
const TABLE_SFT = defaultSftConfig();

describe('the run-config table', () => {
  it('holds each field once, with one flag per command and a valid default on every surface and task', () => {
    const keys = RUN_CONFIG_FIELDS.map((f) => f.key);
    expect(new Set(keys).size).toBe(keys.length);
    for (const surface of ['train', 'sft'] as const) {
      const flags = fieldsOf(surface).map(flagName);
      expect(new Set(flags).size, surface).toBe(flags.length);
    }
    for (const surface of ['page', 'train', 'sft'] as const) {
      for (const task of ['arithmetic', 'multihop', 'arithmetic:1,multihop:3']) {
        const d = runConfigDefaults(surface, task);
        for (const f of RUN_CONFIG_FIELDS) expect(checkField(f, d[f.key]), `${surface} ${task} ${f.key}`).toBeNull();
      }
    }
  });

  it('lets train or sft set every field the page shows (but the page process itself)', () => {
    for (const f of fieldsOf('page')) {
      if (f.target === 'page') continue;
      expect(f.surfaces.includes('train') || f.surfaces.includes('sft'), f.key).toBe(true);
    }
  });

  it('starts from the task defaults: one clone per multihop chunk, the largest for a mix', () => {
    expect(runConfigDefaults('train', 'arithmetic')).toMatchObject({ maxClones: 4, maxRounds: 3, rootMaxTokens: 48 });
    expect(runConfigDefaults('train', 'multihop')).toMatchObject({ maxClones: 16, maxRounds: 4, rootMaxTokens: 224 });
    expect(runConfigDefaults('sft', 'arithmetic:1,multihop:3')).toMatchObject({ maxClones: 16, maxRounds: 4 });
    expect(validateRunConfig({ task: 'multihop', maxClones: 6 }, 'train').maxClones).toBe(6);
  });

  it('names every bad field with its range, and what a surface cannot set', () => {
    const bad = () => validateRunConfig({ lr: 0, clip: 5, group: 65, temperature: 0, seed: -1, budgets: [16, 16] }, 'train', { lr: '--lr' });
    expect(bad).toThrow(RunConfigError);
    let errors: string[] = [];
    try {
      bad();
    } catch (e) {
      errors = (e as RunConfigError).errors;
    }
    expect(errors).toEqual([
      'seed must be an integer in [0, 2^53 − 1 = 9007199254740991] (got -1)',
      'group must be an integer in [2, 64] (got 65)',
      '--lr must be a number in [1e-7, 0.1] (got 0)',
      'clip must be a number in [0.01, 0.99] (got 5)',
      'temperature must be a number in [0.05, 5] (got 0)',
      'budgets must be a non-empty subset of 8, 16, 32, 64, 128 (got [16,16])',
    ]);
    expect(() => validateRunConfig({ weightDecay: 0.1 }, 'page')).toThrow(/weightDecay cannot be set for page \(only train\)/);
    expect(() => validateRunConfig({ task: 'arithmetic,multihop' }, 'page')).toThrow(/the page runs one task/);
    expect(validateRunConfig({ task: 'arithmetic:1,multihop:2' }, 'train').task).toBe('arithmetic:1,multihop:2');
    expect(() => validateRunConfig({ task: 'chess' }, 'sft')).toThrow(/unknown task "chess"/);
    expect(() => validateRunConfig({ bogus: 1 } as never, 'sft')).toThrow(/unknown setting "bogus"/);
    // A whole config carrying other surfaces' fields at their defaults is fine.
    expect(validateRunConfig({ ...PAGE_DEFAULTS }, 'page')).toEqual(PAGE_DEFAULTS);
  });

  it('round-trips through the URL hash, writing only what differs, and reports bad entries', () => {
    const c = { ...PAGE_DEFAULTS, lr: 3e-5, gating: false, budgets: [16, 32], sftLr: 1e-3, seed: 2 ** 40 };
    const hash = configToHash(c);
    expect(hash).toBe('seed=1099511627776&lr=0.00003&gating=false&budgets=16%2C32&sftLr=0.001');
    expect(configFromHash(`#${hash}`)).toEqual({ config: c, errors: [], notes: [] });
    const { config, errors } = configFromHash('#lr=0&gating=maybe&nope=1&group=3');
    expect(config.group).toBe(3);
    expect(config.lr).toBe(PAGE_DEFAULTS.lr);
    expect(errors).toEqual(['lr must be a number in [1e-7, 0.1] (got 0)', 'gating must be true or false (got "maybe")', 'unknown setting "nope"']);
    // A mangled link still opens: bad encodings, a mix, a mini-batch that does not divide.
    expect(configFromHash('#task=%E0&lr=%').errors).toEqual(['task: not a valid URL encoding', 'lr: not a valid URL encoding']);
    const mix = configFromHash('#task=arithmetic%2Cmultihop');
    expect(mix.config.task).toBe('arithmetic');
    expect(mix.errors).toEqual(['task: the page runs one task (got the mix "arithmetic,multihop")']);
    const mb = configFromHash('#batch=8&miniBatch=3');
    expect(mb.config).toMatchObject({ batch: 8, miniBatch: PAGE_DEFAULTS.miniBatch });
    expect(mb.errors).toEqual(['miniBatch must divide batch = 8 (got 3)']);
    // A link that sets only the batch: the mini-batch follows it (the largest divisor up to the default), and a note says so.
    const small = configFromHash('#preset=tiny&group=2&batch=2');
    expect(small.config).toMatchObject({ batch: 2, miniBatch: 2 });
    expect(small.errors).toEqual([]);
    expect(small.notes).toEqual([`miniBatch set to 2: the default ${PAGE_DEFAULTS.miniBatch} does not divide batch = 2`]);
    expect(configFromHash('#batch=6').config.miniBatch).toBe(3);
    // A drawn root limit above the root limit is clamped to it, with a note; straddled limits need a drawn one.
    const limit = configFromHash('#rootMaxTokens=64&rootLimitMin=96');
    expect(limit.config).toMatchObject({ rootMaxTokens: 64, rootLimitMin: 64 });
    expect(limit.errors).toEqual([]);
    expect(limit.notes).toEqual(['rootLimitMin set to 64: 96 does not fit under rootMaxTokens = 64']);
    const straddle = configFromHash('#rootLimitStraddle=0.5');
    expect(straddle.config.rootLimitStraddle).toBe(0);
    expect(straddle.errors).toEqual(['rootLimitStraddle needs a root limit drawn per prompt (rootLimitMin)']);
    // Machine defaults (the page's rollout workers) are neither written nor lost.
    expect(configToHash({ ...PAGE_DEFAULTS, workers: 2 }, { workers: 3 })).toBe('workers=2');
    expect(configFromHash('#', { workers: 3 }).config.workers).toBe(3);
    // A multihop link opens with multihop's clone limits, and writes the task back.
    const multihop = configFromHash('#task=multihop').config;
    expect(multihop).toMatchObject({ task: 'multihop', maxClones: 16, maxRounds: 4 });
    expect(configToHash(multihop)).toBe('task=multihop');
    expect(configToHash({ ...multihop, maxClones: 4 })).toBe('task=multihop&maxClones=4');
  });
});

describe('task options in the table', () => {
  it('are a page field: checked by the task, written to the hash and read back', () => {
    const long = { ...runConfigDefaults('page', 'multihop'), taskOptions: { chunks: 6, perChunk: 4, filler: 24 } };
    const hash = configToHash(long);
    expect(hash).toBe(`task=multihop&taskOptions=${encodeURIComponent('{"chunks":6,"perChunk":4,"filler":24}')}`);
    expect(configFromHash(`#${hash}`)).toEqual({ config: long, errors: [], notes: [] });
    expect(validateRunConfig({ task: 'multihop', taskOptions: { perChunk: 4 } }, 'page').taskOptions).toEqual({ perChunk: 4 });
    // A bad value is named by the task's own check; an unknown field with the fields there are.
    const bad = configFromHash(`#task=multihop&taskOptions=${encodeURIComponent('{"perChunk":9}')}`);
    expect(bad.errors).toEqual(['taskOptions: multihop: perChunk must be an integer in [1, 6] (got 9)']);
    expect(bad.config).toMatchObject({ task: 'multihop', taskOptions: {} });
    expect(configFromHash(`#taskOptions=${encodeURIComponent('{"chunks":6}')}`).errors).toEqual([
      'taskOptions: arithmetic has no option chunks (it has minOperands, maxOperands, maxValue, productRate, groupRate)',
    ]);
    expect(configFromHash('#taskOptions=%5B1%5D').errors).toEqual(['taskOptions must be a JSON object (got [1])']);
    expect(() => validateRunConfig({ task: 'multihop', taskOptions: { hops: 0 } }, 'page')).toThrow(
      /taskOptions: multihop: hops must be an integer in \[1, 4\] \(got 0\)/,
    );
    // The commands check them where they build, with the same messages (taskMixOf, below).
    expect(() => taskMixOf(validateRunConfig({ taskOptions: { bogus: 1 } }, 'train'), '--options')).toThrow(
      /^--options: arithmetic has no option bogus \(it has minOperands/,
    );
  });
});

describe('the configs built from it', () => {
  it('give the recipe the runs found to learn as the defaults of the CLI and the page (docs/TRAINING.md)', () => {
    const c = grpoConfigOf(validateRunConfig({}, 'train'), 80);
    expect(c).toEqual({
      ...TABLE_GRPO,
      task: 'arithmetic',
      taskOptions: { minOperands: 3, maxOperands: 8, maxValue: 99, productRate: 0.3, groupRate: 0.15 },
      steps: 80,
      seed: 0,
      // The recipe: 16 prompts × 4 in 4 clipped mini-batches, lr 2e-5, dual clip 3, β 5e-4, root limit 48.
      batch: 16,
      miniBatch: 4,
      lr: 2e-5,
      loss: { ...TABLE_GRPO.loss, beta: 5e-4, dualClip: 3 },
      advantage: TABLE_GRPO.advantage,
      // The token cost 0.003 a generated token from step 250, Adam restarted there (docs/TRAINING.md, session 17).
      reward: { ...TABLE_REWARD, tokenRate: 0.003 },
      tokenRateAfter: 250,
      restartOptimizer: true,
      rollout: defaultRolloutConfig('arithmetic', { rootMaxTokens: 48, temperature: 1 }),
    });
    // Credit and gating as the reference; no budget cost.
    expect(c.advantage).toEqual({
      stdNormalize: true,
      credit: 'ratio',
      gating: true,
      gateMode: 'reference',
      gatedKl: true,
      gateRoots: false,
      eps: 1e-6,
      ratioClamp: 1.5,
    });
    expect(c.reward.budgetRate).toBe(0);
    expect(c).toMatchObject({ innerEpochs: 1, dynamicSampling: null });
    // The page's Train gets the same.
    const page = grpoConfigOf(validateRunConfig({}, 'page'), 80);
    expect({ ...page, seed: 0 }).toEqual(c);
  });

  it('give PPO its mini-batches, dual clip and dynamic sampling, and check the mini-batch against the batch', () => {
    const g = grpoConfigOf(
      validateRunConfig({ batch: 32, group: 8, miniBatch: 8, epochs: 2, dualClip: 3, dynamicSampling: true, oversample: 1.5, sampleRounds: 4 }, 'train'),
      5,
    );
    expect(g).toMatchObject({ batch: 32, group: 8, miniBatch: 8, innerEpochs: 2, dynamicSampling: { factor: 1.5, maxRounds: 4 }, loss: { dualClip: 3 } });
    // The factor and rounds only act with dynamic sampling on.
    expect(grpoConfigOf(validateRunConfig({ oversample: 3 }, 'train'), 5).dynamicSampling).toBeNull();
    expect(() => validateRunConfig({ batch: 8, miniBatch: 3 }, 'train', { miniBatch: '--mini-batch', batch: '--batch' })).toThrow(
      /^--mini-batch must divide --batch = 8 \(got 3\)$/,
    );
    expect(() => validateRunConfig({ miniBatch: 32 }, 'page')).toThrow(/^miniBatch must be at most batch = 16 \(got 32\)$/);
    expect(() => validateRunConfig({ miniBatch: 2.5, dualClip: 1 }, 'train')).toThrow(
      /miniBatch must be an integer in \[1, 1024\], or unset \(got 2.5\); dualClip must be a number in \[1.01, 100\], or unset \(got 1\)/,
    );
    // The builder checks too (a config that did not come through validation).
    expect(() => grpoConfigOf({ ...validateRunConfig({}, 'train'), miniBatch: 5 }, 5)).toThrow(/miniBatch must divide batch = 16 \(got 5\)/);
    expect(fieldsOf('page').map((f) => f.key)).toEqual(expect.arrayContaining(['miniBatch', 'dualClip', 'dynamicSampling', 'oversample', 'sampleRounds']));
    // The restart of Adam needs a switch step to restart at.
    expect(() =>
      validateRunConfig({ restartOptimizer: true, tokenRateAfter: 0 }, 'train', {
        restartOptimizer: '--restart-optimizer',
        tokenRateAfter: '--token-rate-after',
      }),
    ).toThrow(/^--restart-optimizer restarts Adam at the step the token cost starts, so it needs --token-rate-after > 0 \(got 0\)$/);
    expect(grpoConfigOf(validateRunConfig({ restartOptimizer: true, tokenRate: 0.003, tokenRateAfter: 250 }, 'page'), 5)).toMatchObject({
      restartOptimizer: true,
      tokenRateAfter: 250,
      reward: { tokenRate: 0.003 },
    });
  });

  it('map each flag onto its target', () => {
    const rc = validateRunConfig(
      {
        task: 'multihop',
        gating: false,
        gateMode: 'protocol',
        gatedKl: false,
        gateRoots: true,
        credit: 'broadcast',
        std: false,
        clip: 0.1,
        clipHigh: 0.3,
        epochs: 2,
        rootTau: 10,
        callRate: 0,
        budgetRate: 0.002,
        budgets: [16, 32],
        maxClones: 8,
        temperature: 0.7,
      },
      'train',
    );
    const g = grpoConfigOf(rc, 5);
    expect(g.advantage).toMatchObject({ gating: false, gateMode: 'protocol', gatedKl: false, gateRoots: true, credit: 'broadcast', stdNormalize: false });
    expect(g.loss).toMatchObject({ clipLow: 0.1, clipHigh: 0.3, temperature: 0.7 });
    expect(g.innerEpochs).toBe(2);
    expect(g.reward).toMatchObject({ rootTau: 10, callRate: 0, budgetRate: 0.002 });
    expect(() => validateRunConfig({ gateMode: 'all' as never, budgetRate: 0.5 }, 'train', { gateMode: '--gate-mode' })).toThrow(
      /--gate-mode must be one of reference, protocol \(got "all"\); budgetRate must be a number in \[0, 0.1\] \(got 0.5\)/,
    );
    expect(g.rollout).toMatchObject({ budgets: [16, 32], maxClonesPerRound: 8, maxRounds: 4, temperature: 0.7 });
    expect(rolloutConfigOf(rc, { greedy: true }).greedy).toBe(true);
  });

  it('hand the spawn limits to the warm start teacher', () => {
    const s = sftConfigOf(validateRunConfig({ budgets: [16, 32], maxClones: 2 }, 'sft'), 10);
    expect(s.limits).toEqual({ budgets: [16, 32], maxClonesPerRound: 2, maxRounds: 3 });
    // The table's defaults, and the warm start's fixed values, by hand.
    expect(sftConfigOf(validateRunConfig({}, 'sft'), 1000)).toEqual({
      task: 'arithmetic',
      taskOptions: expect.any(Object),
      steps: 1000,
      seed: 0,
      lr: 3e-3,
      batchTokens: 4096,
      microTokens: 2048,
      warmup: 50,
      delegateFraction: 0.5,
      teacher: 'expert',
      limits: { budgets: [8, 16, 32, 64, 128], maxClonesPerRound: 4, maxRounds: 3 },
      minLrFrac: 0.1,
      weightDecay: 0.01,
      gradClip: 1,
    });
    expect(TABLE_SFT).toEqual(sftConfigOf(runConfigDefaults('sft'), 1));
    // A short run warms up for at most a tenth of its steps (the page's requests, the CLI alike).
    expect(sftConfigOf(validateRunConfig({}, 'sft'), 30).warmup).toBe(3);
    expect(sftConfigOf(validateRunConfig({ sftTeacher: 'naive' }, 'sft'), 10).teacher).toBe('naive');
    expect(() => validateRunConfig({ sftTeacher: 'random' as never }, 'sft', { sftTeacher: '--teacher' })).toThrow(
      /--teacher must be one of expert, naive \(got "random"\)/,
    );
    expect(() => validateRunConfig({ sftTeacher: 'naive' }, 'train')).toThrow(/sftTeacher cannot be set for train \(only page, sft\)/);
  });

  it('read one task, a uniform mix and a weighted mix, with options by task name', () => {
    const mix = (task: string, taskOptions: Record<string, unknown> = {}) => taskMixOf(validateRunConfig({ task, taskOptions }, 'sft'), '--options');
    expect(mix('arithmetic').map((m) => [m.task.name, m.weight])).toEqual([['arithmetic', 1]]);
    expect(mix('arithmetic, multihop').map((m) => [m.task.name, m.weight])).toEqual([
      ['arithmetic', 1],
      ['multihop', 1],
    ]);
    expect(mix('arithmetic:1,multihop:2.5').map((m) => m.weight)).toEqual([1, 2.5]);
    expect(mix('multihop', { perChunk: 1 })[0].opts).toMatchObject({ perChunk: 1, chunks: 6, hops: 2 });
    expect(mix('arithmetic:1,multihop:3', { multihop: { hops: 3 } })[1].opts).toMatchObject({ hops: 3 });
    expect(() => mix('multihop', { perchunk: 1 })).toThrow(/--options: multihop has no option perchunk \(it has chunks, perChunk, hops, names, filler\)/);
    expect(() => mix('multihop', { perChunk: 9 })).toThrow(/--options: .*perChunk must be an integer in \[1, 6\] \(got 9\)/);
    expect(() => mix('arithmetic,multihop', { chess: {} })).toThrow(/chess is not a task of arithmetic,multihop/);
    for (const bad of ['arithmetic:0,multihop', 'multihop:x', 'multihop:1:2'])
      expect(checkField(fieldOf('task'), bad), bad).toMatch(/weight of (arithmetic|multihop) must be a positive number/);
  });

  it("give GRPO on a mix each task's own limits where the config left the mix's defaults", () => {
    const mixed = validateRunConfig({ task: 'arithmetic:1,multihop:2', taskOptions: { multihop: { chunks: 5, perChunk: 5 } } }, 'train');
    // A mix's defaults are its largest: multihop's 224 / 16 / 4.
    expect(mixed).toMatchObject({ rootMaxTokens: 224, maxClones: 16, maxRounds: 4 });
    const g = grpoConfigOf(mixed, 10);
    expect(g.task).toBe('arithmetic:1,multihop:2');
    expect(g.taskOptions).toMatchObject({ multihop: { chunks: 5, perChunk: 5 }, arithmetic: { maxOperands: 8 } });
    expect(g.taskRollout).toEqual({
      arithmetic: { rootMaxTokens: 48, maxClonesPerRound: 4, maxRounds: 3 },
      multihop: { rootMaxTokens: 224, maxClonesPerRound: 16, maxRounds: 4 },
    });
    // A limit the user set applies to every task; the others keep their own.
    const set = grpoConfigOf(validateRunConfig({ task: 'arithmetic,multihop', rootMaxTokens: 100 }, 'train'), 10);
    expect(set.taskRollout).toEqual({
      arithmetic: { rootMaxTokens: 100, maxClonesPerRound: 4, maxRounds: 3 },
      multihop: { rootMaxTokens: 100, maxClonesPerRound: 16, maxRounds: 4 },
    });
    // One task records no per-task limits (its run.json is as before).
    expect(grpoConfigOf(validateRunConfig({ task: 'multihop' }, 'train'), 10)).not.toHaveProperty('taskRollout');
  });
});

describe('the start checkpoint', () => {
  it('auto: the tiny warm start on tiny; on small the naive warm start, the two-task one once multihop is in the task', () => {
    expect(startCheckpoint({ checkpoint: 'auto', preset: 'tiny', task: 'multihop' })).toBe('warmstart-tiny');
    expect(startCheckpoint({ checkpoint: 'auto', preset: 'small', task: 'arithmetic' })).toBe('warmstart-naive');
    expect(startCheckpoint({ checkpoint: 'auto', preset: 'small', task: 'multihop' })).toBe('warmstart-mix');
    expect(startCheckpoint({ checkpoint: 'auto', preset: 'small', task: 'arithmetic:3,multihop:1' })).toBe('warmstart-mix');
    expect(startCheckpoint({ checkpoint: 'warmstart', preset: 'small', task: 'multihop' })).toBe('warmstart');
    expect(startCheckpoint({ checkpoint: 'random', preset: 'small', task: 'multihop' })).toBeNull();
  });

  it('reads a checkpoint’s old name as its new one, in a saved config and in a link', () => {
    expect(validateRunConfig({ checkpoint: 'selfcest-arith-tokens' as never }, 'page').checkpoint).toBe('selfcest-arith');
    expect(configFromHash('#checkpoint=selfcest-arith-tokens')).toMatchObject({ config: { checkpoint: 'selfcest-arith' }, errors: [] });
    // Only the old names: anything else unknown is still refused with the field's name.
    expect(() => validateRunConfig({ checkpoint: 'selfcest-arith-tokenz' as never }, 'page')).toThrow(
      /checkpoint must be one of auto, .*selfcest-arith, .* \(got "selfcest-arith-tokenz"\)/,
    );
    expect(configFromHash('#checkpoint=constructor').errors).toEqual([expect.stringMatching(/^checkpoint must be one of /)]);
    for (const now of Object.values(RENAMED_CHECKPOINTS)) expect(Object.keys(SHIPPED_CHECKPOINTS)).toContain(now);
    for (const old of Object.keys(RENAMED_CHECKPOINTS)) expect(Object.keys(SHIPPED_CHECKPOINTS)).not.toContain(old);
  });

  it('every shipped checkpoint is under public/checkpoints/ and is the preset the table says (a Hugging Face folder: none, no selfcest.json)', () => {
    for (const [name, { preset }] of Object.entries(SHIPPED_CHECKPOINTS)) {
      if (preset === null) {
        expect(existsSync(new URL(`../../public/checkpoints/${name}/config.json`, import.meta.url)), name).toBe(true);
        expect(existsSync(new URL(`../../public/checkpoints/${name}/selfcest.json`, import.meta.url)), name).toBe(false);
        continue;
      }
      const meta = JSON.parse(readFileSync(new URL(`../../public/checkpoints/${name}/selfcest.json`, import.meta.url), 'utf8')) as {
        preset: string;
        format: string;
      };
      expect([name, meta.format, meta.preset]).toEqual([name, 'selfcest-checkpoint', preset]);
    }
  });
});
