/**
 * The tokenizer and chat template of a model made from scratch for the tasks (`init --family`):
 * a byte-level BPE (byteLevelBpe.ts) trained on the protocol's rendered chats (protocolCorpus.ts),
 * with ChatML's markers as special tokens and the tool tags as added tokens that a decode keeps
 * (as Qwen2 has them), and a ChatML template that renders tools and tool responses the way the
 * text protocol reads them (Qwen2.5's layout, with the tool list one line a tool).
 *
 * The template renders the same text in transformers' Jinja and in @huggingface/jinja: plain
 * string concatenation, no filters (the latter has no `tojson`).
 */
import { type AddedToken, byteLevelBpeJson, trainByteLevelBpe } from './byteLevelBpe';
import { ChatTemplate } from './chatTemplate';
import { PROMPTS_FIELD, type PromptSetName } from '../protocol/prompts';
import { corpusTools, protocolCorpusChats } from './protocolCorpus';

export const PAD_TOKEN = '<|endoftext|>';
export const IM_START = '<|im_start|>';
export const IM_END = '<|im_end|>';

/** Added tokens, ids 0…6: ChatML's three special tokens, then the tool tags (kept by a decode that skips special tokens). */
export const PROTOCOL_ADDED_TOKENS: readonly AddedToken[] = [
  { content: PAD_TOKEN, special: true },
  { content: IM_START, special: true },
  { content: IM_END, special: true },
  { content: '<tool_call>', special: false },
  { content: '</tool_call>', special: false },
  { content: '<tool_response>', special: false },
  { content: '</tool_response>', special: false },
];

/**
 * At most this many tokens (7 added, 256 bytes, the rest merges), and no merge of a pair seen fewer
 * than PROTOCOL_MIN_PAIR_COUNT times: the corpus's frequent words and tags merge (739 tokens) and
 * the multihop names and filler, random pairs seen a few times each, stay as their letters.
 */
export const PROTOCOL_VOCAB_SIZE = 1024;
export const PROTOCOL_MIN_PAIR_COUNT = 32;

const TOOLS = "{{ '<tools>' }}{% for tool in tools %}{{ '\\n' + tool.function.name + ': ' + tool.function.description }}{% endfor %}{{ '\\n</tools>' }}";
/**
 * ChatML with tools: the tool list goes at the end of the system message (or in a system message
 * of its own), one `name: description` line a tool; consecutive tool messages are one user turn of
 * `<tool_response>` blocks, as Qwen2.5 renders them.
 */
export const PROTOCOL_CHAT_TEMPLATE = [
  `{% if tools and (messages | length == 0 or messages[0].role != 'system') %}{{ '${IM_START}system\\n' }}${TOOLS}{{ '${IM_END}\\n' }}{% endif %}`,
  '{% for message in messages %}',
  "{% if message.role == 'tool' %}",
  `{% if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{ '${IM_START}user' }}{% endif %}`,
  "{{ '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}",
  `{% if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{ '${IM_END}\\n' }}{% endif %}`,
  '{% else %}',
  `{{ '${IM_START}' + message.role + '\\n' + message.content }}`,
  `{% if loop.first and message.role == 'system' and tools %}{{ '\\n\\n' }}${TOOLS}{% endif %}`,
  `{{ '${IM_END}\\n' }}`,
  '{% endif %}',
  '{% endfor %}',
  `{% if add_generation_prompt %}{{ '${IM_START}assistant\\n' }}{% endif %}`,
].join('');

/** The corpus's chats rendered by the template. */
export function protocolCorpusTexts(): string[] {
  const template = ChatTemplate.parse(PROTOCOL_CHAT_TEMPLATE, 'protocol chat template');
  return protocolCorpusChats().map((c) => {
    const tools = corpusTools(c);
    return template.render({ messages: c.messages, add_generation_prompt: false, ...(tools ? { tools } : {}) });
  });
}

let trained: Record<string, unknown> | null = null;

/** tokenizer.json: the BPE trained on the rendered corpus (once a process; the same file every time). */
export function protocolTokenizerJson(): Record<string, unknown> {
  trained ??= byteLevelBpeJson(
    trainByteLevelBpe(protocolCorpusTexts(), PROTOCOL_ADDED_TOKENS, PROTOCOL_VOCAB_SIZE, PROTOCOL_MIN_PAIR_COUNT),
    PROTOCOL_ADDED_TOKENS,
  );
  return structuredClone(trained);
}

/** tokenizer_config.json: the template, eos `<|im_end|>` (a turn's end), pad `<|endoftext|>`, no bos (`<|im_start|>` opens every context), and the prompt set. */
export function protocolTokenizerConfig(maxPositions: number, prompts: PromptSetName): Record<string, unknown> {
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    model_max_length: maxPositions,
    eos_token: IM_END,
    pad_token: PAD_TOKEN,
    bos_token: null,
    unk_token: null,
    clean_up_tokenization_spaces: false,
    chat_template: PROTOCOL_CHAT_TEMPLATE,
    // The prompts the model is framed in (protocol/prompts.ts).
    [PROMPTS_FIELD]: prompts,
  };
}
