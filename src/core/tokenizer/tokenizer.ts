/**
 * The project's tokenizer: the HF tokenizer.json loaded through @xenova/transformers
 * (remote loading off), plus a direct id→piece table for the hot decode path.
 *
 * Encoding goes through the HF library so that what we ship is what others load; it is
 * checked against our own table at load time, so a tokenizer.json that disagrees with
 * the vocabulary is rejected rather than silently used.
 */
import { PreTrainedTokenizer, env } from '@xenova/transformers';
import { buildTokenizerConfig, buildTokenizerJson, tokenizerJsonError } from './tokenizerJson';
import { CHAR_TOKENS, SPECIAL_TOKENS, VOCAB, VOCAB_SIZE } from './vocab';

env.allowRemoteModels = false;
env.allowLocalModels = false;

const CHARS = new Set(CHAR_TOKENS);

export class Tokenizer {
  readonly vocabSize = VOCAB_SIZE;
  private readonly hf: PreTrainedTokenizer;

  private constructor(hf: PreTrainedTokenizer) {
    this.hf = hf;
  }

  /** Load from the content of a tokenizer.json (read from a local file or a served URL). */
  static fromJson(json: unknown): Tokenizer {
    checkMatchesVocab(json);
    const hf = new PreTrainedTokenizer(json as object, buildTokenizerConfig());
    const tok = new Tokenizer(hf);
    const probe = 'ab 12+3*(4-5)=?<spawn>x<b32><join><eos>';
    const ids = tok.encode(probe);
    if (tok.decode(ids) !== probe) throw new Error('tokenizer.json does not round-trip the vocabulary');
    return tok;
  }

  /** The tokenizer for the built-in vocabulary. */
  static builtin(): Tokenizer {
    return Tokenizer.fromJson(buildTokenizerJson());
  }

  /**
   * Text → ids. Special tokens are written `<name>`. Characters outside the vocabulary
   * are an error naming the character and its position (never silently dropped).
   */
  encode(text: string): number[] {
    const plain = text.replace(SPECIAL_PATTERN, '');
    for (let i = 0; i < plain.length; i++) {
      if (!CHARS.has(plain[i])) {
        throw new Error(
          `text contains ${JSON.stringify(plain[i])}, which is not in the vocabulary (allowed: a-z, 0-9, special tokens and ${JSON.stringify(" +-*()=?.,:#'_>\n")})`,
        );
      }
    }
    return this.hf.encode(text, null, { add_special_tokens: false });
  }

  /** ids → text, special tokens spelled `<name>`. Unknown ids are an error. */
  decode(ids: readonly number[]): string {
    let s = '';
    for (const id of ids) s += pieceOf(id);
    return s;
  }
}

const SPECIAL_PATTERN = new RegExp(SPECIAL_TOKENS.map((t) => t.replace(/[<>|]/g, '\\$&')).join('|'), 'g');

export function pieceOf(id: number): string {
  const p = VOCAB[id];
  if (p === undefined) throw new Error(`token id ${id} is outside the vocabulary (0..${VOCAB_SIZE - 1})`);
  return p;
}

function checkMatchesVocab(json: unknown): void {
  const error = tokenizerJsonError(json);
  if (error) throw new Error(error);
}
