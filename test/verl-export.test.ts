/**
 * `export-verl` as a user runs it (a real process, real files): the folder holds the dataset, the
 * reward with the run's thresholds, a config verl's YAML loader reads with the run's recipe, and
 * a README; bad flags are refused before anything is written.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readParquet } from 'parquet-wasm';
import { tableFromIPC } from 'apache-arrow';
import { parse } from 'yaml';
import { cli } from './cliProcess';
import { answerOf } from '../src/core/verl/readback';
import { CHAR_TOKENS, SPECIAL_TOKENS } from '../src/core/tokenizer/vocab';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const python = (() => {
  try {
    execFileSync('python3', ['--version']);
    return 'python3';
  } catch {
    return null;
  }
})();

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'selfcest-export-verl-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('export-verl', () => {
  it('writes the dataset, the reward, the config and a README from the run config', async () => {
    const out = join(dir, 'mh');
    const r = await cli(
      'export-verl',
      '--task',
      'multihop',
      '--options',
      '{"chunks":6,"perChunk":4,"filler":24}',
      '--train',
      '40',
      '--test',
      '12',
      '--seed',
      '3',
      '--group',
      '8',
      '--lr',
      '3e-5',
      '--no-gating',
      '--root-tau',
      '100',
      '--token-rate',
      '0.002',
      '--token-rate-after',
      '40',
      '--restart-optimizer',
      '--clone-length',
      '300',
      '--token-scale',
      '1',
      '--steps',
      '90',
      '--verl-dir',
      '/data/mh',
      '--out',
      out,
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect((await readdir(out)).sort()).toEqual([
      'README.md',
      'config.yaml',
      'run.json',
      'selfcest_dump.py',
      'selfcest_reward.py',
      'test.parquet',
      'train.parquet',
    ]);
    const rows = async (f: string) => tableFromIPC(readParquet(new Uint8Array(await readFile(join(out, f)))).intoIPCStream()).numRows;
    expect([await rows('train.parquet'), await rows('test.parquet')]).toEqual([40, 12]);

    const config = parse(await readFile(join(out, 'config.yaml'), 'utf8'));
    expect(config.data.train_files).toBe('/data/mh/train.parquet');
    expect(config.data.val_files).toBe('/data/mh/test.parquet');
    expect(config.actor_rollout_ref.rollout.n).toBe(8);
    expect(config.actor_rollout_ref.actor.optim.lr).toBe(3e-5);
    const clone = config.actor_rollout_ref.rollout.multi_turn.clone;
    expect(clone).toMatchObject({
      enable: true,
      max_clone_depth: 1,
      allow_nested_clones: false,
      max_clones_per_call: 16,
      max_response_length: 300,
      summary_max_length: 256,
      reward_function: '/data/mh/selfcest_reward.py:clone_accuracy_reward',
    });
    // A real model's lengths (the reference's), not the playground's character-level ones.
    expect(config.data.max_response_length).toBe(1024);
    expect(config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu).toBe(1);
    expect(config.actor_rollout_ref.actor.clip_ratio_c).toBe(3);
    expect(config.custom_reward_function).toEqual({ path: '/data/mh/selfcest_reward.py', name: 'compute_score' });

    const reward = await readFile(join(out, 'selfcest_reward.py'), 'utf8');
    expect(reward).toContain('"task": "multihop"');
    expect(reward).toContain('"rootTau": 100');
    expect(reward).toContain('"gating": False');
    expect(reward).toContain('"cloneMaxTokens": 300');
    const meta = JSON.parse(await readFile(join(out, 'run.json'), 'utf8'));
    expect(meta.config.reward.rootTau).toBe(100);
    expect(meta.command).toContain('export-verl');
    const readme = await readFile(join(out, 'README.md'), 'utf8');
    expect(readme).toContain('python -m verl.trainer.main_ppo');
    expect(readme).toContain('What differs from the playground');
    // verl's reward has no step: it carries the later stage's token cost, and the README says how to run the first stage.
    expect(reward).toContain('"tokenRate": 0.002');
    expect(readme).toMatch(/first 40 of 90 steps without the token cost, then with it/);
    expect(readme).toContain('`--token-rate 0`');
    expect(readme).toContain('`trainer.total_training_steps=40`');
    expect(readme).toContain('`trainer.total_training_steps=50`');
    // The restart of Adam at the switch: the second stage is a new verl run, not a resume.
    expect(readme).toMatch(/restarts Adam at the switch \(`--restart-optimizer`\): start the second stage as a new verl run/);
  });

  it.skipIf(!python)('the exported reward scores a test row under python3: its truth after "Answer:" gets score 1 less the token cost', async () => {
    const out = join(dir, 'arith');
    expect((await cli('export-verl', '--train', '16', '--test', '3', '--token-scale', '1', '--out', out)).code).toBe(0);
    const t = tableFromIPC(readParquet(new Uint8Array(await readFile(join(out, 'test.parquet')))).intoIPCStream());
    const truth = String(t.get(0)!.reward_model.ground_truth);
    const script = `import sys, json; sys.path.insert(0, ${JSON.stringify(out)}); import selfcest_reward as r
ok = r.compute_score("selfcest_arithmetic", "so\\nAnswer: ${truth}", ${JSON.stringify(truth)}, {"response_tokens": 10})
bad = r.compute_score("selfcest_arithmetic", "Answer: ${truth}0", ${JSON.stringify(truth)}, {"response_tokens": 10})
print(json.dumps([ok, bad]))`;
    const [ok, bad] = JSON.parse(execFileSync(python!, ['-c', script], { encoding: 'utf8' }));
    const score = (x: unknown) => (typeof x === 'number' ? x : (x as { score: number }).score);
    // The recipe's token cost (0.003 a generated token, carried from its later stage) on 10 tokens.
    expect(score(ok)).toBeCloseTo(1 - 0.003 * 10, 12);
    expect(score(bad)).toBeGreaterThan(0);
    expect(score(bad)).toBeLessThan(0.2);
  });

  it.skipIf(!python)('the reward and the read-back take the same answer from a response', async () => {
    const out = join(dir, 'arith');
    const cases = [
      'Answer: 42\nThat is the result.',
      '42',
      'so Answer: 1\nAnswer:  -7 <|im_end|>',
      'Answer: </think> 5',
      'Answer:',
      '<ans>12<eos>',
      '<ans>1<sep>2<eos>',
      'x<ans>3<eos>Answer: 4',
      'Answer: 12\u00a0',
      'Answer:\n9',
    ];
    const script = `import sys, json; sys.path.insert(0, ${JSON.stringify(out)}); import selfcest_reward as r
print(json.dumps([r.answer_text(t) for t in json.loads(sys.stdin.read())]))`;
    const py = JSON.parse(execFileSync(python!, ['-c', script], { encoding: 'utf8', input: JSON.stringify(cases) }));
    expect(py).toEqual(cases.map(answerOf));
    expect(py.slice(0, 4)).toEqual(['42', null, '-7', '5']);
  });

  it.skipIf(!python)("the reward knows the playground vocabulary, and gives a real model's text without a token count no length penalty", async () => {
    const out = join(dir, 'arith');
    const script = `import sys, json; sys.path.insert(0, ${JSON.stringify(out)}); import selfcest_reward as r
long = "Let me add these up carefully, term by term. " * 10 + "Answer: 12"
print(json.dumps([list(r.SPECIAL_TOKENS), r.CHAR_TOKENS, r.compute_score("x", long, "12"), r.compute_score("x", "=" * 70 + "<ans>12<eos>", "12")]))`;
    const [special, chars, real, playground] = JSON.parse(execFileSync(python!, ['-c', script], { encoding: 'utf8' }));
    expect(special).toEqual([...SPECIAL_TOKENS]);
    expect(chars).toBe(CHAR_TOKENS.join(''));
    expect(real).toMatchObject({ reward: 1, root_penalty: 0, root_generated_tokens: null });
    // 70 '=' + <ans> + 2 digits + <eos>: 74 playground tokens, past τ = 64, so a root penalty.
    expect(playground.root_generated_tokens).toBe(74);
    expect(playground.root_penalty).toBeGreaterThan(0);
  });

  it("--recipe reference writes the reference's keys and values, a flag given still winning; the playground recipe writes the loop settings it needs", async () => {
    const out = join(dir, 'ref');
    const r = await cli(
      'export-verl',
      '--recipe',
      'reference',
      '--train',
      '32',
      '--test',
      '2',
      '--lr',
      '1e-6',
      '--clone-tau',
      '300',
      '--verl-dir',
      '/data/ref',
      '--out',
      out,
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const config = parse(await readFile(join(out, 'config.yaml'), 'utf8'));
    const actor = config.actor_rollout_ref.actor;
    expect(actor).toMatchObject({
      ppo_mini_batch_size: 8,
      clip_ratio: 0.1,
      kl_loss_coef: 5e-4,
      grad_clip: 1,
      optim: { lr: 1e-6, lr_warmup_steps: 10, lr_scheduler_type: 'constant' },
    });
    // Keys the reference leaves to verl's defaults stay unwritten unless a flag gave them.
    for (const k of ['clip_ratio_low', 'clip_ratio_high', 'clip_ratio_c', 'ppo_epochs', 'loss_agg_mode']) expect(actor, k).not.toHaveProperty(k);
    expect(config.data).toMatchObject({ train_batch_size: 32, max_prompt_length: 2048, max_response_length: 4096 });
    expect(config.actor_rollout_ref.rollout).toMatchObject({ n: 4, response_length: 4096 });
    const turn = config.actor_rollout_ref.rollout.multi_turn;
    expect(turn).toMatchObject({ max_assistant_turns: 10, max_parallel_calls: 10, max_tool_response_length: 512, tool_response_truncate_side: 'right' });
    expect(turn.clone).toMatchObject({
      max_clones_per_call: 30,
      max_response_length: 1024,
      summary_max_length: 256,
      summary_truncate_side: 'right',
      json_repair_penalty: 0.05,
      debug_reward_fields: true,
    });
    expect(turn.clone.final_answer_markers).toEqual(['</think>', 'Final Answer:', 'final answer:', 'Answer:', 'Result:', 'OUTPUT:', '#### ']);
    expect(config.reward_model).toEqual({ enable: false, enable_resource_pool: false, use_reward_loop: false });
    expect(config.trainer.rollout_data_dir).toBe('/data/ref/rollouts');
    const reward = await readFile(join(out, 'selfcest_reward.py'), 'utf8');
    for (const line of [
      '"recipe": "reference"',
      '"rootTau": 512',
      '"rootRho": 256',
      '"cloneTau": 300',
      '"cloneRho": 512',
      '"tokenRate": 0,',
      '"formatMaxTokens": 192',
    ])
      expect(reward).toContain(line);
    expect(JSON.parse(await readFile(join(out, 'run.json'), 'utf8')).recipe).toBe('reference');
    const readme = await readFile(join(out, 'README.md'), 'utf8');
    expect(readme).toContain("the reference's recipe");
    expect(readme).toContain('python selfcest_dump.py --config-path /data/ref --config-name config');
    expect(readme).toContain('npm run cli -- import-verl --in rollouts --out verl-run.jsonl');
    expect(await readFile(join(out, 'selfcest_dump.py'), 'utf8')).toContain('def log_rollout_data(');

    const own = parse(await readFile(join(dir, 'mh', 'config.yaml'), 'utf8'));
    expect(own.actor_rollout_ref.rollout.multi_turn).toMatchObject({ max_tool_response_length: 16 * (256 + 64), tool_response_truncate_side: 'left' });
    expect(own.actor_rollout_ref.rollout.multi_turn.clone).toMatchObject({
      summary_truncate_side: 'left',
      json_repair_penalty: 0,
      final_answer_markers: ['</think>', 'Final Answer:', 'final answer:', 'Answer:', 'Result:', 'OUTPUT:', '#### '],
    });
    expect(own.reward_model).toEqual({ use_reward_loop: false });
    expect(own.trainer.rollout_data_dir).toBe('/data/mh/rollouts');
  });

  it("both recipes write what a launch depends on, every key and type as the fork's config schema has it", async () => {
    const schema = JSON.parse(await readFile(new URL('./fixtures/verl-config-schema.json', import.meta.url), 'utf8')) as {
      commit: string;
      ppo_trainer_keys: Record<string, string>;
      clone_recipe_keys: Record<string, string>;
    };
    expect(schema.commit).toMatch(/^c37cc91e/);
    const known = { ...schema.ppo_trainer_keys, ...schema.clone_recipe_keys };
    const typeOf = (v: unknown) =>
      v === null
        ? 'null'
        : Array.isArray(v)
          ? 'list'
          : typeof v === 'object'
            ? 'map'
            : typeof v === 'number'
              ? Number.isInteger(v)
                ? 'int'
                : 'float'
              : typeof v === 'boolean'
                ? 'bool'
                : 'str';
    // A written value fits a key whose default is null (any), of its own type, or an int where a float is the default.
    const fits = (written: string, schemaType: string) => schemaType === 'null' || written === schemaType || (written === 'int' && schemaType === 'float');
    const leaves = (node: Record<string, unknown>, prefix = ''): [string, unknown][] =>
      Object.entries(node).flatMap(([k, v]) => {
        const path = prefix ? `${prefix}.${k}` : k;
        return v !== null && typeof v === 'object' && !Array.isArray(v) ? leaves(v as Record<string, unknown>, path) : [[path, v] as [string, unknown]];
      });
    const cases = [
      { recipe: 'playground', args: ['--train', '64', '--steps', '300'], steps: 300, epochs: 75, save: 50, test: 25, gpus: 1 },
      { recipe: 'reference', args: ['--train', '64', '--steps', '120', '--gpus', '8'], steps: 120, epochs: 60, save: 200, test: 50, gpus: 8 },
      { recipe: 'playground', args: ['--train', '40', '--save-freq', '5', '--test-freq', '3', '--wandb'], steps: 2, epochs: 1, save: 5, test: 3, gpus: 1 },
    ];
    for (const c of cases) {
      const out = join(dir, `launch-${c.recipe}-${c.steps}`);
      const r = await cli('export-verl', '--recipe', c.recipe, ...c.args, '--test', '4', '--out', out);
      expect(r.stderr).toBe('');
      const config = parse(await readFile(join(out, 'config.yaml'), 'utf8'));
      const where = `${c.recipe} ${c.args.join(' ')}`;
      expect(config.actor_rollout_ref.rollout.tensor_model_parallel_size, where).toBe(1);
      expect(config.trainer, where).toMatchObject({
        total_training_steps: c.steps,
        total_epochs: c.epochs,
        save_freq: c.save,
        test_freq: c.test,
        n_gpus_per_node: c.gpus,
        nnodes: 1,
        val_before_train: true,
      });
      expect(config.trainer.logger, where).toEqual(c.args.includes('--wandb') ? ['console', 'tensorboard', 'wandb'] : ['console', 'tensorboard']);
      // verl runs min(total_training_steps, epochs × full batches a pass) steps: the epochs must hold the steps.
      expect(config.trainer.total_epochs * Math.floor(Number(c.args[1]) / config.data.train_batch_size), where).toBeGreaterThanOrEqual(c.steps);
      for (const [path, value] of leaves(config)) {
        if (path === 'hydra.searchpath' || path === 'defaults') continue;
        expect(known[path], `${where}: ${path} is not a key of the fork's config (${schema.commit.slice(0, 8)})`).toBeDefined();
        expect(fits(typeOf(value), known[path]), `${where}: ${path} = ${JSON.stringify(value)} where the fork has a ${known[path]}`).toBe(true);
      }
      const readme = await readFile(join(out, 'README.md'), 'utf8');
      expect(readme, where).toContain('trainer.n_gpus_per_node=1 trainer.nnodes=1');
      expect(readme, where).toContain('trainer.n_gpus_per_node=8 trainer.nnodes=1');
    }
    const refused = async (...args: string[]) => {
      const r = await cli('export-verl', ...args, '--test', '4', '--out', join(dir, 'launch-never'));
      expect(r.code).toBe(2);
      return r.stderr;
    };
    expect(await refused('--train', '8')).toContain('--train 8 is fewer rows than one batch (16)');
    expect(await refused('--train', '16', '--gpus', '8', '--tp', '3')).toContain('--tp 3 must divide --gpus 8');
    expect(await refused('--train', '16', '--gpus', '3')).toContain('over 3 GPUs');
    expect(await refused('--train', '32', '--recipe', 'reference', '--token-scale', '2')).toContain('--token-scale applies to the playground recipe');
    await expect(readdir(join(dir, 'launch-never'))).rejects.toThrow();
  });

  it("writes the playground recipe's reward in the model's tokens and reads answers as the reference does, unless told otherwise", async () => {
    const out = join(dir, 'scaled');
    expect((await cli('export-verl', '--train', '16', '--test', '2', '--response-length', '960', '--clone-length', '512', '--out', out)).code).toBe(0);
    const reward = await readFile(join(out, 'selfcest_reward.py'), 'utf8');
    // arithmetic: root limit 48, largest budget 128, so 960 / 48 = 20 and 512 / 128 = 4 model tokens a playground token.
    for (const line of ['"rootTau": 1280', '"rootRho": 1280', '"cloneTau": 128', '"cloneRho": 128', '"tokenRate": 0.00075,', '"answers": "last-integer"'])
      expect(reward).toContain(line);
    const meta = JSON.parse(await readFile(join(out, 'run.json'), 'utf8'));
    expect(meta.reward.tokenScale).toEqual({ root: 20, clone: 4 });
    expect(meta.config.reward.rootTau).toBe(64);
    const readme = await readFile(join(out, 'README.md'), 'utf8');
    expect(readme).toContain('scaled by 20 model tokens per\n  playground token for the root and 4 for a clone');
    const own = join(dir, 'own-model');
    expect((await cli('export-verl', '--train', '16', '--test', '2', '--token-scale', '1', '--answers', 'exact', '--out', own)).code).toBe(0);
    const ownReward = await readFile(join(own, 'selfcest_reward.py'), 'utf8');
    for (const line of ['"rootTau": 64', '"cloneTau": 32', '"tokenRate": 0.003,', '"answers": "exact"']) expect(ownReward).toContain(line);
  });

  it('refuses bad flags by name and writes nothing', async () => {
    const out = join(dir, 'never');
    const bad = async (...args: string[]) => {
      const r = await cli('export-verl', ...args, '--out', out);
      expect(r.code).not.toBe(0);
      return r.stderr;
    };
    expect(await bad('--train', '0', '--test', '3')).toMatch(/--train/);
    expect(await bad('--train', '3', '--test', '3', '--task', 'chess')).toMatch(/task/);
    expect(await bad('--train', '3', '--test', '3', '--task', 'multihop', '--options', '{"perChunk":9}')).toContain(
      'perChunk must be an integer in [1, 6] (got 9)',
    );
    expect(await bad('--train', '3', '--test', '3', '--test-split', 'train')).toMatch(/--test-split/);
    expect(await bad('--train', '3', '--test', '3', '--task', 'arithmetic,multihop')).toContain('--task arithmetic,multihop: an export holds one task');
    expect(await bad('--train', '3', '--test', '3', '--dynamic-sampling', '--credit', 'broadcast')).toMatch(
      /--dynamic-sampling: .*\n--credit broadcast: the fork's advantage code is the ratio credit/,
    );
    expect(await bad('--train', '3', '--test', '3', '--verl-dir', 'data/x')).toContain('--verl-dir must be an absolute path');
    expect(await bad('--train', '3', '--test', '3', '--recipe', 'paper')).toContain('--recipe must be one of playground, reference (got "paper")');
    expect(await bad('--train', '3', '--test', '3', '--root-rho', '0')).toMatch(/--root-rho/);
    await expect(readdir(out)).rejects.toThrow();
    // A folder that is not an earlier export (here a run directory) is refused, and left as it was.
    const runDir = join(dir, 'run');
    await mkdir(runDir);
    await writeFile(join(runDir, 'run.json'), '{"format":"other"}');
    const r = await cli('export-verl', '--train', '16', '--test', '3', '--out', runDir);
    expect(r.stderr).toContain('is not an earlier verl export: name a new folder');
    expect(await readdir(runDir)).toEqual(['run.json']);
  });

  it('writes a command with a newline in an argument as one config comment line, and again over its own export', async () => {
    const out = join(dir, 'nl');
    const options = '{\n"maxOperands":4}';
    expect((await cli('export-verl', '--options', options, '--train', '16', '--test', '2', '--out', out)).code).toBe(0);
    expect((await cli('export-verl', '--options', options, '--train', '17', '--test', '2', '--out', out)).code).toBe(0);
    const text = await readFile(join(out, 'config.yaml'), 'utf8');
    expect(text.split('\n')[0]).toMatch(/^# written by SELFCEST Playground: \[.*\]$/);
    expect(parse(text).actor_rollout_ref.rollout.n).toBe(4);
    expect(JSON.parse(await readFile(join(out, 'run.json'), 'utf8')).train).toBe(17);
  });
});
