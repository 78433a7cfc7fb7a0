/**
 * The vocabulary as a Hugging Face `tokenizer.json` (tokenizers library format).
 *
 * A WordLevel model over single characters: the pre-tokenizer isolates every character,
 * special tokens are `added_tokens` matched before that split, and the Fuse decoder joins
 * pieces without spaces. Loading it with HF `tokenizers` or @xenova/transformers gives
 * the same ids as our own table.
 */
import { SPECIAL_TOKENS, VOCAB } from './vocab';

export interface TokenizerJson {
  version: string;
  truncation: null;
  padding: null;
  added_tokens: {
    id: number;
    content: string;
    single_word: boolean;
    lstrip: boolean;
    rstrip: boolean;
    normalized: boolean;
    special: boolean;
  }[];
  normalizer: null;
  pre_tokenizer: { type: 'Split'; pattern: { Regex: string }; behavior: 'Isolated'; invert: boolean };
  post_processor: null;
  decoder: { type: 'Fuse' };
  model: { type: 'WordLevel'; vocab: Record<string, number>; unk_token: string };
}

export function buildTokenizerJson(): TokenizerJson {
  const vocab: Record<string, number> = {};
  VOCAB.forEach((piece, id) => {
    vocab[piece] = id;
  });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKENS.map((content, id) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: '[\\s\\S]' }, behavior: 'Isolated', invert: false },
    post_processor: null,
    decoder: { type: 'Fuse' },
    model: { type: 'WordLevel', vocab, unk_token: '<unk>' },
  };
}

/** Minimal tokenizer_config.json that HF's AutoTokenizer needs next to tokenizer.json. */
export function buildTokenizerConfig(): Record<string, unknown> {
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    model_max_length: 256,
    eos_token: '<eos>',
    pad_token: '<pad>',
    unk_token: '<unk>',
    clean_up_tokenization_spaces: false,
  };
}
