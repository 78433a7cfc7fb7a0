/**
 * What `train --model` and `sft --model` share for a Hugging Face model: the LoRA flags (rank 0 trains
 * every weight), and a resumable run directory whose saves hold the PEFT adapter (or the weights in
 * the model's own format) with the optimizer and the state.
 */
import * as tf from '@tensorflow/tfjs';
import type { RunConfig } from '../core/runConfig';
import { usageErrors } from './args';
import { type LoadedTextModel, adapterRunWeights, fullRunWeights } from './hfModel';
import { RunDir, type RunState, type RunWeights } from './runDir';
import { Lora, type LoraConfig } from '../core/model/lora';
import type { AdamW } from '../core/optim/adamw';
import { type TextModel, type TextPolicy, fullPolicy, loraPolicy, textTrainingOf } from '../core/policyModel';

const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'chat_template.jinja', 'generation_config.json'];

/** What trains: every weight (`--lora-r 0`) or LoRA adapters of the named layers, checked against the model. */
export const trainingOf = (rc: Pick<RunConfig, 'loraR' | 'loraAlpha' | 'loraTargets'>, model: TextModel): { full: boolean; lora: LoraConfig } =>
  usageErrors(() => textTrainingOf(rc, model.config), { loraTargets: '--lora-targets' });

export interface TextPolicyRun {
  policy: TextPolicy;
  runDir: RunDir<Lora> | RunDir<Map<string, Float32Array>>;
  /** Writes a save: the adapter (or every weight), the optimizer, the state and the new rows. */
  save(optimizer: AdamW, state: RunState, rows: Parameters<RunDir<Lora>['save']>[3]): Promise<void>;
}

/** Opens (or resumes) the run directory `out` of a text model's run, with the policy it trains, restored from the last save; `modelDir` is the adapter's base. */
export async function openTextPolicyRun(
  out: string,
  kind: RunState['kind'],
  loaded: Pick<LoadedTextModel, 'model' | 'read'>,
  training: { full: boolean; lora: LoraConfig },
  modelDir: string,
  seed: number,
): Promise<TextPolicyRun> {
  const { model, read } = loaded;
  if (training.full) {
    const configJson = (await read('config.json')) as Uint8Array;
    // The tokenizer's files go with the weights: each save is a folder the commands and transformers load.
    const beside: [string, Uint8Array][] = [];
    for (const name of TOKENIZER_FILES) {
      const bytes = await read(name);
      if (bytes !== null) beside.push([name, bytes]);
    }
    const dir = await RunDir.open(out, kind, fullRunWeights(model, configJson, beside) as RunWeights<Map<string, Float32Array>>);
    const policy = fullPolicy(model);
    if (dir.saved) {
      const saved = dir.saved.weights;
      for (const [k, v] of policy.trainable) tf.tidy(() => v.assign(tf.tensor(saved.get(k)!, v.shape)));
      saved.clear();
    }
    return {
      policy,
      runDir: dir,
      save: async (optimizer, state, rows) => {
        const w = new Map<string, Float32Array>();
        for (const [k, v] of policy.trainable) w.set(k, (await v.data()) as Float32Array);
        await dir.save(w, optimizer, state, rows);
      },
    };
  }
  const dir = await RunDir.open(out, kind, adapterRunWeights(model, training.lora, modelDir));
  const adapters = dir.saved ? dir.saved.weights : Lora.init(model.config, training.lora, seed);
  return { policy: loraPolicy(model, adapters), runDir: dir, save: (optimizer, state, rows) => dir.save(adapters, optimizer, state, rows) };
}
