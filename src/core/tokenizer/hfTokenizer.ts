/**
 * A real model's tokenizer from its Hugging Face folder, through @xenova/transformers (remote loading
 * off): tokenizer.json, tokenizer_config.json (the tokenizer class, special tokens and, on the Hub's
 * models, the chat template) and, as transformers 5 saves it, chat_template.jinja beside them. The
 * class is picked as AutoTokenizer picks it (tokenizer_class without "Fast"), so Llama's and Qwen's
 * own rules apply; an unknown class uses the base tokenizer.
 */
import { AutoTokenizer, PreTrainedTokenizer } from '@xenova/transformers';
import { type FolderReader, HfFolderError, jsonFile } from '../io/hfFolder';

export interface ChatMessage {
  role: string;
  content: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export class HfTokenizer {
  private constructor(
    private readonly hf: PreTrainedTokenizer,
    /** The chat template the folder gives (tokenizer_config.json or chat_template.jinja); null: none. */
    readonly chatTemplate: string | null,
    /** tokenizer_config.json's eos_token (a string, or {content}); null: none named. */
    private readonly eosToken: string | null,
  ) {}

  static async fromFolder(read: FolderReader): Promise<HfTokenizer> {
    const json = async (name: string): Promise<Record<string, unknown> | null> => {
      const v = await jsonFile(read, name);
      if (v !== null && !isObject(v)) throw new HfFolderError(`${name}: must be a JSON object`);
      return v;
    };
    const tokenizer = await json('tokenizer.json');
    if (tokenizer === null) throw new HfFolderError('the folder has no tokenizer.json (only fast tokenizers are read)');
    const config = (await json('tokenizer_config.json')) ?? {};
    const jinja = await read('chat_template.jinja');
    const template = typeof config.chat_template === 'string' ? config.chat_template : jinja !== null ? new TextDecoder().decode(jinja) : null;
    const name = typeof config.tokenizer_class === 'string' ? config.tokenizer_class.replace(/Fast$/, '') : 'PreTrainedTokenizer';
    const mapping = (AutoTokenizer as unknown as { TOKENIZER_CLASS_MAPPING: Record<string, typeof PreTrainedTokenizer> }).TOKENIZER_CLASS_MAPPING;
    const Cls = mapping[name] ?? PreTrainedTokenizer;
    // tokenizers ≥ 0.20 writes BPE merges as pairs; @xenova/transformers 2 reads "a b" strings.
    const model = tokenizer.model;
    if (isObject(model) && Array.isArray(model.merges) && model.merges.some((m) => Array.isArray(m))) {
      if (model.merges.some((m) => Array.isArray(m) && m.some((part) => typeof part !== 'string' || part.includes(' ')))) {
        throw new HfFolderError('tokenizer.json: a BPE merge pair holds a piece with a space, which this tokenizer library cannot read');
      }
      tokenizer.model = { ...model, merges: model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m)) };
    }
    let hf: PreTrainedTokenizer;
    try {
      hf = new Cls(tokenizer, { ...config, ...(template !== null ? { chat_template: template } : {}) });
    } catch (e) {
      throw new HfFolderError(`tokenizer.json: ${(e as Error).message}`);
    }
    const eos = config.eos_token;
    const eosToken = typeof eos === 'string' ? eos : isObject(eos) && typeof eos.content === 'string' ? eos.content : null;
    return new HfTokenizer(hf, template, eosToken);
  }

  get vocabSize(): number {
    return (this.hf as unknown as { model: { vocab: unknown[] } }).model.vocab.length;
  }

  /** Text → ids, with the special tokens the tokenizer adds by itself (as `tokenizer(text)` in transformers). */
  encode(text: string, addSpecialTokens = true): number[] {
    return this.hf.encode(text, null, { add_special_tokens: addSpecialTokens });
  }

  decode(ids: readonly number[], skipSpecialTokens = false): string {
    // (The library refuses an empty list; no tokens are the empty text.)
    if (ids.length === 0) return '';
    return this.hf.decode([...ids], { skip_special_tokens: skipSpecialTokens });
  }

  /**
   * One token shown alone (a stepper's candidates): decoded, or where decoding it alone loses bytes
   * (part of a character byte-level BPE splits), the vocabulary's own string for it.
   */
  tokenString(id: number): string {
    const text = this.decode([id]);
    if (!text.includes('\uFFFD')) return text;
    const raw = (this.hf as unknown as { model: { vocab: unknown[] } }).model.vocab[id];
    return typeof raw === 'string' ? raw : text;
  }

  /**
   * Each token's share of the decoded text, special tokens included, one piece per token. Each
   * piece is decoded after the token before it and that token's text taken off, so a decoder
   * that drops the leading space of a decode (SentencePiece's) keeps it inside a text. A character
   * that byte-level BPE splits over several tokens belongs to the token that completes it (at
   * most four tokens wait; bytes still incomplete then show as decode shows them, U+FFFD); the
   * tokens before carry ''.
   */
  pieces(ids: readonly number[]): string[] {
    const out: string[] = [];
    let start = 0;
    for (let k = 0; k < ids.length; k++) {
      const context = start > 0 ? [ids[start - 1]] : [];
      const text = this.decode([...context, ...ids.slice(start, k + 1)]);
      if (text.endsWith('\uFFFD') && k + 1 < ids.length && k - start < 3) {
        out.push('');
        continue;
      }
      const before = this.decode(context);
      out.push(text.startsWith(before) ? text.slice(before.length) : this.decode(ids.slice(start, k + 1)));
      start = k + 1;
    }
    return out;
  }

  /** The chat as the template renders it (with `tools` offered where the template reads them); throws naming the folder when it has no template. */
  chatText(messages: readonly ChatMessage[], addGenerationPrompt: boolean, tools?: readonly object[]): string {
    if (this.chatTemplate === null) throw new HfFolderError('the tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja)');
    return this.hf.apply_chat_template(
      messages as ChatMessage[],
      {
        tokenize: false,
        add_generation_prompt: addGenerationPrompt,
        ...(tools ? { tools } : {}),
      } as never,
    ) as unknown as string;
  }

  /** The chat's ids: the rendered text, tokenized without adding special tokens again (as transformers does). */
  chatIds(messages: readonly ChatMessage[], addGenerationPrompt: boolean, tools?: readonly object[]): number[] {
    return this.encode(this.chatText(messages, addGenerationPrompt, tools), false);
  }

  /** Ids that end a turn: the eos token tokenizer_config.json names (none when it names none). */
  stopIds(): number[] {
    if (this.eosToken === null) return [];
    const id = (this.hf as unknown as { model: { tokens_to_ids: Map<string, number> } }).model.tokens_to_ids.get(this.eosToken);
    return id === undefined ? [] : [id];
  }
}
