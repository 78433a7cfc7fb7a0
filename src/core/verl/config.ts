/**
 * The verl side of a playground run: the config block SELFCEST's verl fork reads (its
 * `ppo_trainer` layout, with the clone tool loop under `actor_rollout_ref.rollout.multi_turn.clone`)
 * and the README of an export folder. Written from the run's GrpoConfig, so the recipe travels
 * with the data. Pure.
 */
import type { GrpoConfig } from '../rl/grpoStep';
import { type RunConfig, type RunConfigKey, fieldOf } from '../runConfig';
import type { RewardConfig } from '../rl/reward';

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
  launch: VerlLaunch,
  recipe: VerlRecipe = 'playground',
  given: ReadonlySet<RunConfigKey> = new Set(),
): { [key: string]: YamlValue } {
  return recipe === 'reference' ? referenceConfig(cfg, e, launch, given) : playgroundConfig(cfg, e, launch);
}

/** What both recipes' configs start with: verl's defaults to build on (found in the installed package; a checkout can name its folder instead). */
const CONFIG_HEAD = { hydra: { searchpath: ['pkg://verl.trainer.config'] }, defaults: ['ppo_trainer', '_self_'] } as const;

/** The export's data files as the verl machine sees them. */
const dataFiles = (e: VerlExportSettings) => ({ train_files: `${e.dir}/train.parquet`, val_files: `${e.dir}/test.parquet` });

function playgroundConfig(cfg: GrpoConfig, e: VerlExportSettings, launch: VerlLaunch): { [key: string]: YamlValue } {
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
        tensor_model_parallel_size: launch.tensorParallel,
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
            // The reference's markers: the loop's root_answer is the reward's fallback where the root wrote no `Answer:` line.
            final_answer_markers: [...REFERENCE_FINAL_ANSWER_MARKERS],
          },
        },
        agent: { default_agent_loop: 'tool_agent' },
      },
    },
    custom_reward_function: { path: reward, name: 'compute_score' },
    // The clone loop scores every sample itself (reward_score); the reference turns the reward loop off too.
    reward_model: { use_reward_loop: false },
    algorithm: { adv_estimator: 'grpo', norm_adv_by_std_in_grpo: cfg.advantage.stdNormalize, use_kl_in_reward: false },
    trainer: {
      project_name: 'selfcest_playground',
      experiment_name: `${cfg.task}-seed${cfg.seed}`,
      ...launchTrainer(launch),
      rollout_data_dir: `${e.dir}/${ROLLOUT_DUMP_DIR}`,
    },
  };
}

/** configs/clone_tool_grpo_alt.yaml's keys and values, the export's paths and lengths, and what a flag gave. */
function referenceConfig(cfg: GrpoConfig, e: VerlExportSettings, launch: VerlLaunch, given: ReadonlySet<RunConfigKey>): { [key: string]: YamlValue } {
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
        tensor_model_parallel_size: launch.tensorParallel,
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
      ...launchTrainer(launch),
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

/**
 * How a run is launched: verl's `trainer.*` schedule and machines, and the rollout's tensor
 * parallel size. verl's own defaults do not launch a playground run as it was trained: TP 2
 * (no rollout server at all on one GPU), console + wandb (an account needed), no checkpoint ever
 * saved, 30 epochs whatever the run's steps. Both recipes write every one of these.
 */
export interface VerlLaunch {
  /** trainer.total_training_steps: the run's GRPO steps. */
  steps: number;
  /** trainer.total_epochs: passes over train.parquet that hold `steps` (verl stops at whichever comes first). */
  epochs: number;
  gpusPerNode: number;
  nodes: number;
  /** actor_rollout_ref.rollout.tensor_model_parallel_size: GPUs per rollout server. */
  tensorParallel: number;
  /** trainer.logger: console and tensorboard need no account; wandb only when asked for. */
  loggers: readonly ('console' | 'tensorboard' | 'wandb')[];
  /** trainer.save_freq (> 0: verl also saves at the last step). */
  saveFreq: number;
  /** trainer.test_freq (> 0: verl also validates at the last step). */
  testFreq: number;
}

/** What the export's flags give of the launch; the rest follows from the data and the batch. */
export interface VerlLaunchRequest {
  steps: number | undefined;
  trainRows: number;
  batch: number;
  miniBatch: number;
  group: number;
  gpusPerNode: number;
  nodes: number;
  tensorParallel: number;
  wandb: boolean;
  saveFreq: number | undefined;
  testFreq: number | undefined;
}

/**
 * The launch settings, or the reasons verl would refuse or misrun them (a message each): verl
 * drops the last partial batch (drop_last), so a step needs `batch` train rows; the rollout
 * servers are world size / TP (at least one); FSDP splits each batch's `batch · group` samples,
 * and each mini-batch's, evenly over the GPUs (validate_config, the FSDP worker's normalisation).
 */
export function verlLaunch(r: VerlLaunchRequest): VerlLaunch | string[] {
  const errors: string[] = [];
  const perEpoch = Math.floor(r.trainRows / r.batch);
  if (perEpoch < 1) errors.push(`--train ${r.trainRows} is fewer rows than one batch (${r.batch}): verl drops a partial batch, so no step would run`);
  const gpus = r.gpusPerNode * r.nodes;
  if (r.tensorParallel > r.gpusPerNode || r.gpusPerNode % r.tensorParallel !== 0)
    errors.push(`--tp ${r.tensorParallel} must divide --gpus ${r.gpusPerNode} (each rollout server takes TP GPUs of one node)`);
  if ((r.batch * r.group) % gpus !== 0)
    errors.push(`batch ${r.batch} × group ${r.group} = ${r.batch * r.group} samples a step must split evenly over ${gpus} GPUs`);
  if ((r.miniBatch * r.group) % gpus !== 0)
    errors.push(`mini-batch ${r.miniBatch} × group ${r.group} = ${r.miniBatch * r.group} samples must split evenly over ${gpus} GPUs`);
  if (errors.length > 0) return errors;
  const steps = r.steps ?? perEpoch;
  return {
    steps,
    epochs: Math.ceil(steps / perEpoch),
    gpusPerNode: r.gpusPerNode,
    nodes: r.nodes,
    tensorParallel: r.tensorParallel,
    loggers: r.wandb ? ['console', 'tensorboard', 'wandb'] : ['console', 'tensorboard'],
    saveFreq: r.saveFreq ?? Math.min(steps, 50),
    testFreq: r.testFreq ?? Math.min(steps, 25),
  };
}

/** The trainer keys of a launch (both recipes). */
function launchTrainer(l: VerlLaunch): { [key: string]: YamlValue } {
  return {
    n_gpus_per_node: l.gpusPerNode,
    nnodes: l.nodes,
    total_training_steps: l.steps,
    total_epochs: l.epochs,
    save_freq: l.saveFreq,
    test_freq: l.testFreq,
    val_before_train: true,
    logger: [...l.loggers],
  };
}

/** Model tokens per playground token, for the root and for one clone. */
export interface TokenScale {
  root: number;
  clone: number;
}

/**
 * The scale from the lengths: a real model's root response and clone length (its own tokens)
 * against the playground's root limit and largest budget (characters of the toy model), so a
 * threshold keeps its place among its limits: the playground's root threshold lies above its
 * root limit, and stays above the real model's response length.
 */
export function lengthTokenScale(cfg: GrpoConfig, e: Pick<VerlExportSettings, 'responseLength' | 'cloneLength'>): TokenScale {
  return { root: e.responseLength / cfg.rollout.rootMaxTokens, clone: e.cloneLength / Math.max(...cfg.rollout.budgets) };
}

/**
 * The playground's reward settings counted in another model's tokens: thresholds and ramps
 * multiplied by the scale (rounded, at most the table's largest threshold), costs a token
 * divided by it (a clone's scale for the token cost: clones write most of an episode's tokens).
 */
export function rewardInModelTokens(reward: RewardConfig, s: TokenScale): RewardConfig {
  const max = (key: RunConfigKey) => {
    const f = fieldOf(key);
    return f.type === 'number' ? f.max : Infinity;
  };
  const tokens = (v: number, scale: number, key: RunConfigKey, least: number) => Math.min(max(key), Math.max(least, Math.round(v * scale)));
  return {
    ...reward,
    rootTau: tokens(reward.rootTau, s.root, 'rootTau', 0),
    rootRho: tokens(reward.rootRho, s.root, 'rootRho', 1),
    cloneTau: tokens(reward.cloneTau, s.clone, 'cloneTau', 0),
    cloneRho: tokens(reward.cloneRho, s.clone, 'cloneRho', 1),
    tokenRate: reward.tokenRate / s.clone,
    budgetRate: reward.budgetRate / s.clone,
  };
}
