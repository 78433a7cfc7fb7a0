/**
 * A model folder from anywhere (issue 49): every hostile or broken variant of a tiny Qwen2 folder
 * (test/tinyHfFolder.ts) is refused by the one loader the CLI and the page share, within 5 s, with a
 * message naming the file and the field, and leaves no tensor behind; the good folder loads, and its
 * chat template renders under the bounds exactly as the tokenizer library's own renderer does.
 */
import * as tf from '@tensorflow/tfjs';
import { AutoTokenizer, PreTrainedTokenizer } from '@xenova/transformers';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nonFiniteTensor } from '../src/core/io/finiteTensors';
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { SPAWN_CLONE_TOOL } from '../src/core/protocol/toolCalls';
import { ChatTemplate } from '../src/core/tokenizer/chatTemplate';
import { HfTokenizer } from '../src/core/tokenizer/hfTokenizer';
import { initBackend } from '../src/runtime/backend';
import { HfModel } from '../src/runtime/engine/hfModel';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { PAGE_DEFAULTS } from '../src/core/runConfig';
import { HOSTILE_FOLDERS, TINY_TEMPLATE, tinyFolderParts, writeTinyHfFolder } from './tinyHfFolder';

let root = '';
beforeAll(async () => {
  await initBackend('cpu');
  root = await mkdtemp(join(tmpdir(), 'hf-hostile-'));
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

const CHAT = [
  { role: 'system', content: 'you may spawn clones.' },
  { role: 'user', content: 'calculate the value of 3*4+5.' },
];

describe('a hostile or broken model folder', () => {
  for (const [i, folder] of HOSTILE_FOLDERS.entries()) {
    it(`is refused by name: ${folder.name} (case ${folder.issueCase})`, async () => {
      const dir = join(root, `hostile-${i}`);
      await writeTinyHfFolder(dir, folder.change);
      const before = tf.memory().numTensors;
      const t0 = performance.now();
      await expect(loadHfTextModel(nodeFolderReader(dir))).rejects.toThrow(folder.refusal);
      expect(performance.now() - t0).toBeLessThan(5000);
      expect(tf.memory().numTensors).toBe(before);
    }, 20_000);
  }

  it('16-bit weights holding NaN or infinity are found from their bits', () => {
    const f16 = { dtype: 'F16' as const, shape: [3], bits: Uint16Array.of(0x3c00, 0x7c00, 0x7e00), data: new Float32Array(3) };
    const bf16 = { dtype: 'BF16' as const, shape: [2], bits: Uint16Array.of(0x3f80, 0xff80), data: new Float32Array(2) };
    const fine = { dtype: 'BF16' as const, shape: [2], bits: Uint16Array.of(0x3f80, 0x7f7f), data: new Float32Array(2) };
    expect(nonFiniteTensor(new Map([['w', f16]]))).toMatch(/^w holds 2 values that are not finite \(the first, index 1/);
    expect(nonFiniteTensor(new Map([['w', bf16]]))).toMatch(/^w holds 1 value that is not finite \(the first, index 1/);
    expect(nonFiniteTensor(new Map([['w', fine]]))).toBeNull();
  });
});

describe('the chat template of a folder', () => {
  it('loads the good folder and renders its template as the tokenizer library does, tools included', async () => {
    const dir = join(root, 'good');
    await writeTinyHfFolder(dir);
    const loaded = await loadHfTextModel(nodeFolderReader(dir));
    expect(loaded.model.config.layers).toBe(2);
    const parts = tinyFolderParts();
    const mapping = (AutoTokenizer as unknown as { TOKENIZER_CLASS_MAPPING: Record<string, typeof PreTrainedTokenizer> }).TOKENIZER_CLASS_MAPPING;
    const library = new mapping.PreTrainedTokenizer(parts.tokenizer, parts.tokenizerConfig);
    const withTools = '{{ eos_token }}{% for t in tools %}{{ t.function.name }}{% endfor %}' + TINY_TEMPLATE;
    for (const template of [TINY_TEMPLATE, withTools]) {
      const theirs = library.apply_chat_template(CHAT, {
        tokenize: false,
        add_generation_prompt: true,
        chat_template: template,
        tools: [SPAWN_CLONE_TOOL],
      } as never);
      const ours = ChatTemplate.parse(template, 'test').render({ messages: CHAT, add_generation_prompt: true, eos_token: '<eos>', tools: [SPAWN_CLONE_TOOL] });
      expect(ours).toBe(theirs);
    }
    expect(loaded.model.tokenizer.chatText(CHAT, true)).toBe(
      '<root>system: you may spawn clones.<sep><root>user: calculate the value of 3*4+5.<sep>assistant: ',
    );
    expect(loaded.model.tokenizer.stopIds()).toEqual([1]);
    loaded.model.params.forEach((t) => t.dispose());
  });

  it('takes chat_template.jinja over the template in tokenizer_config.json, as transformers does', async () => {
    const dir = join(root, 'jinja');
    await writeTinyHfFolder(dir, (p) => void (p.jinja = "{{ 'from the jinja file: ' + messages[0]['content'] }}"));
    const tok = await HfTokenizer.fromFolder(nodeFolderReader(dir));
    expect(tok.chatText(CHAT, true)).toBe('from the jinja file: you may spawn clones.');
  });

  it('reads a template list, with "tool_use" for a chat with tools, and refuses a list without "default"', async () => {
    const dir = join(root, 'list');
    await writeTinyHfFolder(
      dir,
      (p) =>
        void (p.tokenizerConfig.chat_template = [
          { name: 'default', template: 'plain' },
          { name: 'tool_use', template: 'with tools' },
        ]),
    );
    const tok = await HfTokenizer.fromFolder(nodeFolderReader(dir));
    expect(tok.hasChatTemplate).toBe(true);
    expect(tok.chatText(CHAT, true)).toBe('plain');
    expect(tok.chatText(CHAT, true, [SPAWN_CLONE_TOOL])).toBe('with tools');
    const bad = join(root, 'list-bad');
    await writeTinyHfFolder(bad, (p) => void (p.tokenizerConfig.chat_template = [{ name: 'rag', template: 'x' }]));
    await expect(HfTokenizer.fromFolder(nodeFolderReader(bad))).rejects.toThrow('tokenizer_config.json: chat_template names "rag" but no "default" template');
    const broken = join(root, 'list-broken');
    await writeTinyHfFolder(broken, (p) => void (p.tokenizerConfig.chat_template = [{ name: 'default' }]));
    await expect(HfTokenizer.fromFolder(nodeFolderReader(broken))).rejects.toThrow(
      'tokenizer_config.json: chat_template[0] must be {name, template} with two strings',
    );
  });

  it('loads a folder without a template, and names what is missing when a chat is rendered', async () => {
    const dir = join(root, 'no-template');
    await writeTinyHfFolder(dir, (p) => void delete p.tokenizerConfig.chat_template);
    const tok = await HfTokenizer.fromFolder(nodeFolderReader(dir));
    expect(tok.hasChatTemplate).toBe(false);
    expect(() => tok.chatText(CHAT, true)).toThrow('the tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja)');
  });

  it('stops a template that passes at load but loops on a longer chat, naming the file', async () => {
    const t = ChatTemplate.parse(
      '{% for m in messages %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endfor %}',
      'chat_template.jinja',
    );
    const t0 = performance.now();
    expect(() => t.render({ messages: CHAT })).toThrow(/^chat_template\.jinja: takes more than [\d,]+ (steps|ms)/);
    expect(performance.now() - t0).toBeLessThan(5000);
  });
});

describe("the page engine's Hugging Face model", () => {
  it('refuses a looping template by name and leaves nothing of it; the model loaded before decodes, and the next folder loads', async () => {
    const good = join(root, 'session-good');
    const looping = join(root, 'session-looping');
    await writeTinyHfFolder(good);
    await writeTinyHfFolder(looping, HOSTILE_FOLDERS[0].change);
    const settings = { ...PAGE_DEFAULTS, loraR: 0 };
    const before = tf.memory().numTensors;
    const first = await HfModel.load(nodeFolderReader(good), 'good', settings);
    const held = tf.memory().numTensors;
    await expect(HfModel.load(nodeFolderReader(looping), 'looping', settings)).rejects.toThrow(HOSTILE_FOLDERS[0].refusal);
    // Nothing of the refused folder is left, and the model loaded before still answers.
    expect(tf.memory().numTensors).toBe(held);
    expect((await first.logits('1+2')).logits.length).toBe(3);
    const next = await HfModel.load(nodeFolderReader(good), 'good', settings);
    expect((await next.logits('1+2')).logits).toEqual((await first.logits('1+2')).logits);
    first.dispose();
    next.dispose();
    expect(tf.memory().numTensors).toBe(before);
  }, 60_000);
});
