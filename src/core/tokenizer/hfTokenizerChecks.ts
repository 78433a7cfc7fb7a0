/**
 * The checks a Hugging Face tokenizer.json and tokenizer_config.json pass before the tokenizer
 * library reads them: a model of a type the library implements, a vocabulary of the shape that
 * type writes, ids that are non-negative integers given once, added tokens with ids, and special
 * tokens (eos, bos, …) that are in the vocabulary. What the tokenizer can emit is then known: its
 * largest id, which the model's embedding must have a row for (hfTextModel.ts). Every message
 * names the file and the field.
 */
import { HfFolderError } from '../io/hfFolder';

/** The model types @xenova/transformers implements (WordLevel through its plain vocabulary lookup). */
export const TOKENIZER_MODEL_TYPES = ['BPE', 'WordPiece', 'WordLevel', 'Unigram'] as const;

/** tokenizer_config.json's special-token fields, as transformers hands them to chat templates. */
export const SPECIAL_TOKEN_FIELDS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const;

/** Vocabularies past this are not tokenizers (the largest real ones hold about 260,000 tokens). */
export const MAX_TOKENIZER_IDS = 1 << 22;

export interface TokenizerVocabulary {
  /** Every token string the tokenizer knows (vocabulary and added tokens). */
  tokens: Set<string>;
  /** The largest id it can emit. */
  maxId: number;
  /** The token holding that id. */
  maxIdToken: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const show = (v: unknown) => (JSON.stringify(v) ?? String(v)).slice(0, 60);
const fail = (message: string): never => {
  throw new HfFolderError(`tokenizer.json: ${message}`);
};

function checkId(id: unknown, field: string): number {
  if (!(typeof id === 'number' && Number.isInteger(id) && id >= 0 && id < MAX_TOKENIZER_IDS))
    fail(`${field} must be an integer in [0, ${MAX_TOKENIZER_IDS - 1}] (got ${show(id)})`);
  return id as number;
}

/** The vocabulary of a parsed tokenizer.json, after checking its model, ids and added tokens. */
export function tokenizerVocabulary(json: Record<string, unknown>): TokenizerVocabulary {
  const model = json.model;
  if (!isObject(model)) fail(`model must be an object with the type and the vocabulary (got ${show(model)})`);
  const m = model as Record<string, unknown>;
  // Files written before `type` was required carry a vocabulary alone; the library reads those as WordLevel.
  const type = m.type ?? 'WordLevel';
  if (!(TOKENIZER_MODEL_TYPES as readonly unknown[]).includes(type)) fail(`model.type must be one of ${TOKENIZER_MODEL_TYPES.join(', ')} (got ${show(type)})`);
  const tokens = new Set<string>();
  const owner = new Map<number, string>();
  let maxId = -1;
  let maxIdToken = '';
  const add = (token: string, id: number, field: string) => {
    const before = owner.get(id);
    if (before !== undefined && before !== token) fail(`${field} gives ${show(token)} the id ${id}, which ${show(before)} already has`);
    owner.set(id, token);
    tokens.add(token);
    if (id > maxId) [maxId, maxIdToken] = [id, token];
  };
  if (type === 'Unigram') {
    if (!Array.isArray(m.vocab)) fail(`model.vocab of a Unigram model must be a list of [token, score] (got ${show(m.vocab)})`);
    if ((m.vocab as unknown[]).length > MAX_TOKENIZER_IDS) fail(`model.vocab holds ${(m.vocab as unknown[]).length} tokens, more than ${MAX_TOKENIZER_IDS}`);
    (m.vocab as unknown[]).forEach((entry, i) => {
      if (!(Array.isArray(entry) && typeof entry[0] === 'string' && typeof entry[1] === 'number' && Number.isFinite(entry[1])))
        fail(`model.vocab[${i}] must be [token, score] (got ${show(entry)})`);
      add((entry as [string, number])[0], i, `model.vocab[${i}]`);
    });
  } else {
    if (!isObject(m.vocab)) fail(`model.vocab of a ${String(type)} model must be an object mapping each token to its id (got ${show(m.vocab)})`);
    for (const [token, id] of Object.entries(m.vocab as Record<string, unknown>)) add(token, checkId(id, `model.vocab[${show(token)}]`), 'model.vocab');
  }
  const added = json.added_tokens ?? [];
  if (!Array.isArray(added)) fail(`added_tokens must be a list (got ${show(added)})`);
  const addedIds = new Map<number, string>();
  (added as unknown[]).forEach((t, i) => {
    if (!(isObject(t) && typeof t.content === 'string')) fail(`added_tokens[${i}] must be {id, content, …} (got ${show(t)})`);
    const { content } = t as { content: string };
    const id = checkId((t as { id: unknown }).id, `added_tokens[${i}].id`);
    const before = addedIds.get(id);
    if (before !== undefined) fail(`added_tokens[${i}] gives ${show(content)} the id ${id}, which the added token ${show(before)} already has`);
    addedIds.set(id, content);
    tokens.add(content);
    if (id > maxId) [maxId, maxIdToken] = [id, content];
  });
  if (maxId < 0) fail('the vocabulary is empty');
  return { tokens, maxId, maxIdToken };
}

/** A special token of tokenizer_config.json as a string (a string, or {content}); null when not named. */
export function specialToken(config: Record<string, unknown>, field: string): string | null {
  const v = config[field];
  if (v === undefined || v === null) return null;
  if (typeof v === 'string') return v;
  if (isObject(v) && typeof v.content === 'string') return v.content;
  throw new HfFolderError(`tokenizer_config.json: ${field} must be a token string or {content} (got ${show(v)})`);
}

/** Every special token tokenizer_config.json names is a token of the vocabulary (an eos outside it could never stop a turn). */
export function checkSpecialTokens(config: Record<string, unknown>, vocabulary: TokenizerVocabulary): void {
  for (const field of SPECIAL_TOKEN_FIELDS) {
    const token = specialToken(config, field);
    if (token !== null && !vocabulary.tokens.has(token))
      throw new HfFolderError(`tokenizer_config.json: ${field} ${show(token)} is not a token of tokenizer.json (neither in model.vocab nor in added_tokens)`);
  }
}
