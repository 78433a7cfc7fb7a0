/**
 * The README of a verl export folder: what each file is, the launch on one GPU and on a node of
 * eight, how to read the run back, and where verl differs from the playground. Pure.
 */
import type { GrpoConfig } from '../rl/grpoStep';
import type { RewardConfig } from '../rl/reward';
import { REFERENCE_RECIPE, ROLLOUT_DUMP_DIR, type TokenScale, type VerlExportSettings, type VerlLaunch, type VerlRecipe } from './config';
import { ANSWER_MARKER } from './readback';

/** What the README says beyond the run config: the export's settings, launch, and the reward as written. */
export interface VerlReadmeFacts extends VerlExportSettings {
  recipe: VerlRecipe;
  train: number;
  test: number;
  testSplit: string;
  dataSource: string;
  command: string;
  launch: VerlLaunch;
  /** The reward settings selfcest_reward.py holds (the playground's, counted in the model's tokens). */
  reward: RewardConfig;
  /** Model tokens per playground token the playground recipe's reward was scaled by. */
  scale: TokenScale;
  answers: 'exact' | 'last-integer';
}

/** A GPU count a step's samples and mini-batches split evenly over (verl's validate_config). */
const splitsOver = (cfg: GrpoConfig, gpus: number) => (cfg.batch * cfg.group) % gpus === 0 && ((cfg.miniBatch ?? cfg.batch) * cfg.group) % gpus === 0;

export function verlReadme(cfg: GrpoConfig, e: VerlReadmeFacts): string {
  const reference = e.recipe === 'reference';
  const l = e.launch;
  const launch = (gpus: number, extra = '') =>
    `cd ${e.dir}\npython selfcest_dump.py --config-path ${e.dir} --config-name config \\\n  actor_rollout_ref.model.path=<your model> trainer.n_gpus_per_node=${gpus} trainer.nnodes=1${extra}`;
  const eight = splitsOver(cfg, 8)
    ? `\`\`\`sh\n${launch(8)}\n\`\`\``
    : `Not with this batch: ${cfg.batch} prompts × ${cfg.group} rollouts (mini-batch ${cfg.miniBatch ?? cfg.batch}) do not split evenly over 8 GPUs; export again with \`--batch\`/\`--mini-batch\` that do (the reference's 32 and 8 do).`;
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

On one GPU:

\`\`\`sh
${launch(1)}
\`\`\`

On a node of eight (one rollout server per GPU at tensor parallel size ${l.tensorParallel}):

${eight}

config.yaml was written for ${l.gpusPerNode} GPU${l.gpusPerNode === 1 ? '' : 's'} × ${l.nodes} node${l.nodes === 1 ? '' : 's'} (\`--gpus\`, \`--nodes\`); a command-line
value wins over it. What the launch depends on, all in config.yaml:

| setting | value | why |
|---|---|---|
| \`actor_rollout_ref.rollout.tensor_model_parallel_size\` | ${l.tensorParallel} | GPUs per rollout server (\`--tp\`); verl's default of 2 leaves one GPU with no server |
| \`trainer.total_training_steps\` | ${l.steps} | the run's steps (\`--steps\`) |
| \`trainer.total_epochs\` | ${l.epochs} | passes over train.parquet that hold those steps (${Math.floor(e.train / cfg.batch)} steps a pass at batch ${cfg.batch}) |
| \`trainer.save_freq\` | ${l.saveFreq} | a checkpoint every ${l.saveFreq} steps and at the last (\`--save-freq\`), under \`checkpoints/<project>/<experiment>\` |
| \`trainer.test_freq\` | ${l.testFreq} | held-out reward on test.parquet every ${l.testFreq} steps, before the first and at the last (\`--test-freq\`) |
| \`trainer.logger\` | ${l.loggers.join(', ')} | no account needed${l.loggers.includes('wandb') ? ' except for wandb (`--wandb`: set WANDB_API_KEY)' : ' (`--wandb` adds wandb)'}; TensorBoard's files go to \`$TENSORBOARD_DIR\`, else \`tensorboard_log/<project>/<experiment>\` |

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
    : `- **Reward in the model's tokens.** The run's thresholds are counted in the playground model's tokens
  (characters); verl counts the model's own. selfcest_reward.py holds them scaled by ${fmt(e.scale.root)} model tokens per
  playground token for the root and ${fmt(e.scale.clone)} for a clone (\`--token-scale\`, by default the response and clone lengths against the
  root limit ${cfg.rollout.rootMaxTokens} and the largest budget ${Math.max(...cfg.rollout.budgets)}): root penalty from ${e.reward.rootTau} tokens (ramp ${e.reward.rootRho}),
  clone penalty from ${e.reward.cloneTau} (ramp ${e.reward.cloneRho}), ${e.reward.tokenRate > 0 ? `a cost of ${fmt(e.reward.tokenRate)} a generated token` : 'no token cost'}.
  \`compute_score\` needs \`extra_info["response_tokens"]\` for a real model's length; without it a response in other
  than the playground's vocabulary gets no root length penalty.
`
}${
    cfg.tokenRateAfter > 0 && cfg.reward.tokenRate > 0
      ? `- **Token cost schedule.** This run trains its first ${Math.min(cfg.tokenRateAfter, l.steps)} of ${l.steps} steps without the token cost, then with it.
  verl's reward has no step, so \`selfcest_reward.py\` carries the later rate. For the two stages, export once
  more with \`--token-rate 0\` and launch that with \`trainer.total_training_steps=${Math.min(cfg.tokenRateAfter, l.steps)}\`, then this folder with
  \`trainer.total_training_steps=${Math.max(0, l.steps - cfg.tokenRateAfter)}\` from the first stage's last checkpoint.${
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
- **Answers.** Here an answer is an \`<ans>\` block; there ${
    reference || e.answers === 'last-integer'
      ? `it is the last integer of ${reference ? 'the text the loop keeps after the final-answer marker' : `the root's last \`${ANSWER_MARKER}\` line, else of the text the loop keeps after its final-answer markers (spawn calls left out)`}, thousands separators dropped: \`Answer: 1,234\`, \`The answer is 1234.\`, \`#### 1234\` and \`Answer: **1234**\` all read 1234`
      : `it is the rest of the line after the root's last \`${ANSWER_MARKER}\` (spawn calls left out), else the text the loop kept after its final-answer marker. The verdict is the same exact match (arithmetic: a canonical integer; \`--answers exact\`)`
  }.
- **Spawn calls.** One playground round is one \`spawn_clone\` call with several objectives; the call
  penalty counts \`<tool_call>\` in the root's text, as the reference does. A clone the root named (an objective's \`name\`)
  is labelled with that name, not \`turn<N>_clone<K>\`: the reward and the reader take it as a round of its own.
- **Credit.** The reward returns r_clone = R for every clone the gate lets through, 0 for a gated one;
  the fork's advantage code scales the root's advantage by clamp(r_clone / R), the ratio credit of
  this run (\`--credit ratio\`). Settings the fork has no knob for (dynamic sampling, broadcast credit,
  the protocol gate, gated contexts without their KL term, gating roots) are refused by the export.
`;
}

/** A number in a few significant digits. */
function fmt(x: number): string {
  return Number(x.toPrecision(3)).toString();
}
