/**
 * A byte-level BPE trained here, deterministically, as a Hugging Face tokenizer.json that both
 * `tokenizers` (transformers' AutoTokenizer) and @xenova/transformers read to the same ids.
 *
 * Text is split on the added tokens first, then by PRE_TOKENIZE (Qwen2's split without its
 * case-insensitive contractions: words with one leading non-letter, each digit alone, punctuation
 * runs, newlines, spaces), then each piece's UTF-8 bytes become GPT-2's printable characters. The
 * alphabet holds all 256 bytes, so any text encodes and decodes back unchanged (no normalizer, no
 * unknown token). Training merges the most frequent adjacent pair over the pieces of the corpus
 * until the vocabulary is full, ties broken by the pair's text, so the same corpus gives the same
 * file on every machine. Digits never merge: each is its own piece, as arithmetic wants.
 */

/** Qwen2's pre-tokenizer pattern less `(?i:…)` (JavaScript and Oniguruma read it alike). */
export const PRE_TOKENIZE = "'s|'t|'re|'ve|'m|'ll|'d|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** GPT-2's bytes_to_unicode: every byte as a printable character (printable bytes stay themselves). */
export const BYTE_CHARS: readonly string[] = (() => {
  const keep = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let next = 256;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(keep(b) ? b : next++));
})();

export interface AddedToken {
  content: string;
  /** Special tokens are dropped by a decode that skips them; the others (tool tags) are kept. */
  special: boolean;
}

export interface ByteLevelBpe {
  /** Token → id: the added tokens first, then the 256 byte characters, then one token per merge. */
  vocab: Map<string, number>;
  /** Merges by rank, as "left right". */
  merges: string[];
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The corpus's pieces with their counts: text split on the added tokens, then pre-tokenized, as byte characters. */
function pieceCounts(texts: readonly string[], added: readonly AddedToken[]): Map<string, number> {
  const splitAdded = new RegExp(added.map((t) => escapeRegExp(t.content)).join('|'), 'g');
  const pre = new RegExp(PRE_TOKENIZE, 'gu');
  const utf8 = new TextEncoder();
  const counts = new Map<string, number>();
  for (const text of texts) {
    for (const part of added.length > 0 ? text.split(splitAdded) : [text]) {
      for (const m of part.matchAll(pre)) {
        const piece = Array.from(utf8.encode(m[0]), (b) => BYTE_CHARS[b]).join('');
        counts.set(piece, (counts.get(piece) ?? 0) + 1);
      }
    }
  }
  return counts;
}

/**
 * Trains merges on `texts` until the vocabulary holds `vocabSize` tokens or no pair occurs
 * `minCount` times: a rarer pair (two random names, a run of filler) is left as its parts, which
 * the model can read, rather than made a token it sees a few times.
 */
export function trainByteLevelBpe(texts: readonly string[], added: readonly AddedToken[], vocabSize: number, minCount = 2): ByteLevelBpe {
  const vocab = new Map<string, number>();
  for (const t of added) vocab.set(t.content, vocab.size);
  for (const c of BYTE_CHARS) vocab.set(c, vocab.size);
  const words = [...pieceCounts(texts, added)].map(([piece, count]) => ({ symbols: [...piece], count }));
  const merges: string[] = [];
  while (vocab.size < vocabSize) {
    const pairs = new Map<string, number>();
    for (const w of words) {
      for (let i = 0; i + 1 < w.symbols.length; i++) {
        const key = `${w.symbols[i]} ${w.symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + w.count);
      }
    }
    let best = '';
    let bestCount = minCount - 1;
    for (const [key, n] of pairs) if (n > bestCount || (n === bestCount && best !== '' && key < best)) [best, bestCount] = [key, n];
    if (best === '') break;
    const [left, right] = best.split(' ');
    const merged = left + right;
    merges.push(best);
    // Two pairs may spell one token (a·bc and ab·c): the later is a second route to it, not a new token.
    if (!vocab.has(merged)) vocab.set(merged, vocab.size);
    for (const w of words) {
      const s = w.symbols;
      for (let i = 0; i + 1 < s.length; i++) if (s[i] === left && s[i + 1] === right) s.splice(i, 2, merged);
    }
  }
  return { vocab, merges };
}

/** The tokenizer.json of a trained BPE (tokenizers' own layout; merges as "a b" strings, which both libraries read). */
export function byteLevelBpeJson(bpe: ByteLevelBpe, added: readonly AddedToken[]): Record<string, unknown> {
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added.map((t) => ({
      id: bpe.vocab.get(t.content),
      content: t.content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: t.special,
    })),
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: PRE_TOKENIZE }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      ],
    },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: Object.fromEntries(bpe.vocab),
      merges: bpe.merges,
    },
  };
}
