/**
 * `init --family` as a user runs it: a small random qwen2, llama or gpt2 folder that our loader
 * (with its hostile-folder checks) and transformers both load to the same model: the same token ids
 * for the tasks' texts, the same chat-template rendering with the spawn_clone tool, the same logits
 * (≤ 1e-4) on a rendered chat of each task (test/python/hf_init_check.py; skipped, naming what is
 * missing, without torch and transformers). The tokenizer encodes every protocol text losslessly
 * and compactly; sizes a family lacks, and sizes that do not fit, are refused by name with nothing
 * written.
 */
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { decoderConfigFromHf, decoderLogits, decoderTensorSpecs } from '../src/core/model/decoder';
import { GPT2_DEFAULT_SIZES, INIT_DEFAULT_SIZES, INIT_FAMILIES, initHfConfig, initHfFolder } from '../src/core/model/hfInit';
import { PROMPTS_FIELD } from '../src/core/protocol/prompts';
import { SPAWN_CLONE_TOOL } from '../src/core/protocol/toolCalls';
import { Rng } from '../src/core/rng';
import { withOptions } from '../src/core/tasks';
import type { ChatMessage } from '../src/core/tokenizer/hfTokenizer';
import { type CorpusChat, corpusTools, problemChats } from '../src/core/tokenizer/protocolCorpus';
import { protocolCorpusTexts } from '../src/core/tokenizer/protocolTokenizer';
import { SHORT_SYSTEM_PROMPT } from '../src/core/verl/dataset';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { writeHfFolder } from '../src/runtime/node/folderWriter';
import { cli } from './cliProcess';
import { pythonWith } from './python/python';

const CHECK = fileURLToPath(new URL('./python/hf_init_check.py', import.meta.url));
const py = pythonWith('torch', 'transformers');
let dir = '';

/** Tiny sizes: the check is of the architecture and the files, not of the default's width. */
const TINY = ['--layers', '2', '--hidden', '32', '--heads', '4', '--intermediate', '48', '--max-positions', '1024', '--seed', '5'];

/** A chat of each task as the text protocol renders it: arithmetic's root and multihop's root and first clone (with its expanded context). */
function taskChats(): CorpusChat[] {
  const rng = new Rng(3);
  const arithmetic = withOptions('arithmetic');
  const multihop = withOptions('multihop');
  const a = problemChats('arithmetic', arithmetic.task.generate(rng, arithmetic.opts, 'a'), SHORT_SYSTEM_PROMPT, rng);
  const m = problemChats('multihop', multihop.task.generate(rng, multihop.opts, 'm'), SHORT_SYSTEM_PROMPT, rng);
  return [a[0], m[0], m[1]];
}

/** Texts a tokenizer must return unchanged: the protocol's (every 8th rendered corpus chat) and some it never saw. */
const oddTexts = ['ümlaut, emoji 🙂 and 中文 are bytes', '  two  spaces\n\n\tand a tab', 'a <|im_end|> inside, and </tool_call> too', 'Answer: -1,234', ''];

beforeAll(async () => {
  await initBackend('wasm');
  dir = await mkdtemp(join(tmpdir(), 'init-hf-'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('init --family', () => {
  for (const family of INIT_FAMILIES) {
    it(`${family}: the command writes a folder our loader reads (its hostile-folder checks passed), chats rendered losslessly`, async () => {
      const out = join(dir, family);
      const r = await cli('init', '--family', family, ...TINY, ...(family === 'gpt2' ? [] : ['--kv-heads', '2']), '--out', out);
      expect(r.stderr + r.stdout).toMatch(new RegExp(`wrote ${family} \\([\\d,]+ parameters`));
      expect(r.code).toBe(0);
      const loaded = await loadHfTextModel(nodeFolderReader(out), 'float32');
      const { config, tokenizer, params } = loaded.model;
      expect(config.family).toBe(family);
      expect([config.layers, config.hiddenSize, config.heads, config.maxPositions]).toEqual([2, 32, 4, 1024]);
      expect(config.kvHeads).toBe(family === 'gpt2' ? 4 : 2);
      expect(tokenizer.stopIds()).toEqual([tokenizer.encode('<|im_end|>', false)[0]]);
      for (const c of taskChats()) {
        const text = tokenizer.chatText(c.messages, false, corpusTools(c));
        const ids = tokenizer.chatIds(c.messages, false, corpusTools(c));
        // Lossless: the ids decode to the rendered text, so the loop's injected tool turns follow the root's own tokens.
        expect(tokenizer.decode(ids)).toBe(text);
        expect(ids.length).toBeLessThan(320);
      }
      params.forEach((t) => t.dispose());
    }, 60_000);
  }
});

describe.skipIf(py.python === null)(`init --family, read by transformers${py.python === null ? ` (skipped: ${py.why})` : ''}`, () => {
  for (const family of INIT_FAMILIES) {
    it(`${family}: AutoTokenizer gives our ids and template text, AutoModelForCausalLM our logits (≤ 1e-4) on a chat of each task`, async () => {
      const out = join(dir, family);
      const loaded = await loadHfTextModel(nodeFolderReader(out), 'float32');
      const { config, tokenizer, params } = loaded.model;
      const chats = taskChats();
      const ours = chats.map((c) => ({
        text: tokenizer.chatText(c.messages, false, corpusTools(c)),
        ids: tokenizer.chatIds(c.messages, false, corpusTools(c)),
      }));
      const texts = [...protocolCorpusTexts().filter((_, i) => i % 8 === 0), ...oddTexts];
      const cases = join(out, 'cases.json');
      const result = join(out, 'transformers.json');
      await writeFile(
        cases,
        JSON.stringify({ texts, chats: chats.map((c) => ({ messages: c.messages, tools: corpusTools(c) ?? null, add_generation_prompt: false })) }),
      );
      const run = spawnSync(py.python as string, [CHECK, out, cases, result], { encoding: 'utf8', timeout: 120_000 });
      expect(run.status, run.stderr).toBe(0);
      const ref = JSON.parse(await readFile(result, 'utf8')) as {
        class: string;
        parameters: number;
        texts: { ids: number[]; decoded: string }[];
        chats: { text: string; ids: number[]; logits: number[][] }[];
      };
      expect(ref.class).toBe({ qwen2: 'Qwen2ForCausalLM', llama: 'LlamaForCausalLM', gpt2: 'GPT2LMHeadModel' }[family]);
      expect(ref.parameters).toBe(loaded.parameters);
      texts.forEach((t, i) => {
        expect(tokenizer.encode(t), t).toEqual(ref.texts[i].ids);
        expect(ref.texts[i].decoded).toBe(t);
      });
      for (const [i, c] of ref.chats.entries()) {
        expect(ours[i].text).toBe(c.text);
        expect(ours[i].ids).toEqual(c.ids);
        const logits = tf.tidy(() => decoderLogits(params, config, tf.tensor2d([c.ids], [1, c.ids.length], 'int32')).arraySync()[0]);
        let max = 0;
        c.logits.forEach((row, t) => row.forEach((v, k) => (max = Math.max(max, Math.abs(v - logits[t][k])))));
        expect(max).toBeLessThanOrEqual(1e-4);
        // Random logits of this init are small but not zero: the comparison has something to compare.
        expect(Math.max(...c.logits[c.logits.length - 1].map(Math.abs))).toBeGreaterThan(1e-3);
      }
      params.forEach((t) => t.dispose());
    }, 120_000);
  }
});

describe('init --family sizes and tokenizer', () => {
  it('at the default sizes, every family has 2–5 million parameters, under 20 MB as float32; the qwen2 folder written is that size', async () => {
    for (const family of INIT_FAMILIES) {
      const config = initHfConfig(family, family === 'gpt2' ? GPT2_DEFAULT_SIZES : INIT_DEFAULT_SIZES, 739, { bos: 0, eos: 2, pad: 0 });
      const n = decoderTensorSpecs(decoderConfigFromHf(config)).reduce((a, s) => a + s.shape.reduce((x, y) => x * y, 1), 0);
      expect(n, family).toBeGreaterThan(2e6);
      expect(n * 4, family).toBeLessThan(20e6);
    }
    const out = join(dir, 'default');
    const r = await cli('init', '--family', 'qwen2', '--out', out);
    expect(r.code, r.stderr).toBe(0);
    const loaded = await loadHfTextModel(nodeFolderReader(out), 'float32');
    loaded.model.params.forEach((t) => t.dispose());
    expect(loaded.parameters).toBeGreaterThan(2e6);
    expect(loaded.parameters).toBeLessThan(5e6);
    expect((await stat(join(out, 'model.safetensors'))).size).toBeLessThan(20e6);
    expect(loaded.model.config.maxPositions).toBe(2048);
    expect(JSON.parse(await readFile(join(out, 'config.json'), 'utf8'))).toMatchObject({
      model_type: 'qwen2',
      tie_word_embeddings: true,
      vocab_size: loaded.model.config.vocabSize,
    });
  }, 120_000);

  it('the tokenizer returns every protocol text and texts it never saw unchanged, over 3 characters a token; the short prompt with its tool under 80 tokens', async () => {
    const out = join(dir, 'qwen2');
    const { model } = await loadHfTextModel(nodeFolderReader(out), 'float32');
    model.params.forEach((t) => t.dispose());
    const tok = model.tokenizer;
    let chars = 0;
    let tokens = 0;
    for (const t of [...protocolCorpusTexts(), ...oddTexts]) {
      const ids = tok.encode(t, false);
      expect(tok.decode(ids)).toBe(t);
      chars += t.length;
      tokens += ids.length;
    }
    // Byte-level BPE trained on the protocol: over 3 characters a token (one character a token would be 1).
    expect(chars / tokens).toBeGreaterThan(3);
    // The short system prompt with the tool line is a small share of a 1024-position window.
    const system = tok.chatIds([{ role: 'system', content: SHORT_SYSTEM_PROMPT }], false, [SPAWN_CLONE_TOOL]);
    expect(system.length).toBeLessThan(80);
    const mono: ChatMessage[] = [{ role: 'user', content: 'Calculate the value of 12*3-(4+5).' }];
    expect(tok.decode(tok.chatIds(mono, true))).toBe('<|im_start|>user\nCalculate the value of 12*3-(4+5).<|im_end|>\n<|im_start|>assistant\n');
  }, 60_000);

  it('the same seed writes the same folder; the tokenizer is the same for every seed and family', () => {
    const files = (family: 'qwen2' | 'gpt2', seed: number) =>
      initHfFolder(family, { ...INIT_DEFAULT_SIZES, layers: 1, hiddenSize: 32, kvHeads: 4, maxPositions: 64 }, seed);
    const a = files('qwen2', 1);
    const b = files('qwen2', 1);
    const c = files('qwen2', 2);
    const name = 'model.layers.0.self_attn.q_proj.weight';
    expect(a.tensors.get(name)?.data).toEqual(b.tensors.get(name)?.data);
    expect(a.tensors.get(name)?.data).not.toEqual(c.tensors.get(name)?.data);
    expect(JSON.stringify(files('gpt2', 9).tokenizer)).toBe(JSON.stringify(a.tokenizer));
    // transformers' init: norms one, biases zero, linear weights normal(0, 0.02).
    expect([...(a.tensors.get('model.norm.weight')?.data ?? [])].every((v) => v === 1)).toBe(true);
    expect([...(a.tensors.get('model.layers.0.self_attn.q_proj.bias')?.data ?? [])].every((v) => v === 0)).toBe(true);
    const w = a.tensors.get('model.embed_tokens.weight')?.data ?? new Float32Array();
    const std = Math.sqrt(w.reduce((s, v) => s + v * v, 0) / w.length);
    expect(std).toBeGreaterThan(0.019);
    expect(std).toBeLessThan(0.021);
  });

  it('names its prompt set in tokenizer_config.json (short unless told); the tokenizer reads it and refuses another value by name', async () => {
    const sizes = { ...INIT_DEFAULT_SIZES, layers: 1, hiddenSize: 32, kvHeads: 4, maxPositions: 64 };
    expect(initHfFolder('qwen2', sizes, 1).tokenizerConfig[PROMPTS_FIELD]).toBe('short');
    const ref = initHfFolder('qwen2', sizes, 1, 'reference');
    expect(ref.tokenizerConfig[PROMPTS_FIELD]).toBe('reference');
    const at = join(dir, 'prompts');
    await writeHfFolder(at, ref);
    expect((await loadHfTextModel(nodeFolderReader(at), 'float32')).model.tokenizer.prompts).toBe('reference');
    const config = JSON.parse(await readFile(join(at, 'tokenizer_config.json'), 'utf8'));
    delete config[PROMPTS_FIELD];
    await writeFile(join(at, 'tokenizer_config.json'), JSON.stringify(config));
    expect((await loadHfTextModel(nodeFolderReader(at), 'float32')).model.tokenizer.prompts).toBe('reference');
    await writeFile(join(at, 'tokenizer_config.json'), JSON.stringify({ ...config, [PROMPTS_FIELD]: 'long' }));
    await expect(loadHfTextModel(nodeFolderReader(at), 'float32')).rejects.toThrow(
      /tokenizer_config.json: selfcest_prompts must be one of reference, short \(got "long"\)/,
    );
  });

  it('refuses by name, with exit 2 and nothing written, a size a family lacks, sizes that do not fit, and a mix of the two forms', async () => {
    const cases: [string[], RegExp][] = [
      [['--family', 'gpt2', '--kv-heads', '2'], /--kv-heads does not apply to gpt2/],
      [['--family', 'qwen2', '--hidden', '30', '--heads', '4'], /--hidden 30 must be a multiple of --heads 4/],
      [['--family', 'llama', '--heads', '4', '--kv-heads', '3'], /--heads 4 must be a multiple of --kv-heads 3/],
      [['--family', 'qwen2', '--hidden', '36', '--heads', '4', '--kv-heads', '1'], /head size --hidden \/ --heads = 9 must be even/],
      [['--family', 'llama', '--backend', 'wasm'], /--backend applies to --preset/],
      [['--preset', 'tiny', '--layers', '2'], /--layers size a --family model/],
      [['--preset', 'tiny', '--family', 'qwen2'], /give one of --preset .* and --family/],
      [[], /give one of --preset .* and --family/],
      [['--family', 'qwen3'], /--family must be one of qwen2, llama, gpt2/],
      [['--preset', 'tiny', '--prompts', 'short'], /--prompts applies to --family/],
      [['--family', 'qwen2', '--prompts', 'long'], /--prompts must be one of reference, short/],
    ];
    const runs = await Promise.all(cases.map(([args], i) => cli('init', ...args, '--out', join(dir, `refused-${i}`))));
    cases.forEach(([args, message], i) => {
      expect(runs[i].code, args.join(' ')).toBe(2);
      expect(runs[i].stderr, args.join(' ')).toMatch(message);
      expect(existsSync(join(dir, `refused-${i}`)), args.join(' ')).toBe(false);
    });
  }, 180_000);
});
