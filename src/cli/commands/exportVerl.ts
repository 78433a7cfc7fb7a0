import { rename, writeFile } from 'node:fs/promises';
import { resolve, join } from 'node:path';
import { defineRunCommand } from '../command';
import { usageErrors } from '../args';
import { checkOutDir } from '../runDir';
import { grpoConfigOf } from '../../core/runConfigTargets';
import { withOptions } from '../../core/tasks';
import { EVAL_SPLITS, type EvalSplit } from '../../core/eval/splits';
import { cloneMaxTokensOf, toYaml, verlConfig, verlReadme } from '../../core/verl/config';
import { MAX_VERL_ROWS, exportVerlDataset } from '../verl/exportDataset';
import { rewardPythonSource } from '../verl/rewardFile';

/** A task, its reward and the clone protocol as files SELFCEST's verl fork trains on (docs/FORMATS.md, "verl export"). */
export const exportVerl = defineRunCommand(
  'export-verl',
  "Write a task's problems (train.parquet, test.parquet), the playground's reward (selfcest_reward.py) and the run's recipe (config.yaml) for SELFCEST's verl fork. Takes train's run-config flags (--task, --options, --seed, reward and spawn limits).",
  {
    train: { type: 'int', required: true, min: 1, max: MAX_VERL_ROWS, help: 'problems in train.parquet (from the train split)' },
    test: { type: 'int', required: true, min: 1, max: MAX_VERL_ROWS, help: 'problems in test.parquet (from the held-out set)' },
    'test-split': { type: 'string', choices: EVAL_SPLITS, default: 'final', help: 'held-out set of test.parquet: final (what eval scores) or monitor' },
    'data-source': { type: 'string', help: 'data_source of the rows (default selfcest_<task>)' },
    'verl-dir': { type: 'string', help: 'the folder as the verl machine sees it, for the paths in config.yaml (default: --out, absolute)' },
    out: { type: 'string', required: true, help: 'folder to write' },
  },
  async ({ flags: f, config: rc, argv }) => {
    const cfg = usageErrors(() => grpoConfigOf(rc, 1), { taskOptions: '--options', miniBatch: '--mini-batch' });
    const entry = withOptions(cfg.task, cfg.taskOptions);
    // Everything that can be refused is built before the folder is touched.
    const reward = rewardPythonSource({ task: cfg.task, reward: cfg.reward, gating: cfg.advantage.gating, gateMode: cfg.advantage.gateMode, cloneMaxTokens: cloneMaxTokensOf(cfg) });
    await checkOutDir(f.out);
    const dataset = await exportVerlDataset({
      entry,
      train: f.train,
      test: f.test,
      seed: cfg.seed,
      testSplit: f['test-split'] as EvalSplit,
      ...(f['data-source'] !== undefined ? { dataSource: f['data-source'] } : {}),
      outDir: f.out,
    });
    const command = `npm run cli -- ${argv.join(' ')}`;
    const dir = f['verl-dir'] ?? resolve(f.out);
    const files: [string, string][] = [
      ['selfcest_reward.py', reward],
      ['config.yaml', `# SELFCEST Playground run as verl config (${command})\n` + toYaml(verlConfig(cfg, { dir }))],
      ['run.json', JSON.stringify({ format: 'selfcest-verl-export', version: 1, command: argv, config: cfg, train: dataset.train.rows, test: dataset.test.rows, testSplit: dataset.testSplit, dataSource: dataset.dataSource }, null, 2) + '\n'],
      ['README.md', verlReadme(cfg, { train: dataset.train.rows, test: dataset.test.rows, testSplit: dataset.testSplit, dataSource: dataset.dataSource, command })],
    ];
    const tag = `.tmp-${process.pid}`;
    for (const [name, text] of files) await writeFile(join(f.out, name + tag), text);
    for (const [name] of files) await rename(join(f.out, name + tag), join(f.out, name));
    console.log(`wrote ${f.out}: train.parquet (${dataset.train.rows} rows), test.parquet (${dataset.test.rows} rows, ${dataset.testSplit} set), ${files.map(([n]) => n).join(', ')}`);
  },
);
