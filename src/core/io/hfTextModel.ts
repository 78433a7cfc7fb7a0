/**
 * A Hugging Face model folder as a text model (config, tokenizer with its chat template, weights):
 * the one loader the CLI (src/cli/hfModel.ts) and the page's engine
 * (src/runtime/engine/hfModel.ts) share, with how 16-bit weights are held. Each part is checked
 * before the next is read (docs/FORMATS.md lists the checks): the config's sizes against their
 * bounds, the tokenizer's files and its chat template, the tokenizer's ids against the embedding's
 * rows, then the weights (finite, every tensor the config needs with its shape).
 */
import * as tf from '@tensorflow/tfjs';
import { type WeightStorage, decoderConfigFromHf, decoderParamBytes, decoderParams, decoderTensorSpecs } from '../model/decoder';
import type { TextModel } from '../policyModel';
import { HfTokenizer } from '../tokenizer/hfTokenizer';
import { type FolderReader, HfFolderError, readHfConfig, readHfWeights } from './hfFolder';

/**
 * How a checkpoint's float16/bfloat16 matrices are held: `auto` keeps them 16-bit on WebGPU (GPU
 * memory is the limit there) and widens them to float32 elsewhere (on wasm widening each matrix
 * for every decoded token costs more than the product); `half` keeps them 16-bit on any backend;
 * `float32` widens them at load.
 */
export type WeightStoragePreference = 'auto' | 'half' | 'float32';
export const WEIGHT_STORAGE_PREFERENCES: readonly WeightStoragePreference[] = ['auto', 'half', 'float32'];

/** The storage a preference gives on a backend. */
export function weightStorage(preference: WeightStoragePreference, backend: string): WeightStorage {
  if (!(WEIGHT_STORAGE_PREFERENCES as readonly string[]).includes(preference)) {
    throw new Error(`weight storage ${JSON.stringify(preference)} is not one of ${WEIGHT_STORAGE_PREFERENCES.join(', ')}`);
  }
  return preference === 'half' || (preference === 'auto' && backend === 'webgpu') ? 'half' : 'float32';
}

export interface LoadedHfTextModel {
  model: TextModel;
  /** Parameters the config needs. */
  parameters: number;
  /** Bytes the weights take as held (16-bit matrices at 2 bytes a value). */
  heldBytes: number;
  /** Weight matrices held 16-bit. */
  halfTensors: number;
  loadMs: number;
}

/** The folder's model on the active backend, its 16-bit matrices held as `preference` says. */
export async function loadHfTextModel(read: FolderReader, preference: WeightStoragePreference = 'auto'): Promise<LoadedHfTextModel> {
  const storage = weightStorage(preference, tf.getBackend());
  const t0 = performance.now();
  const config = decoderConfigFromHf(await readHfConfig(read));
  const tokenizer = await HfTokenizer.fromFolder(read);
  const { maxId, maxIdToken } = tokenizer.vocabulary;
  if (maxId >= config.vocabSize) {
    throw new HfFolderError(
      `tokenizer.json: the token ${JSON.stringify(maxIdToken)} has the id ${maxId}, past the embedding's ${config.vocabSize} rows (config.json vocab_size ${config.vocabSize}): ids must be in [0, ${config.vocabSize - 1}]`,
    );
  }
  const params = decoderParams(config, await readHfWeights(read), storage);
  const held = decoderParamBytes(params);
  return {
    model: { config, params, tokenizer },
    parameters: decoderTensorSpecs(config).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0),
    heldBytes: held.bytes,
    halfTensors: held.halfTensors,
    loadMs: Math.round(performance.now() - t0),
  };
}
