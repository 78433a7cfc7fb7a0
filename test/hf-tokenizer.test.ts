/**
 * A real model's tokenizer and chat template from its Hugging Face folder give transformers' ids.
 * test/python/hf_tokenizer_fixture.py trains a byte-level BPE with `tokenizers` on task text, saves it
 * with transformers (tokenizer.json, tokenizer_config.json, chat_template.jinja) and records
 * transformers' ids for texts (spaces, special tokens inside text, non-ASCII bytes) and for chats
 * with the generation prompt. Also the Hub's layout: the template inside tokenizer_config.json.
 * Skipped, naming what is missing, without tokenizers and transformers.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FolderReader } from '../src/core/io/hfFolder';
import { type ChatMessage, HfTokenizer } from '../src/core/tokenizer/hfTokenizer';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { pythonWith } from './python/python';

const FIXTURE = fileURLToPath(new URL('./python/hf_tokenizer_fixture.py', import.meta.url));
const py = pythonWith('tokenizers', 'transformers');
let dir = '';

const folder = (d: string, skip: string[] = []): FolderReader => {
  const read = nodeFolderReader(d);
  return async (name) => (skip.includes(name) ? null : read(name));
};

interface Reference {
  texts: { text: string; ids: number[]; decoded: string }[];
  chats: { messages: ChatMessage[]; text: string; ids: number[] }[];
}

beforeAll(() => {
  if (py.python === null) return;
  return (async () => {
    dir = await mkdtemp(join(tmpdir(), 'hf-tokenizer-'));
    const r = spawnSync(py.python as string, [FIXTURE, dir], { encoding: 'utf8', timeout: 240_000 });
    if (r.status !== 0) throw new Error(`hf_tokenizer_fixture.py failed: ${r.stderr || r.error?.message}`);
  })();
}, 300_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(py.python === null)(`a Hugging Face tokenizer and chat template${py.python === null ? ` (skipped: ${py.why})` : ''}`, () => {
  it('encodes and decodes texts as transformers does, and renders and tokenizes chats as its apply_chat_template', async () => {
    const ref = JSON.parse(await readFile(join(dir, 'reference_tokens.json'), 'utf8')) as Reference;
    const tok = await HfTokenizer.fromFolder(folder(dir));
    for (const t of ref.texts) {
      expect(tok.encode(t.text), t.text).toEqual(t.ids);
      expect(tok.decode(t.ids)).toBe(t.decoded);
    }
    for (const c of ref.chats) {
      expect(tok.chatText(c.messages, true)).toBe(c.text);
      expect(tok.chatIds(c.messages, true)).toEqual(c.ids);
    }
  });

  it('splits a decoded text into per-token pieces that join back to it, a split character on the token that completes it', async () => {
    const tok = await HfTokenizer.fromFolder(folder(dir));
    const text = 'Answer: 42 — é✓ done';
    const ids = tok.encode(text, false);
    const pieces = tok.pieces(ids);
    expect(pieces).toHaveLength(ids.length);
    expect(pieces.join('')).toBe(tok.decode(ids));
    expect(pieces.join('')).toBe(text);
    // The byte-level vocabulary splits the em dash, é and ✓: the tokens before the last byte carry ''.
    expect(pieces.filter((p) => p === '').length).toBeGreaterThan(0);
    expect(pieces.some((p) => p.includes('\uFFFD'))).toBe(false);
    expect(ids.map((id) => tok.decode([id])).some((p) => p.includes('\uFFFD'))).toBe(true);
    // A token shown alone keeps its bytes: the vocabulary's own string where decoding it alone would not.
    const split = ids.find((id) => tok.decode([id]).includes('\uFFFD')) as number;
    expect(tok.tokenString(split)).not.toContain('\uFFFD');
    expect(tok.tokenString(split).length).toBeGreaterThan(0);
    expect(tok.tokenString(ids[0])).toBe(tok.decode([ids[0]]));
    // Bytes cut off at the end (✓ without its last byte) show as decode shows them.
    const cut = ids.slice(
      0,
      pieces.findIndex((p) => p.includes('✓')),
    );
    expect(tok.pieces(cut).join('')).toBe(tok.decode(cut));
    expect(tok.decode(cut).endsWith('\uFFFD')).toBe(true);
  });

  it('keeps the spaces of a SentencePiece-style tokenizer (Llama 2) whose decoder strips a decode’s leading space', async () => {
    // Llama 2's tokenizer.json layout: ▁ for spaces, byte fallback, and a decoder that strips one leading space.
    const spm = await mkdtemp(join(tmpdir(), 'spm-'));
    try {
      const code = [
        'import sys',
        'from tokenizers import Tokenizer, models, decoders, normalizers, trainers',
        'tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))',
        'tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])',
        'tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])',
        'trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)])',
        'tok.train_from_iterator(["Calculate the value of 12 plus 7.", "The answer is 19 and the value is done."] * 20, trainer)',
        'tok.save(sys.argv[1] + "/tokenizer.json")',
      ].join('\n');
      const r = spawnSync(py.python as string, ['-c', code, spm], { encoding: 'utf8', timeout: 120_000 });
      expect(r.status, r.stderr).toBe(0);
      await writeFile(join(spm, 'tokenizer_config.json'), JSON.stringify({ tokenizer_class: 'LlamaTokenizerFast', eos_token: '</s>' }));
      const tok = await HfTokenizer.fromFolder(folder(spm));
      const text = 'Calculate the value of 12 plus 7. é';
      const ids = tok.encode(text, false);
      expect(tok.decode(ids)).toBe(text);
      expect(tok.pieces(ids).join('')).toBe(text);
      // Each token decoded alone loses its space (and é's bytes): what the pieces do not.
      expect(ids.map((id) => tok.decode([id])).join('')).not.toBe(text);
    } finally {
      await rm(spm, { recursive: true, force: true });
    }
  });

  it("reads the Hub's layout (the template in tokenizer_config.json), and names a folder without a tokenizer or a template", async () => {
    const ref = JSON.parse(await readFile(join(dir, 'reference_tokens.json'), 'utf8')) as Reference;
    const hub = await mkdtemp(join(tmpdir(), 'hf-tokenizer-hub-'));
    try {
      const config = JSON.parse(await readFile(join(dir, 'tokenizer_config.json'), 'utf8')) as object;
      await writeFile(
        join(hub, 'tokenizer_config.json'),
        JSON.stringify({ ...config, chat_template: await readFile(join(dir, 'chat_template.jinja'), 'utf8') }),
      );
      await writeFile(join(hub, 'tokenizer.json'), await readFile(join(dir, 'tokenizer.json')));
      const tok = await HfTokenizer.fromFolder(folder(hub));
      expect(tok.chatIds(ref.chats[0].messages, true)).toEqual(ref.chats[0].ids);
    } finally {
      await rm(hub, { recursive: true, force: true });
    }
    await expect(HfTokenizer.fromFolder(folder(dir, ['tokenizer.json']))).rejects.toThrow('the folder has no tokenizer.json');
    const bare = await HfTokenizer.fromFolder(folder(dir, ['chat_template.jinja']));
    expect(() => bare.chatText(ref.chats[0].messages, true)).toThrow('the tokenizer has no chat template');
  });
});
