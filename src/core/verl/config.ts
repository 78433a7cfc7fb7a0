/**
 * The verl side of a playground run: the config block SELFCEST's verl fork reads (its
 * `ppo_trainer` layout, with the clone tool loop under `actor_rollout_ref.rollout.multi_turn.clone`)
 * and the README of an export folder. Written from the run's GrpoConfig, so the recipe travels
 * with the data. Pure.
 */
import type { GrpoConfig } from '../rl/train';
import { ANSWER_MARKER } from './readback';

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

/**
 * Where the files are and the lengths a real model gets. The playground's limits are for its
 * character-level model (a root of 48 tokens, clones of 8–128, answers cut to 8 characters);
 * a real model's spawn call alone is longer, so verl gets its own (the reference's by default).
 */
export interface VerlExportSettings {
  /** Folder the files are written to, as the verl machine sees it (absolute). */
  dir: string;
  /** Root response tokens (verl counts the injected tool responses in it too). */
  responseLength: number;
  /** Prompt tokens (the multi-hop user message lists keys, the system prompt the protocol). */
  promptLength: number;
  /** One clone's response tokens: verl has one clone length where the playground has budgets. */
  cloneLength: number;
  /** Tokens of a clone's answer injected into the root (the playground cuts answers to characters). */
  summaryLength: number;
}

/** The reference's lengths (configs/clone_tool_grpo_*.yaml of SELFCEST). */
export const VERL_LENGTH_DEFAULTS = { responseLength: 1024, promptLength: 4096, cloneLength: 1024, summaryLength: 256 } as const;

/**
 * Settings of the run that the fork has no knob for: exporting them would train another recipe
 * than the one named, so they are refused (a message per setting, empty when none).
 */
export function unsupportedInVerl(cfg: GrpoConfig): string[] {
  const out: string[] = [];
  if (cfg.task.includes(',')) out.push(`--task ${cfg.task}: an export holds one task's data set and reward; export each task of the mix on its own`);
  if (cfg.dynamicSampling !== null) out.push('--dynamic-sampling: the fork has no dynamic sampling in its clone advantage code; export without it');
  if (cfg.advantage.credit !== 'ratio') out.push(`--credit ${cfg.advantage.credit}: the fork's advantage code is the ratio credit; export with --credit ratio`);
  if (cfg.advantage.gating && cfg.advantage.gateMode !== 'reference') out.push(`--gate-mode ${cfg.advantage.gateMode}: verl's clone samples carry no violation class, so this gate would catch nothing; export with --gate-mode reference`);
  if (!cfg.advantage.gatedKl) out.push('--no-gated-kl: in the fork a gated clone keeps its KL term; export without it');
  if (cfg.advantage.gateRoots) out.push('--gate-roots: the fork gates clones only; export without it');
  if (cfg.loss.dualClip === null) out.push('--dual-clip: verl always applies the dual clip (clip_ratio_c); give a constant > 1');
  return out;
}

/**
 * The fields verl reads, from the run's config. What verl has no knob for (per-spawn budgets,
 * partial credit, the gate) lives in selfcest_reward.py's CONFIG block instead.
 */
export function verlConfig(cfg: GrpoConfig, e: VerlExportSettings): { [key: string]: YamlValue } {
  const reward = `${e.dir}/selfcest_reward.py`;
  return {
    // verl's own defaults, found in the installed package (a checkout can name its folder instead).
    hydra: { searchpath: ['pkg://verl.trainer.config'] },
    defaults: ['ppo_trainer', '_self_'],
    data: {
      train_files: `${e.dir}/train.parquet`,
      val_files: `${e.dir}/test.parquet`,
      prompt_key: 'prompt',
      reward_fn_key: 'data_source',
      return_raw_chat: true,
      train_batch_size: cfg.batch,
      max_prompt_length: e.promptLength,
      max_response_length: e.responseLength,
      filter_overlong_prompts: true,
      truncation: 'error',
    },
    actor_rollout_ref: {
      actor: {
        strategy: 'fsdp',
        ppo_mini_batch_size: cfg.miniBatch ?? cfg.batch,
        ppo_micro_batch_size_per_gpu: 1,
        use_dynamic_bsz: false,
        ppo_epochs: cfg.innerEpochs,
        clip_ratio_low: cfg.loss.clipLow,
        clip_ratio_high: cfg.loss.clipHigh,
        clip_ratio_c: cfg.loss.dualClip!,
        loss_agg_mode: cfg.loss.aggregation === 'sequence-mean' ? 'seq-mean-token-mean' : 'token-mean',
        use_kl_loss: cfg.loss.beta > 0,
        kl_loss_coef: cfg.loss.beta,
        kl_loss_type: 'low_var_kl',
        grad_clip: cfg.gradClip,
        optim: { lr: cfg.lr, weight_decay: cfg.weightDecay },
      },
      ref: { log_prob_micro_batch_size_per_gpu: 1 },
      rollout: {
        name: 'vllm',
        n: cfg.group,
        do_sample: true,
        temperature: cfg.loss.temperature,
        prompt_length: e.promptLength,
        response_length: e.responseLength,
        log_prob_micro_batch_size_per_gpu: 1,
        multi_turn: {
          enable: true,
          format: 'hermes',
          // One assistant turn per spawn round, and one to answer.
          max_assistant_turns: cfg.rollout.maxRounds + 1,
          max_user_turns: cfg.rollout.maxRounds + 1,
          max_parallel_calls: 1,
          clone: {
            enable: true,
            allow_tool_use: false,
            allow_nested_clones: false,
            max_clone_depth: 1,
            max_clones_per_call: cfg.rollout.maxClonesPerRound,
            max_response_length: e.cloneLength,
            summary_max_length: e.summaryLength,
            reward_function: `${reward}:clone_accuracy_reward`,
            final_answer_markers: [ANSWER_MARKER],
          },
        },
        agent: { default_agent_loop: 'tool_agent' },
      },
    },
    custom_reward_function: { path: reward, name: 'compute_score' },
    algorithm: { adv_estimator: 'grpo', norm_adv_by_std_in_grpo: cfg.advantage.stdNormalize, use_kl_in_reward: false },
    trainer: { project_name: 'selfcest_playground', experiment_name: `${cfg.task}-seed${cfg.seed}` },
  };
}

/** The export folder's README: what each file is, how to launch, and where verl differs from here. */
export function verlReadme(cfg: GrpoConfig, e: VerlExportSettings & { train: number; test: number; testSplit: string; dataSource: string; command: string }): string {
  const gate = cfg.advantage.gating ? 'a clone with no `Answer:` that used its whole length' : 'none (gating off)';
  return `# ${cfg.task} for verl (SELFCEST clone tool loop)

Written by:

\`\`\`sh
${e.command}
\`\`\`

| file | what |
|---|---|
| \`train.parquet\` | ${e.train} problems of the playground's train split (seed ${cfg.seed}) in verl's RL dataset layout |
| \`test.parquet\` | ${e.test} problems of its held-out \`${e.testSplit}\` set: the set \`npm run cli -- eval --seed ${cfg.seed}\` scores |
| \`selfcest_reward.py\` | the playground's reward, standard-library Python: \`clone_accuracy_reward\` (delegating episodes) and \`compute_score\` (one sample, no clones); the run's thresholds are in its \`CONFIG\` block |
| \`config.yaml\` | the run's recipe in verl's \`ppo_trainer\` layout, clone tool loop included |
| \`run.json\` | the playground run config this was written from |

## Launch

With the SELFCEST verl fork installed (its clone tool loop, \`spawn_clone(objectives[], shared_context[])\`,
and \`_compute_grpo_advantage_with_clones\`), the paths in \`config.yaml\` pointing at this folder
(\`${e.dir}\`; export with \`--verl-dir\` to name it as the GPU machine sees it):

\`\`\`sh
python -m verl.trainer.main_ppo --config-path ${e.dir} --config-name config \\
  actor_rollout_ref.model.path=<your model> trainer.n_gpus_per_node=<gpus>
\`\`\`

This folder was written and its files read back on a machine without verl or a GPU; the config
follows the fork's example configs (configs/clone_tool_grpo_*.yaml) but was not launched here.
The rows' \`data_source\` is \`${e.dataSource}\`; \`reward_model.ground_truth\` holds the exact answer.
${cfg.task === 'multihop' ? "For multi-hop, `extra_info.context_items` holds the keyed chunks: the clone loop expands the keys a spawn's `shared_context` names into their text, as the playground's `<ctx>key` does (the playground's `<ctx>*` is one clone per key of `context_keys`).\n" : ''}
## What differs from the playground

- **Lengths.** The playground's limits are for its character-level model: a root of ${cfg.rollout.rootMaxTokens} tokens,
  clone budgets of ${cfg.rollout.budgets.join(', ')}, answers cut to ${cfg.rollout.answerMaxChars} characters. Here: a root response of
  ${e.responseLength} tokens (verl counts the injected tool responses in it), ${e.cloneLength} per clone, answers of
  ${e.summaryLength} tokens, prompts of ${e.promptLength} (\`--response-length\`, \`--clone-length\`, \`--summary-length\`,
  \`--prompt-length\`).
- **Reward thresholds.** The length penalties start at ${cfg.reward.rootTau} root and ${cfg.reward.cloneTau} clone tokens, as the run
  config gives them; for a real model give the reference's (\`--root-tau 512 --clone-tau 512\`), since its
  tokens are not the playground's characters. \`compute_score\` needs \`extra_info["response_tokens"]\` for
  a real model's length; without it a response in other than the playground's vocabulary gets no
  root length penalty.
${cfg.tokenRateAfter > 0 && cfg.reward.tokenRate > 0 ? `- **Token cost schedule.** This run trains its first ${cfg.tokenRateAfter} steps without the token cost, then with
  ${cfg.reward.tokenRate} per generated token. verl's reward has no step, so \`selfcest_reward.py\` carries the later rate; for the
  two stages, export once more with \`--token-rate 0\` and run that for the first ${cfg.tokenRateAfter} steps.${cfg.restartOptimizer ? `
  The run restarts Adam at the switch (\`--restart-optimizer\`): start the second stage as a new verl run from the
  first one's weights, not as a resume of it.` : ''}
` : ''}- **Budgets.** The playground's root asks a budget per spawn; verl gives every clone one length. The
  reward reads a clone's \`budget\` from its extra fields when the spawn tool records one, else
  ${e.cloneLength}; the gate (${gate}) and the budget cost use it.
- **Answers.** Here an answer is an \`<ans>\` block; there it is the rest of the line after the last
  \`${ANSWER_MARKER}\`. The verdict is the same exact match (arithmetic: a canonical integer).
- **Spawn calls.** One playground round is one \`spawn_clone\` call with several objectives; the call
  penalty counts \`<tool_call>\` in the root's text, as the reference does.
- **Credit.** The reward returns r_clone = R for every clone the gate lets through, 0 for a gated one;
  the fork's advantage code scales the root's advantage by clamp(r_clone / R), the ratio credit of
  this run (\`--credit ratio\`). Settings the fork has no knob for (dynamic sampling, broadcast credit,
  the protocol gate, gated contexts without their KL term, gating roots) are refused by the export.
- **Read back.** Dump the agent loop's root and clone samples (request_id, parent_request_id, text,
  response_mask) as JSONL and run \`npm run cli -- import-verl --in <file> --out traces.jsonl\`: the page
  and \`compare\` show the run as delegation trees and curves (docs/FORMATS.md).
`;
}
