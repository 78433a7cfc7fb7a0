/**
 * A Hugging Face model folder before it is written: the parsed JSON files and the weights by name,
 * so that a maker (`init --family`, the tests' hostile variants) can build or change any part, and
 * the files it becomes. Weights are written float32 with the `format: pt` metadata transformers
 * reads.
 */
import { encodeSafetensors } from './safetensors';

export interface FolderParts {
  config: Record<string, unknown>;
  tokenizer: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  /** chat_template.jinja, when the folder has one. */
  jinja?: string;
  /** generation_config.json, when the folder has one. */
  generationConfig?: Record<string, unknown>;
  /** Weights by name; a variant may change values in place. */
  tensors: Map<string, { shape: number[]; data: Float32Array }>;
}

/** The folder's files by name, JSON indented one space. */
export function folderFiles(parts: FolderParts): { name: string; bytes: Uint8Array }[] {
  const json = (name: string, v: unknown) => ({ name, bytes: new TextEncoder().encode(JSON.stringify(v, null, 1)) });
  return [
    json('config.json', parts.config),
    json('tokenizer.json', parts.tokenizer),
    json('tokenizer_config.json', parts.tokenizerConfig),
    ...(parts.generationConfig !== undefined ? [json('generation_config.json', parts.generationConfig)] : []),
    ...(parts.jinja !== undefined ? [{ name: 'chat_template.jinja', bytes: new TextEncoder().encode(parts.jinja) }] : []),
    {
      name: 'model.safetensors',
      bytes: encodeSafetensors(
        [...parts.tensors].map(([name, t]) => ({ name, ...t })),
        { format: 'pt' },
      ),
    },
  ];
}
