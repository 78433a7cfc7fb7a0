/**
 * LoRA over the decoders (GPT-2's Conv1D layers included, PEFT's fan_in_fan_out), against PEFT and torch: test/python/hf_lora_fixture.py puts
 * PEFT adapters (random A and B) on the decoder fixtures and records autograd's gradients of the
 * causal-LM loss; ours must equal them within 1e-4 relative. Then an adapter changed here is
 * exported in PEFT's format and as merged weights in the model's own format, and PEFT and
 * transformers load both (test/python/hf_lora_check.py) to the logits computed here.
 * Skipped, naming what is missing, without torch, transformers and peft.
 */
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readHfConfig, readHfWeights } from '../src/core/io/hfFolder';
import { decodeSafetensors, encodeSafetensors } from '../src/core/io/safetensors';
import { type DecoderParams, decoderConfigFromHf, decoderForward, decoderParams } from '../src/core/model/decoder';
import { Lora, LoraConfigError, loraConfigFromPeft, peftAdapterConfig } from '../src/core/model/lora';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { pythonWith } from './python/python';

const DECODERS = fileURLToPath(new URL('./python/hf_decoder_fixture.py', import.meta.url));
const ADAPTERS = fileURLToPath(new URL('./python/hf_lora_fixture.py', import.meta.url));
const CHECK = fileURLToPath(new URL('./python/hf_lora_check.py', import.meta.url));
const py = pythonWith('torch', 'transformers', 'safetensors', 'peft');
let dir = '';

const folder = nodeFolderReader;

function run(script: string, args: string[]): string {
  const r = spawnSync(py.python as string, [script, ...args], { encoding: 'utf8', timeout: 240_000, maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${script} failed: ${r.stderr || r.error?.message}`);
  return r.stdout;
}

beforeAll(async () => {
  await initBackend('wasm');
  if (py.python === null) return;
  dir = await mkdtemp(join(tmpdir(), 'hf-lora-'));
  run(DECODERS, [dir]);
  run(ADAPTERS, [dir]);
}, 300_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Mean next-token cross-entropy over every position but the last (transformers' causal-LM loss). */
function causalLmLoss(params: DecoderParams, config: ReturnType<typeof decoderConfigFromHf>, lora: Lora, tokens: number[][]): tf.Scalar {
  const [b, t] = [tokens.length, tokens[0].length];
  const logits = decoderForward(params, config, tf.tensor2d(tokens, undefined, 'int32'), null, lora).logits;
  const inputs = tf.slice(logits, [0, 0, 0], [b, t - 1, config.vocabSize]);
  const targets = tf.oneHot(
    tf.tensor2d(
      tokens.map((r) => r.slice(1)),
      undefined,
      'int32',
    ),
    config.vocabSize,
  );
  return tf.neg(tf.mean(tf.sum(tf.mul(tf.logSoftmax(inputs), targets), -1))) as tf.Scalar;
}

describe.skipIf(py.python === null)(`LoRA against PEFT and torch${py.python === null ? ` (skipped: ${py.why})` : ''}`, () => {
  for (const family of ['llama', 'qwen2', 'gpt2'] as const) {
    it(`${family}: the loss and every adapter gradient equal torch autograd's; PEFT and transformers load the exports to our logits`, async () => {
      const config = decoderConfigFromHf(await readHfConfig(folder(join(dir, family))));
      const params = decoderParams(config, await readHfWeights(folder(join(dir, family))));
      const adapterDir = join(dir, `${family}-lora`);
      const l = loraConfigFromPeft(JSON.parse(await readFile(join(adapterDir, 'adapter_config.json'), 'utf8')), config);
      const lora = Lora.fromPeft(config, l, decodeSafetensors(new Uint8Array(await readFile(join(adapterDir, 'adapter_model.safetensors')))).tensors);
      const ref = JSON.parse(await readFile(join(adapterDir, 'reference_grads.json'), 'utf8')) as {
        tokens: number[][];
        loss: number;
        grads: Record<string, number[][]>;
      };
      expect(lora.params.size).toBe(Object.keys(ref.grads).length);
      const { value, grads } = tf.variableGrads(() => causalLmLoss(params, config, lora, ref.tokens), [...lora.params.values()]);
      expect(value.dataSync()[0]).toBeCloseTo(ref.loss, 5);
      for (const [key, v] of lora.params) {
        const [m, part] = [key.slice(0, key.lastIndexOf('.')), key.slice(key.lastIndexOf('.') + 1)];
        const want = ref.grads[`base_model.model.${m}.${part}.weight`].flat();
        const got = grads[v.name].dataSync();
        const scale = Math.max(...want.map(Math.abs));
        expect(scale).toBeGreaterThan(0);
        const worst = want.reduce((w, x, i) => Math.max(w, Math.abs(x - got[i])), 0);
        expect(worst / scale, key).toBeLessThan(1e-4);
      }
      // Change the adapters (one gradient step), export them both ways, and let PEFT and transformers load them.
      for (const v of lora.params.values()) v.assign(tf.sub(v, tf.mul(grads[v.name], 5)));
      value.dispose();
      Object.values(grads).forEach((g) => g.dispose());
      const out = join(dir, `${family}-export`);
      await mkdir(join(out, 'adapter'), { recursive: true });
      await mkdir(join(out, 'merged'), { recursive: true });
      await writeFile(join(out, 'adapter', 'adapter_config.json'), JSON.stringify(peftAdapterConfig(l, config, join(dir, family))));
      await writeFile(join(out, 'adapter', 'adapter_model.safetensors'), encodeSafetensors(await lora.peftTensors()));
      const merged = await lora.merged(params);
      await writeFile(
        join(out, 'merged', 'model.safetensors'),
        encodeSafetensors([...merged].map(([name, data]) => ({ name, shape: [...params.get(name)!.shape], data }))),
      );
      await copyFile(join(dir, family, 'config.json'), join(out, 'merged', 'config.json'));
      const ours = tf.tidy(() => decoderForward(params, config, tf.tensor2d(ref.tokens, undefined, 'int32'), null, lora).logits.arraySync());
      const theirs = JSON.parse(run(CHECK, [join(dir, family), join(out, 'adapter'), join(out, 'merged'), JSON.stringify(ref.tokens)])) as {
        adapter: number[][][];
        merged: number[][][];
      };
      for (const which of ['adapter', 'merged'] as const) {
        let worst = 0;
        theirs[which].forEach((row, b) => row.forEach((v, t) => v.forEach((x, i) => (worst = Math.max(worst, Math.abs(x - ours[b][t][i]))))));
        expect(worst, which).toBeLessThan(1e-4);
      }
      // The merged weights read back here give the adapted model's logits without the adapters.
      const back = decoderParams(config, await readHfWeights(folder(join(out, 'merged'))));
      const plain = tf.tidy(() => decoderForward(back, config, tf.tensor2d(ref.tokens, undefined, 'int32'), null).logits.arraySync());
      expect(Math.max(...plain.flat(2).map((x, i) => Math.abs(x - ours.flat(2)[i])))).toBeLessThan(1e-4);
      back.forEach((t) => t.dispose());
      lora.dispose();
      params.forEach((t) => t.dispose());
    });
  }
});

describe('adapter_config.json', () => {
  const base = { peft_type: 'LORA', r: 4, lora_alpha: 8, target_modules: ['q_proj'] };
  const LLAMA = { family: 'llama' } as const;
  it('reads what PEFT writes and refuses what would compute otherwise, by name', () => {
    // fan_in_fan_out says how the base stores its weights: [out, in] (false), GPT-2's Conv1D [in, out] (true).
    expect(() => loraConfigFromPeft({ ...base, fan_in_fan_out: true }, LLAMA)).toThrow('fan_in_fan_out true is not supported');
    expect(() => loraConfigFromPeft({ ...base, target_modules: ['c_attn'] }, { family: 'gpt2' })).toThrow('fan_in_fan_out undefined is not supported');
    expect(loraConfigFromPeft({ ...base, fan_in_fan_out: true }, { family: 'gpt2' }).r).toBe(4);
    expect(loraConfigFromPeft(base, LLAMA)).toEqual({ r: 4, alpha: 8, targetModules: ['q_proj'] });
    expect(() => loraConfigFromPeft({ ...base, use_rslora: true }, LLAMA)).toThrow('use_rslora true is not supported');
    expect(() => loraConfigFromPeft({ ...base, target_modules: '.*proj' }, LLAMA)).toThrow(LoraConfigError);
    expect(() => loraConfigFromPeft({ ...base, rank_pattern: { q_proj: 8 } }, LLAMA)).toThrow('rank_pattern');
    expect(() => loraConfigFromPeft({ ...base, r: 0 }, LLAMA)).toThrow('r must be a positive integer (got 0)');
    expect(() => loraConfigFromPeft({ ...base, peft_type: 'IA3' }, LLAMA)).toThrow('peft_type "IA3" is not LORA');
  });
});
