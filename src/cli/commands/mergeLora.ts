/**
 * A LoRA adapter merged into its base model, W + (α / r)·B·A for each adapted layer ((B·A)ᵀ for
 * GPT-2's Conv1D weights; PEFT's merge_and_unload), written as a Hugging Face folder of the model's own format: config.json,
 * model.safetensors, and the base folder's tokenizer and generation files copied beside them.
 */
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { defineCommand } from '../command';
import { UsageError } from '../args';
import { BACKEND_FLAG, setupBackend } from '../setup';
import { MODEL_FLAG, WEIGHTS_FLAG, loadAdapter, loadTextModel } from '../hfModel';
import { encodeSafetensors } from '../../core/io/safetensors';
import { decoderTensorSpecs } from '../../core/model/decoder';

/** Files of a model folder besides its weights that a merged folder keeps. */
const KEPT = [
  'config.json',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'chat_template.jinja',
  'vocab.json',
  'merges.txt',
];

export const mergeLora = defineCommand(
  'merge-lora',
  "Merge a PEFT LoRA adapter (a train-lm save's) into its base model and write the result as a Hugging Face folder transformers loads.",
  {
    model: MODEL_FLAG,
    adapter: { type: 'string', dir: true, required: true, help: 'the PEFT adapter folder: adapter_config.json, adapter_model.safetensors' },
    out: { type: 'string', required: true, help: 'the folder to write (must not exist, or be empty)' },
    backend: BACKEND_FLAG,
    weights: WEIGHTS_FLAG,
  },
  async (f) => {
    if (existsSync(f.out) && (await readdir(f.out)).length > 0) throw new UsageError(`--out ${f.out} is not empty`);
    await setupBackend(f.backend);
    const { model, read } = await loadTextModel('model', f.model, f.weights, false);
    const lora = await loadAdapter('adapter', f.adapter, model);
    const merged = await lora.merged(model.params);
    await mkdir(f.out, { recursive: true });
    await writeFile(
      join(f.out, 'model.safetensors'),
      encodeSafetensors(decoderTensorSpecs(model.config).map(({ name, shape }) => ({ name, shape, data: merged.get(name) as Float32Array }))),
    );
    for (const name of KEPT) {
      const bytes = await read(name);
      if (bytes !== null) await writeFile(join(f.out, name), bytes);
    }
    console.log(`merged ${lora.params.size / 2} adapted layers into ${f.out}`);
    lora.dispose();
    model.params.forEach((t) => t.dispose());
  },
);
