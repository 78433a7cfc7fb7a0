/**
 * A tiny random Qwen2 model folder written without Python (config.json, model.safetensors with
 * weights drawn as `init --family` draws them, the playground vocabulary's tokenizer.json,
 * tokenizer_config.json with a ChatML-style template; written by src/runtime/node/folderWriter.ts), a
 * PEFT adapter for it, and the hostile and broken variants of both that a folder from anywhere may
 * be (issue 49): each variant names the file its refusal must name.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FolderParts } from '../src/core/io/hfFolderParts';
import { encodeSafetensors } from '../src/core/io/safetensors';
import { decoderConfigFromHf } from '../src/core/model/decoder';
import { initHfTensors } from '../src/core/model/hfInit';
import { Lora, peftAdapterConfig } from '../src/core/model/lora';
import { buildTokenizerConfig, buildTokenizerJson } from '../src/core/tokenizer/tokenizerJson';
import { VOCAB } from '../src/core/tokenizer/vocab';
import { writeHfFolder } from '../src/runtime/node/folderWriter';

/** ChatML over the playground vocabulary (every character of it is a token). */
export const TINY_TEMPLATE =
  "{% for message in messages %}{{ '<root>' + message['role'] + ': ' + message['content'] + '<sep>' }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}";

export function tinyFolderParts(): FolderParts {
  const config = {
    model_type: 'qwen2',
    architectures: ['Qwen2ForCausalLM'],
    vocab_size: VOCAB.length,
    hidden_size: 16,
    intermediate_size: 24,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    max_position_embeddings: 512,
    tie_word_embeddings: true,
  };
  const tensors = new Map(initHfTensors(config, 49).map(({ name, ...t }) => [name, t]));
  return {
    config,
    tokenizer: buildTokenizerJson() as unknown as Record<string, unknown>,
    tokenizerConfig: { ...buildTokenizerConfig(), chat_template: TINY_TEMPLATE },
    tensors,
  };
}

/** The tiny folder, changed by `change`, written to `dir`. */
export async function writeTinyHfFolder(dir: string, change: (parts: FolderParts) => void = () => undefined): Promise<void> {
  const parts = tinyFolderParts();
  change(parts);
  await writeHfFolder(dir, parts);
}

/** A PEFT adapter (r 2 on q_proj and v_proj) for the tiny folder; `nan` fills layer 0's q_proj lora_B (16 × 2) with NaN. */
export async function writeTinyAdapter(dir: string, nan = false): Promise<void> {
  const config = decoderConfigFromHf(tinyFolderParts().config);
  const l = { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] };
  const lora = Lora.init(config, l, 3);
  const tensors = await lora.peftTensors();
  lora.dispose();
  for (const t of tensors) {
    if (t.name.endsWith('layers.0.self_attn.q_proj.lora_B.weight')) t.data = t.data.map(() => (nan ? NaN : 0.01));
  }
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'adapter_config.json'), JSON.stringify(peftAdapterConfig(l, config, null)));
  await writeFile(join(dir, 'adapter_model.safetensors'), encodeSafetensors(tensors));
}

const vocabOf = (p: FolderParts) => (p.tokenizer.model as { vocab: Record<string, number> }).vocab;

export interface HostileFolder {
  name: string;
  /** Which case of issue 49 it is. */
  issueCase: number;
  change: (p: FolderParts) => void;
  /** What the refusal says (it names the file and the field). */
  refusal: RegExp;
}

export const HOSTILE_FOLDERS: readonly HostileFolder[] = [
  {
    name: 'a template looping 10⁹ times',
    issueCase: 1,
    change: (p) => void (p.tokenizerConfig.chat_template = '{% for i in range(1000000000) %}{{ i }}{% endfor %}'),
    refusal: /tokenizer_config\.json: chat_template: asks range\(\) for 1,000,000,000 numbers, more than 100,000/,
  },
  {
    name: 'two nested loops of 10⁵',
    issueCase: 1,
    change: (p) => void (p.tokenizerConfig.chat_template = '{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}'),
    refusal: /tokenizer_config\.json: chat_template: takes more than [\d,]+ (steps|ms)/,
  },
  {
    name: 'num_hidden_layers 10⁸',
    issueCase: 2,
    change: (p) => void (p.config.num_hidden_layers = 1e8),
    refusal: /config\.json: num_hidden_layers must be an integer in \[1, 512\] \(got 100,000,000\)/,
  },
  {
    name: 'num_hidden_layers 10⁷',
    issueCase: 2,
    change: (p) => void (p.config.num_hidden_layers = 1e7),
    refusal: /config\.json: num_hidden_layers must be an integer in \[1, 512\]/,
  },
  {
    name: 'more layers than the weights hold',
    issueCase: 2,
    change: (p) => void (p.config.num_hidden_layers = 3),
    refusal: /the weights lack model\.layers\.2\./,
  },
  {
    name: 'a token id past the embedding',
    issueCase: 3,
    change: (p) => void (vocabOf(p).a = 5000),
    refusal: new RegExp(`tokenizer\\.json: the token "a" has the id 5000, past the embedding's ${VOCAB.length} rows \\(config\\.json vocab_size`),
  },
  {
    name: 'a template that does not parse',
    issueCase: 4,
    change: (p) => void (p.tokenizerConfig.chat_template = "{{ messages[0]['content'] "),
    refusal: /tokenizer_config\.json: chat_template: cannot be parsed/,
  },
  {
    name: 'a template with an unknown filter',
    issueCase: 4,
    change: (p) => void (p.tokenizerConfig.chat_template = '{{ messages | shuffle }}'),
    refusal: /tokenizer_config\.json: chat_template: cannot be rendered \(Unknown ArrayValue filter: shuffle\)/,
  },
  {
    name: 'a template doubling a string 40 times',
    issueCase: 4,
    change: (p) => void (p.tokenizerConfig.chat_template = "{% set s = 'ab' %}{% for i in range(40) %}{% set s = s + s %}{% endfor %}{{ s }}"),
    refusal: /tokenizer_config\.json: chat_template: makes a string of [\d,]+ characters, more than 4,000,000/,
  },
  {
    name: 'NaN weights',
    issueCase: 5,
    change: (p) => (p.tensors.get('model.layers.0.self_attn.q_proj.weight') as { data: Float32Array }).data.fill(NaN, 0, 64),
    refusal: /model\.safetensors: model\.layers\.0\.self_attn\.q_proj\.weight holds 64 values that are not finite \(the first, index 0, is NaN\)/,
  },
  {
    name: 'an empty tokenizer.json',
    issueCase: 6,
    change: (p) => void (p.tokenizer = {}),
    refusal: /tokenizer\.json: model must be an object with the type and the vocabulary \(got undefined\)/,
  },
  {
    name: 'a vocabulary given as a list',
    issueCase: 6,
    change: (p) => void ((p.tokenizer.model as { vocab: unknown }).vocab = Object.keys(vocabOf(p))),
    refusal: /tokenizer\.json: model\.vocab of a WordLevel model must be an object mapping each token to its id/,
  },
  {
    name: 'an unknown model type',
    issueCase: 6,
    change: (p) => void ((p.tokenizer.model as { type: string }).type = 'Magic'),
    refusal: /tokenizer\.json: model\.type must be one of BPE, WordPiece, WordLevel, Unigram \(got "Magic"\)/,
  },
  {
    name: 'a negative id',
    issueCase: 6,
    change: (p) => void (vocabOf(p).b = -3),
    refusal: /tokenizer\.json: model\.vocab\["b"\] must be an integer in \[0, \d+\] \(got -3\)/,
  },
  {
    name: 'an id given twice',
    issueCase: 6,
    change: (p) => void (vocabOf(p).b = vocabOf(p).a),
    refusal: /tokenizer\.json: model\.vocab gives "b" the id \d+, which "a" already has/,
  },
  {
    name: 'an eos token outside the vocabulary',
    issueCase: 6,
    change: (p) => void (p.tokenizerConfig.eos_token = '<|im_end|>'),
    refusal: /tokenizer_config\.json: eos_token "<\|im_end\|>" is not a token of tokenizer\.json/,
  },
];
