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

/**
 * The one check of a tokenizer.json this project reads (checkpoints, imports, the tokenizer
 * itself): a JSON object whose `model.vocab` maps exactly this vocabulary's pieces to their ids
 * (no piece missing, none extra, so no id given twice), and whose `added_tokens`, when present,
 * name each piece by its own id. The error names the file (`where`) and the field.
 */
export function tokenizerJsonError(json: unknown, where = 'tokenizer.json'): string | null {
  const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
  const show = (v: unknown) => (JSON.stringify(v) ?? String(v)).slice(0, 80);
  if (!isObject(json)) return `${where} must hold a JSON object`;
  const model = json.model;
  if (!isObject(model)) return `${where}: model must be an object with the vocabulary (got ${show(model)})`;
  const vocab = model.vocab;
  if (!isObject(vocab)) return `${where}: model.vocab must be an object mapping each token to its id (got ${show(vocab)})`;
  const ours = new Map(VOCAB.map((piece, id) => [piece, id]));
  for (const [piece, id] of Object.entries(vocab)) {
    if (!ours.has(piece)) return `${where}: model.vocab has the token ${show(piece)} (id ${show(id)}), which is not in this vocabulary`;
    if (id !== ours.get(piece)) return `${where}: token ${show(piece)} has id ${show(id)}, expected ${ours.get(piece)}`;
  }
  const missing = VOCAB.filter((piece) => !Object.hasOwn(vocab, piece));
  if (missing.length > 0)
    return `${where}: model.vocab lacks ${missing.length} token${missing.length > 1 ? 's' : ''} of this vocabulary (${missing.slice(0, 5).map(show).join(', ')}${missing.length > 5 ? ', …' : ''})`;
  const added = json.added_tokens;
  if (added !== undefined && added !== null) {
    if (!Array.isArray(added)) return `${where}: added_tokens must be a list (got ${show(added)})`;
    for (const [i, t] of added.entries()) {
      if (!isObject(t) || typeof t.content !== 'string' || !Number.isInteger(t.id))
        return `${where}: added_tokens[${i}] must be {id, content, …} (got ${show(t)})`;
      if (VOCAB[t.id as number] !== t.content)
        return `${where}: added_tokens[${i}] gives ${show(t.content)} the id ${t.id as number}, which is ${VOCAB[t.id as number] === undefined ? 'outside this vocabulary' : `${show(VOCAB[t.id as number])}'s`}`;
    }
  }
  return null;
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
