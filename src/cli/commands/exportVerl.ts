import { readFile, readdir, rename, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { defineRunCommand } from '../command';
import { UsageError, usageErrors } from '../args';
import { checkOutDir } from '../runDir';
import { grpoConfigOf } from '../../core/runConfigTargets';
import { withOptions } from '../../core/tasks';
import { EVAL_SPLITS, type EvalSplit } from '../../core/eval/splits';
import {
  REFERENCE_RECIPE,
  VERL_LENGTH_DEFAULTS,
  VERL_RECIPES,
  type TokenScale,
  type VerlRecipe,
  lengthTokenScale,
  rewardInModelTokens,
  toYaml,
  unsupportedInVerl,
  verlConfig,
  verlLaunch,
  withReferenceRecipe,
} from '../../core/verl/config';
import { verlReadme } from '../../core/verl/readme';
import { MAX_VERL_ROWS, exportVerlDataset } from '../verl/exportDataset';
import { VERL_ANSWER_RULES, type VerlAnswerRule, rewardPythonSource } from '../verl/rewardFile';

/** The files an export writes; a folder holding only these (an earlier export) may be written again. */
const EXPORT_FILES = ['README.md', 'config.yaml', 'run.json', 'selfcest_dump.py', 'selfcest_reward.py', 'test.parquet', 'train.parquet'];
const EXPORT_FORMAT = 'selfcest-verl-export';

/** An argument as a POSIX shell reads it back (single-quoted unless plain). */
const shellWord = (a: string) => (/^[\w./:=@,+-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);

/** A task, its reward and the clone protocol as files SELFCEST's verl fork trains on (docs/FORMATS.md, "verl export"). */
export const exportVerl = defineRunCommand(
  'export-verl',
  "Write a task's problems (train.parquet, test.parquet), the playground's reward (selfcest_reward.py) and the run's recipe (config.yaml) for SELFCEST's verl fork. Takes train's run-config flags (--task, --options, --seed, reward and spawn limits).",
  {
    train: { type: 'int', required: true, min: 1, max: MAX_VERL_ROWS, help: 'problems in train.parquet (from the train split)' },
    test: { type: 'int', required: true, min: 1, max: MAX_VERL_ROWS, help: 'problems in test.parquet (from the held-out set)' },
    'test-split': { type: 'string', choices: EVAL_SPLITS, default: 'final', help: 'held-out set of test.parquet: final (what eval scores) or monitor' },
    'data-source': { type: 'string', help: 'data_source of the rows (default selfcest_<task>)' },
    'verl-dir': { type: 'string', help: 'the folder as the verl machine sees it (absolute), for the paths in config.yaml (default: --out, made absolute)' },
    recipe: {
      type: 'string',
      choices: VERL_RECIPES,
      default: 'playground',
      help: "whose reward and clone-loop settings: the playground run's, or the reference's (SELFCEST's clone_tool_grpo_alt.yaml and clone_reward_2.py; a flag given here still wins)",
    },
    'response-length': {
      type: 'int',
      min: 16,
      max: 1 << 20,
      help: `a real model's root response tokens (verl counts injected tool responses too; default ${VERL_LENGTH_DEFAULTS.responseLength}, reference ${REFERENCE_RECIPE.lengths.responseLength})`,
    },
    'prompt-length': {
      type: 'int',
      min: 16,
      max: 1 << 20,
      help: `prompt tokens (default ${VERL_LENGTH_DEFAULTS.promptLength}, reference ${REFERENCE_RECIPE.lengths.promptLength})`,
    },
    'clone-length': {
      type: 'int',
      min: 1,
      max: 1 << 20,
      help: `one clone's response tokens, its budget in the reward when verl records none (default ${VERL_LENGTH_DEFAULTS.cloneLength})`,
    },
    'summary-length': {
      type: 'int',
      min: 1,
      max: 1 << 20,
      help: `characters of a clone's answer injected into the root (verl cuts summaries by characters; default ${VERL_LENGTH_DEFAULTS.summaryLength})`,
    },
    steps: { type: 'int', min: 1, max: 10_000_000, help: "the run's GRPO steps: trainer.total_training_steps (default one pass over train.parquet)" },
    gpus: { type: 'int', default: 1, min: 1, max: 1024, help: 'GPUs per node (trainer.n_gpus_per_node)' },
    nodes: { type: 'int', default: 1, min: 1, max: 4096, help: 'nodes (trainer.nnodes)' },
    tp: { type: 'int', default: 1, min: 1, max: 64, help: "GPUs per rollout server (rollout.tensor_model_parallel_size; the reference's 1)" },
    'save-freq': {
      type: 'int',
      min: 1,
      max: 10_000_000,
      help: 'steps between checkpoints; verl also saves at the last step (default 50, reference 200, at most --steps)',
    },
    'test-freq': { type: 'int', min: 1, max: 10_000_000, help: 'steps between held-out readings on test.parquet (default 25, reference 50, at most --steps)' },
    wandb: { type: 'bool', help: 'log to wandb too (needs an account); console and tensorboard always' },
    'token-scale': {
      type: 'number',
      min: 0.01,
      max: 10_000,
      help: "the playground recipe's model tokens per playground token, for its thresholds and token cost (default: the response and clone lengths against the root limit and largest budget; 1: the playground's own model)",
    },
    answers: {
      type: 'string',
      choices: VERL_ANSWER_RULES,
      default: 'last-integer',
      help: "how the playground recipe reads an answer: last-integer (a real model's prose, as the reference reads it) or exact (the playground's verdict)",
    },
    out: { type: 'string', required: true, help: 'folder to write (new, or an earlier export)' },
  },
  async ({ flags: f, config: given, given: named, argv }) => {
    const recipe = f.recipe as VerlRecipe;
    const rc = recipe === 'reference' ? withReferenceRecipe(given, named) : given;
    const cfg = usageErrors(() => grpoConfigOf(rc, 1), { taskOptions: '--options', miniBatch: '--mini-batch' });
    const refused = unsupportedInVerl(cfg);
    if (refused.length > 0) throw new UsageError(refused.join('\n'));
    const verlDir = f['verl-dir'] ?? resolve(f.out);
    if (!isAbsolute(verlDir)) throw new UsageError(`--verl-dir must be an absolute path (got ${JSON.stringify(verlDir)})`);
    const base = recipe === 'reference' ? REFERENCE_RECIPE.lengths : VERL_LENGTH_DEFAULTS;
    const lengths = {
      responseLength: f['response-length'] ?? base.responseLength,
      promptLength: f['prompt-length'] ?? base.promptLength,
      cloneLength: f['clone-length'] ?? base.cloneLength,
      summaryLength: f['summary-length'] ?? base.summaryLength,
    };
    const launch = verlLaunch({
      steps: f.steps,
      trainRows: f.train,
      batch: cfg.batch,
      miniBatch: cfg.miniBatch ?? cfg.batch,
      group: cfg.group,
      gpusPerNode: f.gpus,
      nodes: f.nodes,
      tensorParallel: f.tp,
      wandb: f.wandb === true,
      saveFreq: f['save-freq'] ?? (recipe === 'reference' ? 200 : undefined),
      testFreq: f['test-freq'] ?? (recipe === 'reference' ? 50 : undefined),
    });
    if (Array.isArray(launch)) throw new UsageError(launch.join('\n'));
    if (recipe === 'reference' && (f['token-scale'] !== undefined || named.has('tokenRate')))
      throw new UsageError("--token-scale applies to the playground recipe's reward; the reference's thresholds are in model tokens already");
    const scale: TokenScale = f['token-scale'] !== undefined ? { root: f['token-scale'], clone: f['token-scale'] } : lengthTokenScale(cfg, lengths);
    const answers = (recipe === 'reference' ? 'last-integer' : f.answers) as VerlAnswerRule;
    const rewardSettings = recipe === 'reference' ? cfg.reward : rewardInModelTokens(cfg.reward, scale);
    const entry = withOptions(cfg.task, cfg.taskOptions);
    // Everything that can be refused is built before the folder is touched.
    const reward = rewardPythonSource({
      recipe,
      task: cfg.task,
      reward: rewardSettings,
      answers,
      gating: cfg.advantage.gating,
      gateMode: cfg.advantage.gateMode,
      cloneMaxTokens: lengths.cloneLength,
      formatMaxTokens: REFERENCE_RECIPE.formatMaxTokens,
    });
    await checkFolder(f.out);
    const dataset = await exportVerlDataset({
      entry,
      train: f.train,
      test: f.test,
      seed: cfg.seed,
      testSplit: f['test-split'] as EvalSplit,
      ...(f['data-source'] !== undefined ? { dataSource: f['data-source'] } : {}),
      outDir: f.out,
    });
    const command = ['npm', 'run', 'cli', '--', ...argv].map(shellWord).join(' ');
    const settings = { dir: verlDir, ...lengths };
    const files: [string, string][] = [
      ['selfcest_reward.py', reward],
      ['selfcest_dump.py', readFileSync(new URL('../verl/selfcest_dump.py', import.meta.url), 'utf8')],
      // The command as JSON: one comment line whatever the arguments hold.
      ['config.yaml', `# written by SELFCEST Playground: ${JSON.stringify(argv)}\n` + toYaml(verlConfig(cfg, settings, launch, recipe, named))],
      [
        'run.json',
        JSON.stringify(
          {
            format: EXPORT_FORMAT,
            version: 1,
            command: argv,
            recipe,
            config: cfg,
            lengths,
            launch,
            reward: { settings: rewardSettings, tokenScale: scale, answers },
            train: dataset.train.rows,
            test: dataset.test.rows,
            testSplit: dataset.testSplit,
            dataSource: dataset.dataSource,
          },
          null,
          2,
        ) + '\n',
      ],
      [
        'README.md',
        verlReadme(cfg, {
          ...settings,
          recipe,
          train: dataset.train.rows,
          test: dataset.test.rows,
          testSplit: dataset.testSplit,
          dataSource: dataset.dataSource,
          command,
          launch,
          reward: rewardSettings,
          scale,
          answers,
        }),
      ],
    ];
    const tag = `.tmp-${process.pid}`;
    for (const [name, text] of files) await writeFile(join(f.out, name + tag), text);
    for (const [name] of files) await rename(join(f.out, name + tag), join(f.out, name));
    console.log(
      `wrote ${f.out}: train.parquet (${dataset.train.rows} rows), test.parquet (${dataset.test.rows} rows, ${dataset.testSplit} set), ${files.map(([n]) => n).join(', ')}`,
    );
  },
);

/** --out is new, empty, or an earlier export (its run.json says so, nothing else in it): never a run's folder. */
async function checkFolder(out: string): Promise<void> {
  await checkOutDir(out);
  const present = (await readdir(out)).filter((n) => !n.includes('.tmp-'));
  if (present.length === 0) return;
  const foreign = present.filter((n) => !EXPORT_FILES.includes(n));
  let earlier = false;
  try {
    earlier = (JSON.parse(await readFile(join(out, 'run.json'), 'utf8')) as { format?: unknown }).format === EXPORT_FORMAT;
  } catch {
    earlier = false;
  }
  if (foreign.length > 0 || !earlier) {
    throw new UsageError(
      `--out ${out} holds ${foreign.length > 0 ? foreign.slice(0, 3).join(', ') : 'files'} and is not an earlier verl export: name a new folder`,
    );
  }
}
