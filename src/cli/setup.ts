/** Shared start-up for commands: backend, tokenizer, policy from a checkpoint directory. */
import { type Policy, policyFromCheckpoint, policyToCheckpoint } from '../core/policy';
import { disposeParams, initParams } from '../core/model/params';
import { presetConfig } from '../core/model/config';
import { Tokenizer } from '../core/tokenizer/tokenizer';
import { BACKENDS, type BackendName, initBackend } from '../runtime/backend';
import { readCheckpointDir, writeCheckpointDir } from './checkpointDir';
import type { SelfcestMeta } from '../core/io/checkpoint';
import { probeLogits } from '../core/io/checkpointProbe';
import { type ContextDecoder, PolicyDecoder } from '../core/rollout';
import { PolicyRollouts } from '../runtime/node/pool';
import { toyPolicyModel } from '../core/policyModel';
import { installNodeWebgpu } from '../runtime/node/nodeWebgpu';
import { type FlagSpec, UsageError } from './args';
import type { TaskEntry } from '../core/tasks';
import { taskEntryOf } from '../core/runConfigTargets';

/** The `--backend` flag of every command that runs the model. */
/** Whether evaluation writes the root's limit in its prompt: as the checkpoint was trained (auto), or as told. */
export const LIMIT_IN_PROMPT_FLAG = {
  type: 'string',
  choices: ['auto', 'yes', 'no'],
  default: 'auto',
  help: "write the root's token limit in its prompt (<root>#48 …; with --model in the folder's prompt set's words): auto = when the checkpoint was trained so (its selfcest.json training config; with --model: no), yes, no",
} as const;

/** Whether a checkpoint's root was trained knowing its limit (a warm start with rootLimits, a GRPO run with rollout.rootLimitMin). */
export function knowsItsLimit(meta: Pick<SelfcestMeta, 'training'>): boolean {
  const t = meta.training ?? {};
  const rollout = t.rollout as Record<string, unknown> | undefined;
  return (t.rootLimits !== undefined && t.rootLimits !== null) || (rollout?.rootLimitMin !== undefined && rollout.rootLimitMin !== null);
}

/** The rollout setting that writes the limit in the root prompt, per LIMIT_IN_PROMPT_FLAG. */
export function limitInPrompt(flag: string, meta: Pick<SelfcestMeta, 'training'>): { rootLimitMin?: number } {
  return flag === 'yes' || (flag === 'auto' && knowsItsLimit(meta)) ? { rootLimitMin: 1 } : {};
}

export const BACKEND_FLAG = {
  type: 'string',
  choices: BACKENDS,
  default: 'wasm',
  help: 'tfjs backend (webgpu: Dawn from the npm package webgpu; a software Vulkan driver such as SwiftShader when there is no GPU, slow)',
} as const satisfies FlagSpec;

/** Starts the `--backend` (a value BACKEND_FLAG allows) and returns it. */
export async function setupBackend(name: string): Promise<BackendName> {
  const backend = BACKENDS.find((b) => b === name);
  if (backend === undefined) throw new Error(`--backend must be one of ${BACKENDS.join(', ')} (got ${JSON.stringify(name)})`);
  if (backend === 'webgpu') {
    try {
      const { adapter } = await installNodeWebgpu();
      console.error(`backend webgpu: ${adapter}`);
    } catch (e) {
      throw new Error(`--backend webgpu: ${(e as Error).message}`);
    }
  }
  await initBackend(backend);
  return backend;
}

/** The `--options` flag of the evaluating commands: task options as JSON, as `sft` and `train` take them. */
export const OPTIONS_FLAG = {
  type: 'string',
  help: 'task options as JSON, e.g. \'{"chunks":6,"perChunk":4,"filler":24}\' for multihop (fields not given take the task\'s defaults)',
} as const satisfies FlagSpec;

/**
 * The task and its options from `--task` and `--options` (JSON text), with `extra` fields
 * (from a command's own flags, e.g. --max-operands) laid over the JSON; errors name the flag.
 */
export function taskFromFlags(task: string, optionsText: string | undefined, extra: Record<string, unknown> = {}): TaskEntry {
  let raw: unknown = {};
  if (optionsText !== undefined) {
    try {
      raw = JSON.parse(optionsText);
    } catch {
      throw new UsageError(`--options must be a JSON object of ${task} task options (got ${JSON.stringify(optionsText)})`);
    }
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
      throw new UsageError(`--options must be a JSON object of ${task} task options (got ${optionsText})`);
  }
  try {
    return taskEntryOf(task, { ...(raw as object), ...extra }, '--options');
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

let tokenizer: Tokenizer | undefined;
export function getTokenizer(): Tokenizer {
  tokenizer ??= Tokenizer.builtin();
  return tokenizer;
}

/**
 * A checkpoint directory as a policy, after the probe forward (checkpointProbe.ts): weights whose
 * logits are not finite are refused here, naming the directory and the file, not at sampling.
 */
export async function loadPolicy(dir: string, trainable = true): Promise<{ policy: Policy; meta: SelfcestMeta }> {
  const ckpt = await readCheckpointDir(dir);
  const policy = policyFromCheckpoint(ckpt, trainable);
  try {
    await probeLogits(policy.params, policy.config);
  } catch (e) {
    disposeParams(policy.params);
    throw new Error(`${dir}: ${(e as Error).message}`);
  }
  return { policy, meta: ckpt.selfcest };
}

/**
 * A checkpoint named by a flag (`--init`, `--checkpoint`): what cannot be loaded is bad input,
 * refused naming the flag and the problem (exit 2).
 */
export async function loadPolicyFlag(flag: string, dir: string, trainable = true): Promise<{ policy: Policy; meta: SelfcestMeta }> {
  try {
    return await loadPolicy(dir, trainable);
  } catch (e) {
    const message = (e as Error).message;
    throw new UsageError(`--${flag} ${dir} is not a checkpoint this model can load: ${message}`);
  }
}

export function freshPolicy(preset: string, seed: number): Policy {
  const config = presetConfig(preset);
  return { config, params: initParams(config, seed) };
}

export async function savePolicy(dir: string, policy: Policy, meta: Partial<Omit<SelfcestMeta, 'format' | 'vocab'>>): Promise<void> {
  await writeCheckpointDir(dir, await policyToCheckpoint(policy, meta));
}

/**
 * A decoder for evaluation: `workers` rollout worker threads, or this process when 0.
 * `close` frees either kind.
 */
export async function openDecoder(policy: Policy, workers: number, backend: BackendName): Promise<{ decoder: ContextDecoder; close: () => void }> {
  if (workers > 0) {
    const pool = await PolicyRollouts.start(
      toyPolicyModel(policy, (t) => getTokenizer().encode(t)),
      workers,
      backend,
    );
    return { decoder: pool.decoder, close: () => pool.close() };
  }
  const local = new PolicyDecoder(policy);
  return { decoder: local, close: () => local.dispose() };
}
