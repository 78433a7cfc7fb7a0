/**
 * The Hugging Face folders shipped under public/checkpoints/ (those with a tokenizer_config.json and no selfcest.json): each is at
 * most 20 MB, our loader reads it, and transformers' AutoTokenizer and AutoModelForCausalLM read it
 * to the same chat text, ids and logits (within 2e-4 of the largest logit on the first 256 positions, 5e-4 past them) on episodes of both tasks rendered in the
 * folder's own prompt set (a delegating root with its tool response and answer, a clone, the
 * monolithic chat). `SHIPPED_HF` (a comma list of folders) checks others instead, such as a run's save.
 */
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { decoderLogits } from '../src/core/model/decoder';
import { textPrompts } from '../src/core/protocol/prompts';
import { SPAWN_CLONE_TOOL } from '../src/core/protocol/toolCalls';
import { Rng } from '../src/core/rng';
import { defaultRolloutConfig } from '../src/core/runConfigTargets';
import { type TextChat, renderTextDemo } from '../src/core/sft/textDemos';
import { type TaskName, withOptions } from '../src/core/tasks';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { pythonWith } from './python/python';

const CHECK = fileURLToPath(new URL('./python/hf_init_check.py', import.meta.url));
const ROOT = fileURLToPath(new URL('../public/checkpoints/', import.meta.url));
const py = pythonWith('torch', 'transformers');
const MAX_BYTES = 20e6;

const folders = process.env.SHIPPED_HF
  ? process.env.SHIPPED_HF.split(',')
  : readdirSync(ROOT)
      .map((name) => join(ROOT, name))
      // A Hugging Face model folder, not a toy checkpoint (which also has a config.json, beside its selfcest.json).
      .filter((dir) => existsSync(join(dir, 'tokenizer_config.json')) && !existsSync(join(dir, 'selfcest.json')));

let tmp = '';
beforeAll(async () => {
  await initBackend('wasm');
  tmp = await mkdtemp(join(tmpdir(), 'shipped-hf-'));
});
afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** A delegating and a monolithic demonstration of each task in `prompts`' words: the root chat, its first clone's and the mono chat. */
function chats(set: Parameters<typeof textPrompts>[0]): TextChat[] {
  const out: TextChat[] = [];
  for (const task of ['arithmetic', 'multihop'] as TaskName[]) {
    const { task: t, opts } = withOptions(task);
    const rng = new Rng(7);
    const p = t.generate(rng, opts, `shipped-${task}`);
    const delegated = t.teacherDelegate(p, rng, defaultRolloutConfig(task), 'expert');
    if (delegated) {
      const demo = renderTextDemo(delegated, textPrompts(set));
      out.push(demo.root, ...demo.clones.slice(0, 1));
    }
    out.push(renderTextDemo(t.teacherMono(p, rng), textPrompts(set)).root);
  }
  return out;
}

describe('shipped Hugging Face folders', () => {
  it('are there to check (public/checkpoints/ or SHIPPED_HF)', () => {
    expect(folders.length).toBeGreaterThan(0);
  });

  for (const dir of folders) {
    it(`${dir}: at most 20 MB, read by our loader`, async () => {
      const bytes = readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
      expect(bytes).toBeLessThanOrEqual(MAX_BYTES);
      const loaded = await loadHfTextModel(nodeFolderReader(dir), 'float32');
      expect(loaded.model.tokenizer.hasChatTemplate).toBe(true);
      loaded.model.params.forEach((t) => t.dispose());
    });

    it.skipIf(py.python === null)(
      `${dir}: transformers reads the same chat text, ids and logits${py.python === null ? ` (skipped: ${py.why})` : ''}`,
      async () => {
        const { config, tokenizer, params } = (await loadHfTextModel(nodeFolderReader(dir), 'float32')).model;
        const cs = chats(tokenizer.prompts);
        const tools = (c: TextChat) => (c.tools ? [SPAWN_CLONE_TOOL] : undefined);
        const name = dir.replace(/[^a-z0-9]+/gi, '-');
        const cases = join(tmp, `${name}.cases.json`);
        const result = join(tmp, `${name}.out.json`);
        await writeFile(
          cases,
          JSON.stringify({ texts: [], chats: cs.map((c) => ({ messages: c.messages, tools: tools(c) ?? null, add_generation_prompt: false })) }),
        );
        const run = spawnSync(py.python as string, [CHECK, dir, cases, result], { encoding: 'utf8', timeout: 120_000 });
        expect(run.status, run.stderr).toBe(0);
        const ref = JSON.parse(await readFile(result, 'utf8')) as { chats: { text: string; ids: number[]; logits: number[][] }[] };
        cs.forEach((c, i) => {
          expect(tokenizer.chatText(c.messages, false, tools(c))).toBe(ref.chats[i].text);
          expect(tokenizer.chatIds(c.messages, false, tools(c))).toEqual(ref.chats[i].ids);
          const ids = ref.chats[i].ids;
          const ours = tf.tidy(() => decoderLogits(params, config, tf.tensor2d([ids], [1, ids.length], 'int32')).arraySync()[0]);
          // float32 in both, summed in other orders. The difference grows with the position: transformers
          // takes its rotary angles in float32, this project in float64 (docs/FORMATS.md, "Shipped
          // Hugging Face folders": against a float64 forward with float64 angles both are within
          // 1e-3 on a 487-token chat), so the bound is relative to the logits' size, looser past 256.
          let early = 0;
          let all = 0;
          let scale = 0;
          ref.chats[i].logits.forEach((row, t) =>
            row.forEach((v, k) => {
              const d = Math.abs(v - ours[t][k]);
              all = Math.max(all, d);
              if (t < 256) early = Math.max(early, d);
              scale = Math.max(scale, Math.abs(v));
            }),
          );
          console.log(
            `${dir} chat ${i}: ${ids.length} tokens, largest |logit| ${scale.toFixed(2)}, largest difference ${early.toExponential(2)} (first 256), ${all.toExponential(2)} (all)`,
          );
          expect(early / Math.max(1, scale), `chat ${i}, first 256 positions`).toBeLessThanOrEqual(2e-4);
          expect(all / Math.max(1, scale), `chat ${i}`).toBeLessThanOrEqual(5e-4);
        });
        params.forEach((t) => t.dispose());
      },
      180_000,
    );
  }
});
