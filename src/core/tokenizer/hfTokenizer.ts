/**
 * A real model's tokenizer from its Hugging Face folder, through @xenova/transformers (remote loading
 * off): tokenizer.json, tokenizer_config.json (the tokenizer class, special tokens and, on the Hub's
 * models, the chat template) and, as transformers 5 saves it, chat_template.jinja beside them (which,
 * as in transformers, replaces a template in tokenizer_config.json). The class is picked as
 * AutoTokenizer picks it (tokenizer_class without "Fast"), so Llama's and Qwen's own rules apply; an
 * unknown class uses the base tokenizer. Both files are checked before the library reads them
 * (hfTokenizerChecks.ts), and the chat template is parsed at load and rendered with bounds
 * (chatTemplate.ts): a template that cannot render a plain user turn is refused at load.
 */
import { AutoTokenizer, PreTrainedTokenizer } from '@xenova/transformers';
import { type FolderReader, HfFolderError, jsonFile } from '../io/hfFolder';
import { ChatTemplate } from './chatTemplate';
import { PROMPTS_FIELD, PROMPT_SETS, type PromptSetName, isPromptSetName } from '../protocol/promptSetName';
import { SPECIAL_TOKEN_FIELDS, type TokenizerVocabulary, checkSpecialTokens, specialToken, tokenizerVocabulary } from './hfTokenizerChecks';

export interface ChatMessage {
  role: string;
  content: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The folder's chat templates by name: chat_template.jinja as "default" when the folder has it,
 * else tokenizer_config.json's chat_template, a string ("default") or a list of {name, template}.
 */
function chatTemplates(config: Record<string, unknown>, jinja: Uint8Array | null): Map<string, ChatTemplate> {
  const out = new Map<string, ChatTemplate>();
  if (jinja !== null) return out.set('default', ChatTemplate.parse(new TextDecoder().decode(jinja), 'chat_template.jinja'));
  const t = config.chat_template;
  if (t === undefined || t === null) return out;
  if (typeof t === 'string') return out.set('default', ChatTemplate.parse(t, 'tokenizer_config.json: chat_template'));
  if (!Array.isArray(t)) throw new HfFolderError('tokenizer_config.json: chat_template must be a string or a list of {name, template}');
  t.forEach((entry, i) => {
    if (!(isObject(entry) && typeof entry.name === 'string' && typeof entry.template === 'string'))
      throw new HfFolderError(`tokenizer_config.json: chat_template[${i}] must be {name, template} with two strings`);
    out.set(entry.name, ChatTemplate.parse(entry.template, `tokenizer_config.json: chat_template[${i}] (${JSON.stringify(entry.name)})`));
  });
  return out;
}

export class HfTokenizer {
  private constructor(
    private readonly hf: PreTrainedTokenizer,
    /** The folder's chat templates by name ("default", and "tool_use" where the folder names one). */
    private readonly templates: Map<string, ChatTemplate>,
    /** tokenizer_config.json's special tokens, as templates read them (eos_token, bos_token, …). */
    private readonly specials: Record<string, string>,
    /** What the tokenizer can emit: its largest id is checked against the model's embedding. */
    readonly vocabulary: Omit<TokenizerVocabulary, 'tokens'>,
    /** The prompt set a text episode frames its chats in (tokenizer_config.json `selfcest_prompts`; reference when absent). */
    readonly prompts: PromptSetName,
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
    const vocabulary = tokenizerVocabulary(tokenizer);
    checkSpecialTokens(config, vocabulary);
    const templates = chatTemplates(config, await read('chat_template.jinja'));
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
      // The templates are rendered here (chatText), never by the library.
      const { chat_template: _, ...rest } = config;
      hf = new Cls(tokenizer, rest);
    } catch (e) {
      throw new HfFolderError(`tokenizer.json: ${(e as Error).message}`);
    }
    const specials: Record<string, string> = {};
    for (const field of SPECIAL_TOKEN_FIELDS) {
      const token = specialToken(config, field);
      if (token !== null) specials[field] = token;
    }
    const prompts = config[PROMPTS_FIELD] ?? 'reference';
    if (!isPromptSetName(prompts))
      throw new HfFolderError(`tokenizer_config.json: ${PROMPTS_FIELD} must be one of ${PROMPT_SETS.join(', ')} (got ${JSON.stringify(prompts)})`);
    const loaded = new HfTokenizer(hf, templates, specials, { maxId: vocabulary.maxId, maxIdToken: vocabulary.maxIdToken }, prompts);
    // A template that breaks on a plain user turn is refused now, not in the middle of an episode.
    if (templates.size > 0) loaded.chatText([{ role: 'user', content: 'Calculate the value of 1+2.' }], true);
    return loaded;
  }

  /** Whether the folder gives a chat template (tokenizer_config.json or chat_template.jinja). */
  get hasChatTemplate(): boolean {
    return this.templates.size > 0;
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

  /**
   * The chat as the template renders it (with `tools` offered where the template reads them; a
   * folder with named templates uses "tool_use" for a chat with tools where it has one, as
   * transformers does), within chatTemplate.ts's bounds; errors name the file and the field.
   */
  chatText(messages: readonly ChatMessage[], addGenerationPrompt: boolean, tools?: readonly object[]): string {
    const template = (tools ? this.templates.get('tool_use') : undefined) ?? this.templates.get('default');
    if (template === undefined) {
      throw new HfFolderError(
        this.templates.size === 0
          ? 'the tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja)'
          : `tokenizer_config.json: chat_template names ${[...this.templates.keys()].map((n) => JSON.stringify(n)).join(', ')} but no "default" template`,
      );
    }
    return template.render({ messages, add_generation_prompt: addGenerationPrompt, ...this.specials, ...(tools ? { tools } : {}) });
  }

  /** The chat's ids: the rendered text, tokenized without adding special tokens again (as transformers does). */
  chatIds(messages: readonly ChatMessage[], addGenerationPrompt: boolean, tools?: readonly object[]): number[] {
    return this.encode(this.chatText(messages, addGenerationPrompt, tools), false);
  }

  /** Ids that end a turn: the eos token tokenizer_config.json names (none when it names none; a named one is in the vocabulary). */
  stopIds(): number[] {
    const eos = this.specials.eos_token;
    if (eos === undefined) return [];
    const id = (this.hf as unknown as { model: { tokens_to_ids: Map<string, number> } }).model.tokens_to_ids.get(eos);
    return id === undefined ? [] : [id];
  }
}
