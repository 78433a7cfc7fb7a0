/**
 * Hugging Face model folders and PEFT adapter folders for the CLI: loading with errors that name
 * the flag and the folder, and how long loading took.
 */
import { existsSync, statSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { UsageError } from './args';
import { type FolderReader, HfFolderError } from '../core/io/hfFolder';
import { type LoadedHfTextModel, WEIGHT_STORAGE_PREFERENCES, type WeightStoragePreference, loadHfTextModel } from '../core/io/hfTextModel';
import { HUB_ENDPOINT, hubFolderReader, isHubId } from '../core/io/hubFolder';
import { nonFiniteTensor } from '../core/io/finiteTensors';
import { decodeSafetensors, encodeSafetensors } from '../core/io/safetensors';
import { DecoderConfigError, DecoderWeightsError, decoderTensorSpecs } from '../core/model/decoder';
import { Lora, type LoraConfig, LoraConfigError, loraConfigFromPeft, peftAdapterConfig } from '../core/model/lora';
import type { TextModel } from '../core/policyModel';
import { nodeFolderReader } from '../runtime/node/folderReader';
import { hfPolicyModel } from '../core/policyModel';
import { type TextFitLimits, textFit } from '../core/protocol/textFit';
import { heldOutProblems } from '../core/eval/evaluate';
import { HELD_OUT_SEED } from '../core/eval/splits';
import type { TaskMixEntry } from '../core/sft/sft';
import type { TaskName } from '../core/tasks';
import { PolicyRollouts } from '../runtime/node/pool';
import type { BackendPreference } from '../runtime/selectBackend';
import type { ContextDecoder } from '../core/rollout/scheduler';
import { type RunWeights, otherModelKind } from './runDir';
import type { FlagSpec } from './args';
import { isRecord } from '../core/io/savedConfig';

export const MODEL_FLAG = {
  type: 'string',
  required: true,
  help: 'a Hugging Face model folder (gpt2, llama, qwen2, qwen3): config.json, model.safetensors (or an index of shards), tokenizer.json, tokenizer_config.json; or a Hub model id (owner/name), fetched from $HF_ENDPOINT (default https://huggingface.co) into $SELFCEST_HUB_CACHE (default ~/.cache/selfcest/hub)',
} as const;

/**
 * The files of `--flag value`: a folder on disk, or a Hub model id fetched from $HF_ENDPOINT (a
 * local mirror serving the Hub's paths works the same) and kept in a cache folder, so a second
 * run reads the disk.
 */
export function modelReader(flag: string, value: string): FolderReader {
  if (existsSync(value)) {
    if (!statSync(value).isDirectory()) throw new UsageError(`--${flag} ${value} is a file: give the model's folder`);
    return nodeFolderReader(value);
  }
  if (!isHubId(value)) throw new UsageError(`--${flag} ${value}: no such folder, and not a Hub model id (owner/name)`);
  const cache = join(process.env.SELFCEST_HUB_CACHE || join(homedir(), '.cache', 'selfcest', 'hub'), ...value.split('/'));
  const hub = hubFolderReader(value, { endpoint: process.env.HF_ENDPOINT || HUB_ENDPOINT });
  const disk = nodeFolderReader(cache);
  // A file the repository lacks is remembered as `<name>.absent`, so that a later run needs no network for it either.
  const absent = (name: string) => join(cache, `${name}.absent`);
  const keep = async (path: string, bytes: Uint8Array) => {
    await mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.tmp-${process.pid}`;
    await writeFile(tmp, bytes);
    await rename(tmp, path);
  };
  return async (name) => {
    const kept = await disk(name);
    if (kept !== null) return kept;
    if (existsSync(absent(name))) return null;
    const bytes = await hub(name);
    await keep(bytes !== null ? join(cache, name) : absent(name), bytes ?? new Uint8Array());
    return bytes;
  };
}

export const WEIGHTS_FLAG = {
  type: 'string',
  choices: WEIGHT_STORAGE_PREFERENCES,
  default: 'auto',
  help: "how a float16/bfloat16 checkpoint's matrices are held: auto (16-bit on webgpu, float32 elsewhere), half (16-bit, widened where read: half the memory, slower on wasm), float32",
} as const satisfies FlagSpec;

export interface LoadedTextModel extends LoadedHfTextModel {
  /** The model's files (its folder, or the Hub's through the cache). */
  read: FolderReader;
}

/**
 * The model given by `--flag` (a folder or a Hub id, modelReader); what is wrong with it is a usage
 * error naming both. `chat`: the command renders chats, so a folder without a chat template is
 * refused here, before anything is written.
 */
export async function loadTextModel(flag: string, dir: string, storage = 'auto', chat = true): Promise<LoadedTextModel> {
  const read = modelReader(flag, dir);
  let loaded: LoadedHfTextModel;
  try {
    // (The flag's choices are WEIGHT_STORAGE_PREFERENCES; loadHfTextModel refuses anything else.)
    loaded = await loadHfTextModel(read, storage as WeightStoragePreference);
  } catch (e) {
    if (e instanceof HfFolderError || e instanceof DecoderConfigError || e instanceof DecoderWeightsError)
      throw new UsageError(`--${flag} ${dir}: ${e.message}`);
    throw e;
  }
  if (chat && !loaded.model.tokenizer.hasChatTemplate) {
    loaded.model.params.forEach((t) => t.dispose());
    throw new UsageError(
      `--${flag} ${dir}: the tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja), which this command renders its chats with`,
    );
  }
  return { ...loaded, read };
}

/** A PEFT adapter folder (adapter_config.json, adapter_model.safetensors, its weights finite) for `model`; errors name the flag and the file. */
export async function loadAdapter(flag: string, dir: string, model: TextModel): Promise<Lora> {
  const fail = (file: string, why: string): never => {
    throw new UsageError(`--${flag} ${dir}: ${file}: ${why}`);
  };
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(join(dir, 'adapter_config.json'), 'utf8'));
  } catch (e) {
    fail('adapter_config.json', (e as Error).message);
  }
  let bytes: Uint8Array | null = null;
  try {
    bytes = new Uint8Array(await readFile(join(dir, 'adapter_model.safetensors')));
  } catch (e) {
    fail('adapter_model.safetensors', (e as Error).message);
  }
  try {
    const tensors = decodeSafetensors(bytes as Uint8Array).tensors;
    const nonFinite = nonFiniteTensor(tensors);
    if (nonFinite !== null) fail('adapter_model.safetensors', nonFinite);
    return Lora.fromPeft(model.config, loraConfigFromPeft(raw, model.config), tensors);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    if (e instanceof LoraConfigError) throw new UsageError(`--${flag} ${dir}: ${e.message}`);
    return fail('adapter_model.safetensors', (e as Error).message);
  }
}

/**
 * A Hugging Face folder (and a PEFT adapter on it) as the one runner's decoder, which carries the
 * folder's text protocol; `close` frees the decoder, the adapter and the weights. `capacity`: the
 * decoder's batch rows to start with.
 */
export async function openTextDecoder(
  f: { model: string; adapter?: string; weights: string; workers?: number },
  capacity: number,
  backend?: BackendPreference,
): Promise<{ loaded: LoadedTextModel; decoder: ContextDecoder & { dispose(): void }; close(): void }> {
  const workers = f.workers ?? 0;
  if (workers > 0 && f.adapter !== undefined)
    throw new UsageError('--workers: worker threads rebuild the model from its weights alone, without a LoRA adapter');
  const loaded = await loadTextModel('model', f.model, f.weights);
  const adapters = f.adapter !== undefined ? await loadAdapter('adapter', f.adapter, loaded.model) : undefined;
  const model = { ...loaded.model, adapters };
  const local = hfPolicyModel(model, model.tokenizer, new Map());
  const release = () => {
    adapters?.dispose();
    model.params.forEach((t) => t.dispose());
  };
  if (workers > 0) {
    // Each worker rebuilds the model from its weights; the scheduler here speaks its protocol.
    const pool = await PolicyRollouts.start({ ...local, params: model.params, replica: { kind: 'hf', config: model.config } }, workers, backend ?? 'wasm');
    const decoder = Object.assign(pool.decoder, { dispose: () => pool.close() });
    return { loaded, decoder, close: () => (decoder.dispose(), release()) };
  }
  const decoder = local.decoder(capacity);
  return { loaded, decoder, close: () => (decoder.dispose(), release()) };
}

/**
 * Says before a run what of it will not fit the model's window (textFit, on 32 problems of each
 * task of the run), one `warning:` line each.
 */
export function warnTextFit(model: TextModel, mix: readonly Pick<TaskMixEntry, 'task' | 'opts'>[], limits: TextFitLimits): void {
  for (const { task, opts } of mix) {
    const fit = textFit(model.tokenizer, model.config.maxPositions, task.name as TaskName, heldOutProblems(task, opts, 32, HELD_OUT_SEED, 'monitor'), limits);
    for (const w of fit.warnings) console.log(`warning (${task.name}): ${w}`);
  }
}

/** A model's one-line summary: family, size, load time. */
export function modelSummary(m: LoadedTextModel): string {
  const mb = (bytes: number) => Math.round(bytes / 1e5) / 10;
  const held = m.halfTensors > 0 ? `, ${mb(m.heldBytes)} MB as held (${m.halfTensors} matrices 16-bit)` : '';
  return `${m.model.config.family}: ${m.parameters.toLocaleString('en')} parameters, ${mb(m.parameters * 4)} MB as float32${held}, loaded in ${m.loadMs} ms`;
}

/**
 * A train-lm run's weights in its saves: the adapter in PEFT's format (adapter_config.json naming
 * the base folder, adapter_model.safetensors), read back onto `model`.
 */
export function adapterRunWeights(model: TextModel, loraConfig: LoraConfig, baseDir: string): RunWeights<Lora> {
  return {
    files: async (lora) => [
      ['adapter_config.json', new TextEncoder().encode(JSON.stringify(peftAdapterConfig(loraConfig, model.config, baseDir), null, 1) + '\n')],
      ['adapter_model.safetensors', encodeSafetensors(await lora.peftTensors())],
    ],
    // As saved (a resume with other LoRA settings is refused by the run config's check).
    load: (dir) => loadAdapter('out', dir, model),
    mismatch: (state) =>
      otherModelKind(state, 'hf') ??
      (isRecord(state.config.training) && 'lora' in state.config.training ? null : 'it trains every weight (--lora-r 0), not LoRA adapters'),
  };
}

/**
 * A full fine-tuning run's weights in its saves: model.safetensors in the model's own names (with its
 * folder's config.json beside it, and `beside`: the tokenizer's files, so that a save is a model folder).
 */
export function fullRunWeights(model: TextModel, configJson: Uint8Array, beside: readonly [string, Uint8Array][] = []): RunWeights<Map<string, Float32Array>> {
  return {
    mismatch: (state) =>
      otherModelKind(state, 'hf') ??
      (isRecord(state.config.training) && state.config.training.full === true ? null : 'it trains LoRA adapters, not every weight (--lora-r 0)'),
    files: async (weights) => [
      ['config.json', configJson],
      ...beside,
      [
        'model.safetensors',
        encodeSafetensors(decoderTensorSpecs(model.config).map(({ name, shape }) => ({ name, shape, data: weights.get(name) as Float32Array }))),
      ],
    ],
    load: async (dir) => {
      const tensors = decodeSafetensors(new Uint8Array(await readFile(join(dir, 'model.safetensors')))).tensors;
      const out = new Map<string, Float32Array>();
      for (const { name, shape } of decoderTensorSpecs(model.config)) {
        const got = tensors.get(name);
        if (!got || got.shape.join(',') !== shape.join(',')) throw new Error(`${join(dir, 'model.safetensors')}: ${name} is missing or has another shape`);
        out.set(name, Float32Array.from(got.data));
      }
      return out;
    },
  };
}
