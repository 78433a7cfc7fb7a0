/**
 * The language-model worker's session in Node, on a whole Hugging Face folder's files (a tiny
 * random Qwen2 with a BPE tokenizer and chat template, test/python/hf_tokenizer_fixture.py): it
 * loads from files given by name, rolls out text episodes whose traces, as episode traces, pass
 * the trace reader's checks (io/traces.ts) and spell the model's own token strings, trains a GRPO
 * step with the run config, and exports the adapter. Skipped, naming what is missing, without
 * torch, tokenizers and transformers.
 */
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeSafetensors } from '../src/core/io/safetensors';
import { bfloat16Folder } from './halfDecoder';
import { parseTracesJsonl, tracesToJsonl } from '../src/core/io/traces';
import { episodeTraceOfText } from '../src/core/rollout/textTrace';
import { PAGE_DEFAULTS } from '../src/core/runConfig';
import { initBackend } from '../src/runtime/backend';
import { LmSession } from '../src/runtime/lm/lmSession';
import { pythonWith } from './python/python';

const py = pythonWith('torch', 'tokenizers', 'transformers');
let dir = '';

beforeAll(async () => {
  await initBackend('wasm');
  if (py.python === null) return;
  dir = await mkdtemp(join(tmpdir(), 'lm-session-'));
  const r = spawnSync(py.python, ['test/python/hf_tokenizer_fixture.py', dir, 'model'], { encoding: 'utf8', timeout: 240_000 });
  if (r.status !== 0) throw new Error(`hf_tokenizer_fixture.py failed: ${r.stderr || r.error?.message}`);
}, 300_000);

/** A folder's files by name (with `prefix`), as the page's folder picker hands them to the worker. */
async function folderFiles(folder: string, prefix = ''): Promise<Record<string, ArrayBuffer>> {
  const files: Record<string, ArrayBuffer> = {};
  for (const entry of await readdir(folder, { withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const b = await readFile(join(folder, entry.name));
    files[`${prefix}${entry.name}`] = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
  }
  return files;
}

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(py.python === null)(`the language-model session${py.python === null ? ` (skipped: ${py.why})` : ''}`, () => {
  it('loads a folder from its files, rolls out traces the trace reader accepts, trains a step and exports the adapter', async () => {
    const files = await folderFiles(dir, 'tiny/');
    const progress: string[] = [];
    const session = new LmSession((what, done, total) => progress.push(`${what} ${done}/${total}`));
    await expect(session.rollout(PAGE_DEFAULTS, 1, 1, 0, { rootMaxTokens: 8, cloneBudget: 4, maxClones: 2, maxRounds: 1 })).rejects.toThrow(
      'no model is loaded',
    );
    const info = await session.load(files);
    expect(info).toMatchObject({ family: 'qwen2', layers: 2, hiddenSize: 32, heads: 4, kvHeads: 2, chatTemplate: true });
    expect(info.parameters).toBeGreaterThan(20_000);
    const limits = { rootMaxTokens: 12, cloneBudget: 6, maxClones: 2, maxRounds: 1 };
    const { traces } = await session.rollout(PAGE_DEFAULTS, 3, 2, 0.8, limits);
    expect(progress).toEqual(['rollout 1/2', 'rollout 2/2']);
    const episodes = traces.map((t) => episodeTraceOfText(t, 0));
    const back = parseTracesJsonl(tracesToJsonl(episodes));
    expect(back).toEqual(episodes);
    for (const [i, e] of episodes.entries()) {
      const root = e.contexts[0];
      expect(root.spans?.map((s) => s.text)).toEqual(traces[i].contexts[0].pieces);
      expect(root.spans?.filter((s) => s.writer === 'g')).toHaveLength(root.generatedTokens);
      expect(root.generatedTokens).toBeLessThanOrEqual(12);
    }
    await expect(session.exportAdapter()).rejects.toThrow('train a step first');
    const config = { ...PAGE_DEFAULTS, batch: 2, miniBatch: 1, group: 2, temperature: 3 };
    const step = await session.trainStep(config, { r: 2, alpha: 4, targetModules: ['q_proj'] }, limits);
    expect(step.metrics.step).toBe(1);
    expect(step.traces).toHaveLength(4);
    expect(step.traces.every((t) => t.reward !== undefined && t.contexts.every((c) => c.credit !== undefined))).toBe(true);
    const { files: adapter } = await session.exportAdapter();
    expect(JSON.parse(new TextDecoder().decode(adapter['adapter_config.json']))).toMatchObject({
      peft_type: 'LORA',
      r: 2,
      lora_alpha: 4,
      target_modules: ['q_proj'],
    });
    expect(decodeSafetensors(new Uint8Array(adapter['adapter_model.safetensors'])).tensors.size).toBe(4);
    // Stepping: one token a stop, the candidates' probabilities ordered, the episode the same as run at once.
    const small = { rootMaxTokens: 6, cloneBudget: 4, maxClones: 2, maxRounds: 1 };
    const start = await session.stepperStart(PAGE_DEFAULTS, 5, 0, small);
    expect(start.state.done).toBe(false);
    expect(start.state.contexts.map((c) => c.role)).toEqual(['root']);
    const generated = (st: typeof start.state) => [...st.contexts[0].writers].filter((w) => w === 'g').length;
    expect(generated(start.state)).toBe(0);
    const cands = start.state.next?.candidates ?? [];
    expect(cands).toHaveLength(5);
    expect(cands.map((c) => c.prob)).toEqual([...cands.map((c) => c.prob)].sort((x, y) => y - x));
    expect(start.state.next?.picked).toBe(cands[0].piece); // greedy
    const one = await session.stepperAdvance('token');
    expect(generated(one.state)).toBe(1);
    expect(one.state.contexts[0].pieces.at(-1)).toBe(start.state.next?.picked);
    const end = await session.stepperAdvance('end');
    expect(end.state.done).toBe(true);
    expect(end.trace).toBeDefined();
    const { traces: atOnce } = await session.rollout(PAGE_DEFAULTS, 5, 1, 0, small);
    expect(end.trace?.contexts[0].tokens).toEqual(atOnce[0].contexts[0].tokens);
    await expect(session.stepperAdvance('token')).resolves.toMatchObject({ state: { done: true } });
    // A paused episode ends when the weights it decodes with change (a GRPO step), its caches freed.
    const tensors = tf.memory().numTensors;
    await session.stepperStart(PAGE_DEFAULTS, 6, 0, small);
    expect(tf.memory().numTensors).toBeGreaterThan(tensors);
    await session.stepperStart(PAGE_DEFAULTS, 7, 0, small);
    await session.trainStep(config, { r: 2, alpha: 4, targetModules: ['q_proj'] }, limits);
    await expect(session.stepperAdvance('token')).rejects.toThrow('no episode is being stepped');
    expect(tf.memory().numTensors).toBe(tensors);
    await session.dispose();
  }, 120_000);

  it('keeps a bfloat16 checkpoint 16-bit when asked (by default only on WebGPU), with the episodes and steps of the widened model', async () => {
    // The fixture's float32 weights truncated to bfloat16, in the folder's own safetensors.
    const bf16 = join(dir, 'bf16');
    await bfloat16Folder(dir, bf16);
    const files = await folderFiles(bf16);
    const limits = { rootMaxTokens: 10, cloneBudget: 5, maxClones: 2, maxRounds: 1 };
    const config = { ...PAGE_DEFAULTS, batch: 2, miniBatch: 1, group: 2, temperature: 3 };
    const run = async (storage?: 'half' | 'float32') => {
      const session = new LmSession();
      try {
        const info = await session.load(files, storage);
        const { traces } = await session.rollout(PAGE_DEFAULTS, 2, 2, 0, limits);
        const step = await session.trainStep(config, { r: 2, alpha: 4, targetModules: ['q_proj', 'down_proj'] }, limits);
        const { wallSec: _, ...metrics } = step.metrics;
        return { info, tokens: traces.map((t) => t.contexts.map((c) => c.tokens)), metrics };
      } finally {
        await session.dispose();
      }
    };
    const wide = await run('float32');
    const half = await run('half');
    expect(wide.info.halfTensors).toBe(0);
    expect(half.info.halfTensors).toBeGreaterThan(0);
    expect(half.info.heldMegabytes).toBeLessThan(wide.info.heldMegabytes * 0.6);
    expect(half.info.megabytes).toBe(wide.info.megabytes);
    expect(half.tokens).toEqual(wide.tokens);
    expect(half.metrics).toEqual(wide.metrics);
    // On wasm the default widens (keeping 16-bit is WebGPU's default).
    expect((await run()).info.halfTensors).toBe(0);
    await expect(new LmSession().load(files, 'f16' as 'half')).rejects.toThrow('weight storage "f16" is not one of auto, half, float32');
  }, 120_000);

  it('runs a GPT-2 folder through the same session: rollouts, stepping, a GRPO step over its c_attn adapters, a PEFT export', async () => {
    const gpt2 = join(dir, 'gpt2');
    const r = spawnSync(py.python as string, ['test/python/hf_tokenizer_fixture.py', gpt2, 'model', 'gpt2'], { encoding: 'utf8', timeout: 240_000 });
    expect(r.status, r.stderr).toBe(0);
    const files = await folderFiles(gpt2);
    const session = new LmSession();
    try {
      const info = await session.load(files);
      expect(info).toMatchObject({ family: 'gpt2', layers: 2, hiddenSize: 32, heads: 4, kvHeads: 4, chatTemplate: true, attentionTargets: ['c_attn'] });
      const limits = { rootMaxTokens: 10, cloneBudget: 5, maxClones: 2, maxRounds: 1 };
      const { traces } = await session.rollout(PAGE_DEFAULTS, 3, 2, 0.8, limits);
      const episodes = traces.map((t) => episodeTraceOfText(t, 0));
      expect(parseTracesJsonl(tracesToJsonl(episodes))).toEqual(episodes);
      expect(episodes.every((e) => e.contexts[0].generatedTokens > 0 && e.contexts[0].generatedTokens <= 10)).toBe(true);
      const start = await session.stepperStart(PAGE_DEFAULTS, 5, 0, limits);
      const end = await session.stepperAdvance('end');
      expect(start.state.next?.candidates).toHaveLength(5);
      const { traces: atOnce } = await session.rollout(PAGE_DEFAULTS, 5, 1, 0, limits);
      expect(end.trace?.contexts[0].tokens).toEqual(atOnce[0].contexts[0].tokens);
      const step = await session.trainStep(
        { ...PAGE_DEFAULTS, batch: 2, miniBatch: 1, group: 2, temperature: 3 },
        { r: 2, alpha: 4, targetModules: info.attentionTargets },
        limits,
      );
      expect(step.metrics.step).toBe(1);
      const { files: adapter } = await session.exportAdapter();
      expect(JSON.parse(new TextDecoder().decode(adapter['adapter_config.json']))).toMatchObject({ target_modules: ['c_attn'], fan_in_fan_out: true });
      expect([...decodeSafetensors(new Uint8Array(adapter['adapter_model.safetensors'])).tensors.keys()].sort()).toEqual([
        'base_model.model.transformer.h.0.attn.c_attn.lora_A.weight',
        'base_model.model.transformer.h.0.attn.c_attn.lora_B.weight',
        'base_model.model.transformer.h.1.attn.c_attn.lora_A.weight',
        'base_model.model.transformer.h.1.attn.c_attn.lora_B.weight',
      ]);
    } finally {
      await session.dispose();
    }
  }, 300_000);
});
