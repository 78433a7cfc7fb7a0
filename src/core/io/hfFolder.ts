/**
 * A Hugging Face model folder as the ecosystem writes it: config.json, and the weights in
 * model.safetensors or in shards listed by model.safetensors.index.json (`weight_map`: tensor name
 * → shard file). The files come through `read` (Node's fs in the CLI, a picked directory in the
 * page), so this is pure. Every problem names the file.
 */
import { nonFiniteTensor } from './finiteTensors';
import { type DecodedTensor, decodeSafetensors } from './safetensors';

/** A file of the folder by name, or null when the folder has none. */
export type FolderReader = (name: string) => Promise<Uint8Array | null>;

/** The engine's record beside an exported folder's weights: the counters and the page's training record (docs/FORMATS.md). */
export const HF_TRAINING_FILE = 'selfcest_training.json';

/** Whether a file of a folder's top level is one a Hugging Face model's load reads or its export keeps. */
export function isModelFolderFile(name: string): boolean {
  return (
    [
      HF_TRAINING_FILE,
      'config.json',
      'generation_config.json',
      'tokenizer.json',
      'tokenizer_config.json',
      'chat_template.jinja',
      'special_tokens_map.json',
    ].includes(name) ||
    name === 'model.safetensors' ||
    /^model-\d+-of-\d+\.safetensors$/.test(name) ||
    name === 'model.safetensors.index.json' ||
    // A page export of a model trained over LoRA adapters, and the optimizers' moments of a saved page session.
    name === 'adapter_config.json' ||
    name === 'adapter_model.safetensors' ||
    /^optimizer-(grpo|sft)\.safetensors$/.test(name)
  );
}

/** A folder reader over files held by name (a folder's top level; a nested path is read by its last part). */
export function filesFolderReader(files: ReadonlyMap<string, Uint8Array>): FolderReader {
  const byName = new Map([...files].map(([k, v]) => [k.split('/').at(-1) as string, v]));
  return async (name) => byName.get(name) ?? null;
}

export class HfFolderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HfFolderError';
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A JSON file of the folder, parsed; null when the folder has none; an error naming it when it is not JSON. */
export async function jsonFile(read: FolderReader, name: string): Promise<unknown | null> {
  const bytes = await read(name);
  if (bytes === null) return null;
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new HfFolderError(`${name}: not valid JSON (${(e as Error).message})`);
  }
}

/** The folder's config.json, parsed (its checks are the model's). */
export async function readHfConfig(read: FolderReader): Promise<unknown> {
  const config = await jsonFile(read, 'config.json');
  if (config === null) throw new HfFolderError('the folder has no config.json (a Hugging Face model folder holds config.json and its weights)');
  return config;
}

/** Every tensor of the folder's weights, each finite: one safetensors file, or the shards its index names (each read once). */
export async function readHfWeights(read: FolderReader): Promise<Map<string, DecodedTensor>> {
  const decode = async (name: string) => {
    const bytes = await read(name);
    if (bytes === null) return null;
    let tensors: Map<string, DecodedTensor>;
    try {
      tensors = decodeSafetensors(bytes).tensors;
    } catch (e) {
      throw new HfFolderError(`${name}: ${(e as Error).message}`);
    }
    const nonFinite = nonFiniteTensor(tensors);
    if (nonFinite !== null) throw new HfFolderError(`${name}: ${nonFinite}`);
    return tensors;
  };
  const single = await decode('model.safetensors');
  if (single !== null) return single;
  const index = await jsonFile(read, 'model.safetensors.index.json');
  if (index === null) throw new HfFolderError('the folder has neither model.safetensors nor model.safetensors.index.json (only safetensors weights are read)');
  if (!isObject(index) || !isObject(index.weight_map))
    throw new HfFolderError('model.safetensors.index.json: weight_map must be an object of tensor name → shard file');
  const map = index.weight_map;
  const tensors = new Map<string, DecodedTensor>();
  for (const shard of [...new Set(Object.values(map))]) {
    if (typeof shard !== 'string' || shard.includes('/') || shard.includes('\\')) {
      throw new HfFolderError(`model.safetensors.index.json: shard ${JSON.stringify(shard)} must be a file name in the folder`);
    }
    const got = await decode(shard);
    if (got === null) throw new HfFolderError(`model.safetensors.index.json names ${shard}, which the folder lacks`);
    for (const [name, t] of got) {
      if (map[name] !== shard) throw new HfFolderError(`${shard} holds ${name}, which the index puts in ${JSON.stringify(map[name])}`);
      tensors.set(name, t);
    }
  }
  for (const name of Object.keys(map))
    if (!tensors.has(name)) throw new HfFolderError(`model.safetensors.index.json names ${name}, which ${map[name] as string} lacks`);
  return tensors;
}
