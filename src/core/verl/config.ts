/**
 * The verl side of a playground run: the config block SELFCEST's verl fork reads (its
 * `ppo_trainer` layout, with the clone tool loop under `actor_rollout_ref.rollout.multi_turn.clone`)
 * and the README of an export folder. Written from the run's GrpoConfig, so the recipe travels
 * with the data. Pure.
 */
import type { GrpoConfig } from '../rl/grpoStep';
import type { RunConfig, RunConfigKey } from '../runConfig';
import { ANSWER_MARKER } from './readback';

/** Whose reward and loop settings an export writes: the playground's run, or the reference's recipe. */
export const VERL_RECIPES = ['playground', 'reference'] as const;
export type VerlRecipe = (typeof VERL_RECIPES)[number];

/** The reference's final-answer markers (configs/clone_tool_grpo_alt.yaml). */
export const REFERENCE_FINAL_ANSWER_MARKERS = ['</think>', 'Final Answer:', 'final answer:', 'Answer:', 'Result:', 'OUTPUT:', '#### '] as const;

/**
 * The reference's recipe: SELFCEST's configs/clone_tool_grpo_alt.yaml and clone_reward_2.py
 * (commit c37cc91e). `run` is what it sets of the run config (a flag given on the command line
 * wins), `lengths` its lengths, `loop` the clone loop's settings, `formatMaxTokens` its clone gate.
 */
export const REFERENCE_RECIPE = {
  run: {
    batch: 32,
    miniBatch: 8,
    group: 4,
    lr: 6e-7,
    clip: 0.1,
    beta: 5e-4,
    gradClip: 1,
    maxClones: 30,
    maxRounds: 9,
    rootTau: 512,
    rootRho: 256,
    rootPmax: 0.3,
    cloneTau: 512,
    cloneRho: 512,
    clonePmax: 0.2,
    callRate: 0.1,
    budgetRate: 0,
    tokenRate: 0,
    partialCredit: true,
    gating: true,
  } satisfies Partial<RunConfig>,
  lengths: { responseLength: 4096, promptLength: 2048, cloneLength: 1024, summaryLength: 256 },
  loop: {
    maxToolResponseLength: 512,
    toolResponseTruncateSide: 'right',
    summaryTruncateSide: 'right',
    jsonRepairPenalty: 0.05,
    finalAnswerMarkers: REFERENCE_FINAL_ANSWER_MARKERS,
  },
  formatMaxTokens: 192,
} as const;

/** The run config with the reference's values for every field of REFERENCE_RECIPE.run not in `given`. */
export function withReferenceRecipe(rc: RunConfig, given: ReadonlySet<RunConfigKey>): RunConfig {
  const out: Record<string, unknown> = { ...rc };
  for (const [k, v] of Object.entries(REFERENCE_RECIPE.run)) if (!given.has(k as RunConfigKey)) out[k] = v;
  return out as unknown as RunConfig;
}

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
  /** Characters of a clone's answer injected into the root (verl's summary_max_length cuts text by characters). */
  summaryLength: number;
}

/** The reference's lengths (configs/clone_tool_grpo_*.yaml of SELFCEST). */
export const VERL_LENGTH_DEFAULTS = { responseLength: 1024, promptLength: 4096, cloneLength: 1024, summaryLength: 256 } as const;

/** Where the shipped dump hook (selfcest_dump.py) writes each step's samples, under the export folder. */
export const ROLLOUT_DUMP_DIR = 'rollouts';

/**
 * Settings of the run that the fork has no knob for: exporting them would train another recipe
 * than the one named, so they are refused (a message per setting, empty when none).
 */
export function unsupportedInVerl(cfg: GrpoConfig): string[] {
  const out: string[] = [];
  if (cfg.task.includes(',')) out.push(`--task ${cfg.task}: an export holds one task's data set and reward; export each task of the mix on its own`);
  if (cfg.dynamicSampling !== null) out.push('--dynamic-sampling: the fork has no dynamic sampling in its clone advantage code; export without it');
  if (cfg.advantage.credit !== 'ratio') out.push(`--credit ${cfg.advantage.credit}: the fork's advantage code is the ratio credit; export with --credit ratio`);
  if (cfg.advantage.gating && cfg.advantage.gateMode !== 'reference')
    out.push(
      `--gate-mode ${cfg.advantage.gateMode}: verl's clone samples carry no violation class, so this gate would catch nothing; export with --gate-mode reference`,
    );
  if (!cfg.advantage.gatedKl) out.push('--no-gated-kl: in the fork a gated clone keeps its KL term; export without it');
  if (cfg.advantage.gateRoots) out.push('--gate-roots: the fork gates clones only; export without it');
  if (cfg.loss.dualClip === null) out.push('--dual-clip: verl always applies the dual clip (clip_ratio_c); give a constant > 1');
  return out;
}

/**
 * The fields verl reads, from the run's config. What verl has no knob for (per-spawn budgets,
 * partial credit, the gate) lives in selfcest_reward.py's CONFIG block instead. The reference
 * recipe writes the keys of the reference's config (configs/clone_tool_grpo_alt.yaml) with its
 * values, and a key it leaves to verl's defaults only where a flag gave it (`given`).
 */
export function verlConfig(
  cfg: GrpoConfig,
  e: VerlExportSettings,
  recipe: VerlRecipe = 'playground',
  given: ReadonlySet<RunConfigKey> = new Set(),
): { [key: string]: YamlValue } {
  return recipe === 'reference' ? referenceConfig(cfg, e, given) : playgroundConfig(cfg, e);
}

/** What both recipes' configs start with: verl's defaults to build on (found in the installed package; a checkout can name its folder instead). */
const CONFIG_HEAD = { hydra: { searchpath: ['pkg://verl.trainer.config'] }, defaults: ['ppo_trainer', '_self_'] } as const;

/** The export's data files as the verl machine sees them. */
const dataFiles = (e: VerlExportSettings) => ({ train_files: `${e.dir}/train.parquet`, val_files: `${e.dir}/test.parquet` });

function playgroundConfig(cfg: GrpoConfig, e: VerlExportSettings): { [key: string]: YamlValue } {
  const reward = `${e.dir}/selfcest_reward.py`;
  return {
    ...CONFIG_HEAD,
    data: {
      ...dataFiles(e),
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
          // Room for every clone's line ("label: answer") of a round: nothing but an answer longer than summary_max_length is cut.
          max_tool_response_length: cfg.rollout.maxClonesPerRound * (e.summaryLength + 64),
          tool_response_truncate_side: 'left',
          clone: {
            enable: true,
            allow_tool_use: false,
            allow_nested_clones: false,
            max_clone_depth: 1,
            max_clones_per_call: cfg.rollout.maxClonesPerRound,
            max_response_length: e.cloneLength,
            summary_max_length: e.summaryLength,
            summary_truncate_side: 'left',
            json_repair_penalty: 0,
            reward_function: `${reward}:clone_accuracy_reward`,
            final_answer_markers: [ANSWER_MARKER],
          },
        },
        agent: { default_agent_loop: 'tool_agent' },
      },
    },
    custom_reward_function: { path: reward, name: 'compute_score' },
    // The clone loop scores every sample itself (reward_score); the reference turns the reward loop off too.
    reward_model: { use_reward_loop: false },
    algorithm: { adv_estimator: 'grpo', norm_adv_by_std_in_grpo: cfg.advantage.stdNormalize, use_kl_in_reward: false },
    trainer: { project_name: 'selfcest_playground', experiment_name: `${cfg.task}-seed${cfg.seed}`, rollout_data_dir: `${e.dir}/${ROLLOUT_DUMP_DIR}` },
  };
}

/** configs/clone_tool_grpo_alt.yaml's keys and values, the export's paths and lengths, and what a flag gave. */
function referenceConfig(cfg: GrpoConfig, e: VerlExportSettings, given: ReadonlySet<RunConfigKey>): { [key: string]: YamlValue } {
  const reward = `${e.dir}/selfcest_reward.py`;
  const loop = REFERENCE_RECIPE.loop;
  const has = (...keys: RunConfigKey[]) => keys.some((k) => given.has(k));
  const actor: { [key: string]: YamlValue } = {
    strategy: 'fsdp',
    ppo_mini_batch_size: cfg.miniBatch ?? cfg.batch,
    ppo_micro_batch_size_per_gpu: 1,
    grad_clip: cfg.gradClip,
    clip_ratio: cfg.loss.clipLow,
    // verl's vanilla loss reads clip_ratio_low/high (0.2 by default) before clip_ratio: written only when a flag set the clip.
    ...(has('clip', 'clipHigh') ? { clip_ratio_low: cfg.loss.clipLow, clip_ratio_high: cfg.loss.clipHigh } : {}),
    ...(has('dualClip') ? { clip_ratio_c: cfg.loss.dualClip! } : {}),
    ...(has('epochs') ? { ppo_epochs: cfg.innerEpochs } : {}),
    ...(has('aggregation') ? { loss_agg_mode: cfg.loss.aggregation === 'sequence-mean' ? 'seq-mean-token-mean' : 'token-mean' } : {}),
    entropy_coeff: 0,
    use_dynamic_bsz: false,
    use_kl_loss: cfg.loss.beta > 0,
    kl_loss_coef: cfg.loss.beta,
    optim: { lr: cfg.lr, lr_warmup_steps: 10, lr_scheduler_type: 'constant', ...(has('weightDecay') ? { weight_decay: cfg.weightDecay } : {}) },
  };
  return {
    ...CONFIG_HEAD,
    data: {
      ...dataFiles(e),
      train_batch_size: cfg.batch,
      max_prompt_length: e.promptLength,
      max_response_length: e.responseLength,
      prompt_key: 'prompt',
      reward_fn_key: 'data_source',
      return_raw_chat: true,
      return_raw_input_ids: false,
      filter_overlong_prompts: true,
      truncation: 'error',
    },
    actor_rollout_ref: {
      hybrid_engine: true,
      model: { enable_gradient_checkpointing: true, use_remove_padding: false },
      actor,
      ref: { log_prob_micro_batch_size_per_gpu: 1, fsdp_config: { param_offload: true } },
      rollout: {
        name: 'vllm',
        prompt_length: e.promptLength,
        response_length: e.responseLength,
        n: cfg.group,
        do_sample: true,
        ...(has('temperature') ? { temperature: cfg.loss.temperature } : {}),
        gpu_memory_utilization: 0.6,
        log_prob_micro_batch_size_per_gpu: 1,
        free_cache_engine: true,
        multi_turn: {
          enable: true,
          format: 'hermes',
          max_user_turns: cfg.rollout.maxRounds + 1,
          max_assistant_turns: cfg.rollout.maxRounds + 1,
          max_parallel_calls: 10,
          max_tool_response_length: loop.maxToolResponseLength,
          tool_response_truncate_side: loop.toolResponseTruncateSide,
          clone: {
            debug_reward_fields: true,
            enable: true,
            allow_tool_use: false,
            allow_nested_clones: false,
            max_response_length: e.cloneLength,
            max_clones_per_call: cfg.rollout.maxClonesPerRound,
            max_clone_depth: 1,
            reward_function: `${reward}:clone_accuracy_reward`,
            summary_max_length: e.summaryLength,
            summary_truncate_side: loop.summaryTruncateSide,
            json_repair_penalty: loop.jsonRepairPenalty,
            final_answer_markers: [...loop.finalAnswerMarkers],
          },
        },
        agent: { num_workers: 1, default_agent_loop: 'tool_agent' },
      },
    },
    custom_reward_function: { path: reward, name: 'compute_score' },
    reward_model: { enable: false, enable_resource_pool: false, use_reward_loop: false },
    trainer: {
      project_name: 'selfcest_playground',
      experiment_name: `${cfg.task}-reference-seed${cfg.seed}`,
      total_epochs: 1,
      save_freq: 200,
      test_freq: 50,
      debug_agentic_reward_mask_metrics: true,
      debug_agentic_clone_eval_metrics: true,
      rollout_data_dir: `${e.dir}/${ROLLOUT_DUMP_DIR}`,
    },
    algorithm: {
      adv_estimator: 'grpo',
      use_kl_in_reward: false,
      gamma: 1,
      lam: 1,
      ...(has('std') ? { norm_adv_by_std_in_grpo: cfg.advantage.stdNormalize } : {}),
    },
  };
}

/** The export folder's README: what each file is, how to launch and read back, and where verl differs from here. */
export function verlReadme(
  cfg: GrpoConfig,
  e: VerlExportSettings & { recipe: VerlRecipe; train: number; test: number; testSplit: string; dataSource: string; command: string },
): string {
  const reference = e.recipe === 'reference';
  const gate = !cfg.advantage.gating
    ? 'none (gating off)'
    : reference
      ? `a clone whose text has no \`answer:\` (any case) and that generated more than ${REFERENCE_RECIPE.formatMaxTokens} tokens`
      : 'a clone with no `Answer:` that used its whole length';
  const rollouts = `${e.dir}/${ROLLOUT_DUMP_DIR}`;
  return `# ${cfg.task} for verl (SELFCEST clone tool loop), ${reference ? "the reference's recipe" : "the playground's recipe"}

Written by:

\`\`\`sh
${e.command}
\`\`\`

| file | what |
|---|---|
| \`train.parquet\` | ${e.train} problems of the playground's train split (seed ${cfg.seed}) in verl's RL dataset layout |
| \`test.parquet\` | ${e.test} problems of its held-out \`${e.testSplit}\` set: the set \`npm run cli -- eval --seed ${cfg.seed}\` scores |
| \`selfcest_reward.py\` | the reward, standard-library Python: \`clone_accuracy_reward\` (delegating episodes, called by the clone tool loop) and \`compute_score\` (one sample, no clones); ${reference ? "the reference's formulas (clone_reward_2.py) with its constants" : "the playground's formulas with the run's thresholds"} in its \`CONFIG\` block |
| \`selfcest_dump.py\` | verl's trainer launcher with a logger that writes every root and clone sample of each step, linked, to \`${ROLLOUT_DUMP_DIR}/<step>.jsonl\` |
| \`config.yaml\` | the recipe in verl's \`ppo_trainer\` layout, clone tool loop included${reference ? " (the keys and values of the reference's configs/clone_tool_grpo_alt.yaml)" : ''} |
| \`run.json\` | the playground run config this was written from |

## 1. Train on verl

With the SELFCEST verl fork installed (its clone tool loop, \`spawn_clone(objectives[], shared_context[])\`,
and \`_compute_grpo_advantage_with_clones\`) and this folder on the GPU machine at \`${e.dir}\`
(export with \`--verl-dir\` to name it as that machine sees it):

\`\`\`sh
cd ${e.dir}
python selfcest_dump.py --config-path ${e.dir} --config-name config \\
  actor_rollout_ref.model.path=<your model> trainer.n_gpus_per_node=<gpus>
\`\`\`

\`selfcest_dump.py\` takes \`python -m verl.trainer.main_ppo\`'s arguments and runs it; the only
change is what verl writes to \`trainer.rollout_data_dir\` (\`${rollouts}\` in config.yaml): one
row per root and per clone sample with \`request_id\`, \`parent_request_id\`, \`clone_label\`,
\`actor_role\`, \`input\`, \`output\`, \`response_mask_tokens\`, \`score\`, \`gts\`, \`step\`,
\`data_source\` and the reward's parts. \`python -m verl.trainer.main_ppo\` with the same arguments
trains the same run but logs verl's own five fields, which cannot be read back as trees.

## 2. Read the run back

Copy \`${ROLLOUT_DUMP_DIR}/\` to the machine with the playground and run

\`\`\`sh
npm run cli -- import-verl --in ${ROLLOUT_DUMP_DIR} --out verl-run.jsonl
npm run cli -- compare --runs verl=verl-run.jsonl
\`\`\`

or pick the \`${ROLLOUT_DUMP_DIR}/*.jsonl\` files (or \`verl-run.jsonl\`) under "import CLI run" in the page's Runs
panel: the run's reward and token curves by step, and each root's delegation tree with its clones.

This folder was written and its files read back on a machine without verl or a GPU: the reward and
the logger were checked against restatements of the fork's agent loop (commit c37cc91e), not launched on it.
The rows' \`data_source\` is \`${e.dataSource}\`; \`reward_model.ground_truth\` holds the exact answer.
${cfg.task === 'multihop' ? "For multi-hop, `extra_info.context_items` holds the keyed chunks: the clone loop expands the keys a spawn's `shared_context` names into their text, as the playground's `<ctx>key` does (the playground's `<ctx>*` is one clone per key of `context_keys`).\n" : ''}
## What differs from the playground

${
  reference
    ? `- **Recipe.** This export carries the reference's reward and loop settings (docs/FORMATS.md of the playground
  lists each difference between the two recipes): length penalties from ${cfg.reward.rootTau} root tokens (ramp ${cfg.reward.rootRho}) and
  ${cfg.reward.cloneTau} clone tokens (ramp ${cfg.reward.cloneRho}), answers read as the last integer of the loop's answer text
  (commas dropped; 0.1 for a substring match), the reference's partial credit, tool responses of
  ${REFERENCE_RECIPE.loop.maxToolResponseLength} characters cut on the right, a JSON-repair penalty of ${REFERENCE_RECIPE.loop.jsonRepairPenalty}, its final-answer markers.
`
    : ''
}- **Lengths.** The playground's limits are for its character-level model: a root of ${cfg.rollout.rootMaxTokens} tokens,
  clone budgets of ${cfg.rollout.budgets.join(', ')}, answers cut to ${cfg.rollout.answerMaxChars} characters. Here: a root response of
  ${e.responseLength} tokens (verl counts the injected tool responses in it), ${e.cloneLength} per clone, clone answers of
  ${e.summaryLength} characters, prompts of ${e.promptLength} tokens (\`--response-length\`, \`--clone-length\`, \`--summary-length\`,
  \`--prompt-length\`).
${
  reference
    ? ''
    : `- **Reward thresholds.** The length penalties start at ${cfg.reward.rootTau} root and ${cfg.reward.cloneTau} clone tokens, as the run
  config gives them; for a real model give the reference's (\`--recipe reference\`, or \`--root-tau 512 --root-rho 256
  --clone-tau 512 --clone-rho 512\`), since its tokens are not the playground's characters. \`compute_score\` needs
  \`extra_info["response_tokens"]\` for a real model's length; without it a response in other than the playground's
  vocabulary gets no root length penalty.
`
}${
    cfg.tokenRateAfter > 0 && cfg.reward.tokenRate > 0
      ? `- **Token cost schedule.** This run trains its first ${cfg.tokenRateAfter} steps without the token cost, then with
  ${cfg.reward.tokenRate} per generated token. verl's reward has no step, so \`selfcest_reward.py\` carries the later rate; for the
  two stages, export once more with \`--token-rate 0\` and run that for the first ${cfg.tokenRateAfter} steps.${
    cfg.restartOptimizer
      ? `
  The run restarts Adam at the switch (\`--restart-optimizer\`): start the second stage as a new verl run from the
  first one's weights, not as a resume of it.`
      : ''
  }
`
      : ''
  }- **Budgets.** The playground's root asks a budget per spawn; verl gives every clone one length. The
  reward reads a clone's \`budget\` from its extra fields when the spawn tool records one, else
  ${e.cloneLength}; the gate (${gate}) ${reference ? 'uses the token count' : 'and the budget cost use it'}.
- **Answers.** Here an answer is an \`<ans>\` block; there ${reference ? 'it is the last integer of the text the loop keeps after the final-answer marker' : `it is the rest of the line after the root's last \`${ANSWER_MARKER}\` (spawn calls left out), else the text the loop kept after its final-answer marker. The verdict is the same exact match (arithmetic: a canonical integer)`}.
- **Spawn calls.** One playground round is one \`spawn_clone\` call with several objectives; the call
  penalty counts \`<tool_call>\` in the root's text, as the reference does. A clone the root named (an objective's \`name\`)
  is labelled with that name, not \`turn<N>_clone<K>\`: the reward and the reader take it as a round of its own.
- **Credit.** The reward returns r_clone = R for every clone the gate lets through, 0 for a gated one;
  the fork's advantage code scales the root's advantage by clamp(r_clone / R), the ratio credit of
  this run (\`--credit ratio\`). Settings the fork has no knob for (dynamic sampling, broadcast credit,
  the protocol gate, gated contexts without their KL term, gating roots) are refused by the export.
`;
}
