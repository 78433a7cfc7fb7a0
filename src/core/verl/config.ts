/**
 * The verl side of a playground run: the config block SELFCEST's verl fork reads (its
 * `ppo_trainer` layout, with the clone tool loop under `actor_rollout_ref.rollout.multi_turn.clone`)
 * and the README of an export folder. Written from the run's GrpoConfig, so the recipe travels
 * with the data. Pure.
 */
import type { GrpoConfig } from '../rl/train';

/** A YAML value this writer emits: plain scalars, lists of them, nested maps. */
export type YamlValue = string | number | boolean | null | readonly YamlValue[] | { readonly [key: string]: YamlValue };

/** Block-style YAML; strings double-quoted (JSON escapes are valid YAML), keys plain. */
export function toYaml(value: { readonly [key: string]: YamlValue }, indent = 0): string {
  const pad = ' '.repeat(indent);
  const scalar = (v: YamlValue): string => (v === null ? 'null' : typeof v === 'string' ? JSON.stringify(v) : String(v));
  return Object.entries(value)
    .map(([k, v]) => {
      if (Array.isArray(v)) return v.length === 0 ? `${pad}${k}: []\n` : `${pad}${k}:\n${v.map((x) => `${pad}  - ${scalar(x)}\n`).join('')}`;
      if (v !== null && typeof v === 'object') return `${pad}${k}:\n${toYaml(v as { [key: string]: YamlValue }, indent + 2)}`;
      return `${pad}${k}: ${scalar(v)}\n`;
    })
    .join('');
}

export interface VerlExportPaths {
  /** Folder the files are written to, as the config should name it (absolute, or a placeholder). */
  dir: string;
}

/** The largest clone budget a spawn may ask for: verl gives every clone one response length. */
export function cloneMaxTokensOf(cfg: GrpoConfig): number {
  return Math.max(...cfg.rollout.budgets);
}

/**
 * The fields verl reads, from the run's config. What verl has no knob for (per-spawn budgets,
 * partial credit, the gate) lives in selfcest_reward.py's CONFIG block instead.
 */
export function verlConfig(cfg: GrpoConfig, paths: VerlExportPaths): { [key: string]: YamlValue } {
  const reward = `${paths.dir}/selfcest_reward.py`;
  return {
    // verl's own defaults, found in the installed package (a checkout can name its folder instead).
    hydra: { searchpath: ['pkg://verl.trainer.config'] },
    defaults: ['ppo_trainer', '_self_'],
    data: {
      train_files: `${paths.dir}/train.parquet`,
      val_files: `${paths.dir}/test.parquet`,
      prompt_key: 'prompt',
      reward_fn_key: 'data_source',
      return_raw_chat: true,
      train_batch_size: cfg.batch,
      max_response_length: cfg.rollout.rootMaxTokens,
    },
    actor_rollout_ref: {
      actor: {
        ppo_mini_batch_size: cfg.miniBatch ?? cfg.batch,
        ppo_epochs: cfg.innerEpochs,
        clip_ratio_low: cfg.loss.clipLow,
        clip_ratio_high: cfg.loss.clipHigh,
        clip_ratio_c: cfg.loss.dualClip ?? 3,
        loss_agg_mode: cfg.loss.aggregation === 'sequence-mean' ? 'seq-mean-token-mean' : 'token-mean',
        use_kl_loss: cfg.loss.beta > 0,
        kl_loss_coef: cfg.loss.beta,
        kl_loss_type: 'low_var_kl',
        grad_clip: cfg.gradClip,
        optim: { lr: cfg.lr, weight_decay: cfg.weightDecay },
      },
      rollout: {
        n: cfg.group,
        temperature: cfg.loss.temperature,
        response_length: cfg.rollout.rootMaxTokens,
        multi_turn: {
          enable: true,
          format: 'hermes',
          // One assistant turn per spawn round, and one to answer.
          max_assistant_turns: cfg.rollout.maxRounds + 1,
          clone: {
            enable: true,
            allow_tool_use: false,
            allow_nested_clones: false,
            max_clone_depth: 1,
            max_clones_per_call: cfg.rollout.maxClonesPerRound,
            max_response_length: cloneMaxTokensOf(cfg),
            summary_max_length: cfg.rollout.answerMaxChars,
            reward_function: `${reward}:clone_accuracy_reward`,
            final_answer_markers: ['Answer:'],
          },
        },
      },
    },
    custom_reward_function: { path: reward, name: 'compute_score' },
    algorithm: { adv_estimator: 'grpo', norm_adv_by_std_in_grpo: cfg.advantage.stdNormalize, use_kl_in_reward: false },
    trainer: { project_name: 'selfcest_playground', experiment_name: `${cfg.task}-seed${cfg.seed}` },
  };
}

/** The export folder's README: what each file is, how to launch, and where verl differs from here. */
export function verlReadme(cfg: GrpoConfig, e: { train: number; test: number; testSplit: string; dataSource: string; command: string }): string {
  return `# ${cfg.task} for verl (SELFCEST clone tool loop)

Written by \`${e.command}\`.

| file | what |
|---|---|
| \`train.parquet\` | ${e.train} problems of the playground's train split (seed ${cfg.seed}) in verl's RL dataset layout |
| \`test.parquet\` | ${e.test} problems of its held-out \`${e.testSplit}\` set: the set \`npm run cli -- eval --seed ${cfg.seed}\` scores |
| \`selfcest_reward.py\` | the playground's reward, standard-library Python: \`clone_accuracy_reward\` (delegating episodes) and \`compute_score\` (one sample, no clones); the run's thresholds are in its \`CONFIG\` block |
| \`config.yaml\` | the run's recipe in verl's \`ppo_trainer\` layout, clone tool loop included |
| \`run.json\` | the playground run config this was written from |

## Launch

With the SELFCEST verl fork (its clone tool loop, \`spawn_clone(objectives[], shared_context[])\`,
and \`_compute_grpo_advantage_with_clones\`), from the fork's checkout, with this folder's absolute
path in \`config.yaml\` (export with \`--verl-dir\` to write it there):

\`\`\`
python -m verl.trainer.main_ppo --config-path <this folder> --config-name config \\
  actor_rollout_ref.model.path=<your model> trainer.n_gpus_per_node=<gpus>
\`\`\`

The rows' \`data_source\` is \`${e.dataSource}\`; \`reward_model.ground_truth\` holds the exact answer.
${cfg.task === 'multihop' ? "For multi-hop, `extra_info.context_items` holds the keyed chunks: the clone loop expands the keys a spawn's `shared_context` names into their text, as the playground's `<ctx>key` does.\n" : ''}
## What differs from the playground

- **Budgets.** The playground's root asks a budget per spawn (${cfg.rollout.budgets.join(', ')} tokens); verl gives every
  clone one \`max_response_length\` (${cloneMaxTokensOf(cfg)}, the largest bucket). The reward reads a clone's
  \`budget\` from its extra fields when the loop records one, else that length.
- **Answers.** Here an answer is an \`<ans>\` block; there it is the text after the last \`Answer:\`
  marker. The verdict is the same exact match (arithmetic: a canonical integer).
- **Spawn calls.** One playground round is one \`spawn_clone\` call with several objectives; the call
  penalty counts \`<tool_call>\` in the root's text, as the reference does.
- **Gating and credit.** The reward returns r_clone = R for every clone the gate lets through, 0 for
  a gated one (gate: ${cfg.advantage.gating ? cfg.advantage.gateMode : 'off'}); the fork's advantage code applies the
  ratio credit. Token counts come from verl's response masks, in the model's own tokenizer, so the
  length thresholds (root ${cfg.reward.rootTau}, clone ${cfg.reward.cloneTau} tokens) may need scaling for a real model.
- **Read back.** Dump the agent loop's root and clone samples (request_id, parent_request_id, text,
  response_mask) as JSONL and run \`npm run cli -- import-verl --in <file> --out traces.jsonl\`: the page
  and \`compare\` show the run as delegation trees and curves (docs/FORMATS.md).
`;
}
