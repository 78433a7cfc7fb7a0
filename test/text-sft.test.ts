/**
 * The warm start of a Hugging Face model (src/core/sft/textSft.ts) against PyTorch: on a folder made
 * by `init --family qwen2` and the demonstrations of a step as the text protocol renders them, the
 * masked NLL and its gradients (LoRA adapters through PEFT; every weight of the base) equal torch
 * autograd's in float64 (test/python/text_sft_check.py; skipped, naming what is missing, without
 * torch, transformers and peft). Micro-batching does not change them; steps lower the loss and
 * leave no tensor behind.
 */
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { SHORT_SYSTEM_PROMPT } from '../src/core/verl/dataset';
import { encodeSafetensors } from '../src/core/io/safetensors';
import { INIT_DEFAULT_SIZES, initHfFolder } from '../src/core/model/hfInit';
import { Lora, peftAdapterConfig } from '../src/core/model/lora';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import type { TrainSequence } from '../src/core/parallel/sequences';
import { type TextModel, type TextPolicy, fullPolicy, loraPolicy } from '../src/core/policyModel';
import { defaultRolloutConfig } from '../src/core/runConfigTargets';
import { SFT_FIXED, type SftConfig } from '../src/core/sft/sft';
import { textSftSequences } from '../src/core/sft/textSft';
import { scorerLearner, sftLossAndGrads, sftStepOf } from '../src/core/sft/sft';
import { hfScorer } from '../src/core/policyModel';

/** A text policy's warm-start learner: the one SFT step over its scorer. */
const learnerOf = (p: TextPolicy) => scorerLearner(hfScorer(p.model, p.trainable));
import { withOptions } from '../src/core/tasks';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { writeHfFolder } from '../src/runtime/node/folderWriter';
import { pythonWith } from './python/python';

const CHECK = fileURLToPath(new URL('./python/text_sft_check.py', import.meta.url));
const py = pythonWith('torch', 'transformers', 'peft');
let dir = '';
let model: TextModel;
const LENGTHS = { rootMaxTokens: 256, cloneBudget: 48 };

const cfg = (over: Partial<SftConfig> = {}): SftConfig => ({
  task: 'arithmetic',
  taskOptions: {},
  steps: 10,
  batchTokens: 500,
  microTokens: 1 << 16,
  lr: 3e-3,
  warmup: 0,
  ...SFT_FIXED,
  delegateFraction: 0.8,
  limits: defaultRolloutConfig('arithmetic'),
  teacher: 'naive',
  seed: 4,
  ...over,
});

function sequences(step = 0): TrainSequence[] {
  return textSftSequences([withOptions('arithmetic')], cfg(), step, model.tokenizer, LENGTHS, model.config.maxPositions);
}

beforeAll(async () => {
  await initBackend('wasm');
  dir = await mkdtemp(join(tmpdir(), 'text-sft-'));
  await writeHfFolder(
    join(dir, 'model'),
    initHfFolder('qwen2', { ...INIT_DEFAULT_SIZES, layers: 2, hiddenSize: 32, heads: 4, kvHeads: 2, intermediateSize: 48, maxPositions: 1024 }, 8),
  );
  model = (await loadHfTextModel(nodeFolderReader(join(dir, 'model')), 'float32')).model;
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** torch's loss and gradients of `seqs` (adapter folder, or "-" for every weight of the base). */
async function torchSide(adapter: string, seqs: readonly TrainSequence[]): Promise<{ loss: number; grads: Record<string, number[] | number[][]> }> {
  const file = join(dir, 'seqs.json');
  await writeFile(file, JSON.stringify(seqs));
  const r = spawnSync(py.python as string, [CHECK, join(dir, 'model'), adapter, file], { encoding: 'utf8', timeout: 240_000, maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`text_sft_check.py failed: ${r.stderr || r.error?.message}`);
  return JSON.parse(r.stdout);
}

function expectClose(got: ArrayLike<number>, want: number[], what: string) {
  const scale = Math.max(1e-3, ...want.map(Math.abs));
  let worst = 0;
  want.forEach((w, i) => (worst = Math.max(worst, Math.abs(got[i] - w))));
  expect(worst / scale, what).toBeLessThan(1e-4);
}

describe('the warm start of a Hugging Face model', () => {
  it('draws demonstrations the loop could run: the model writes every trained token, prompts and tool responses are masked', () => {
    const seqs = sequences();
    expect(seqs.reduce((n, s) => n + s.tokens.length, 0)).toBeGreaterThanOrEqual(500);
    for (const s of seqs) {
      expect(s.weights.length).toBe(s.tokens.length - 1);
      expect(s.tokens.length).toBeLessThanOrEqual(model.config.maxPositions);
      expect(s.weights[0]).toBe(0);
    }
    // The same seed and step draw the same data; another step other data.
    expect(sequences()).toEqual(seqs);
    expect(sequences(1)).not.toEqual(seqs);
  });

  it("tells a root its drawn limit in the prompt set's words, and keeps it to that many of its own tokens", () => {
    const told = textSftSequences([withOptions('arithmetic')], cfg({ rootLimits: { min: 24, max: 48 } }), 0, model.tokenizer, LENGTHS, 1024);
    let roots = 0;
    for (const s of told) {
      const text = model.tokenizer.decode(s.tokens);
      if (!text.includes(SHORT_SYSTEM_PROMPT)) continue;
      roots++;
      // The short set: `#L ` before the problem in the user message.
      const m = /<\|im_start\|>user\n#(\d+) /.exec(text);
      expect(m, text).not.toBeNull();
      const limit = Number(m![1]);
      expect(limit).toBeGreaterThanOrEqual(24);
      expect(limit).toBeLessThanOrEqual(48);
      expect(s.weights.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(limit);
    }
    expect(roots).toBeGreaterThan(3);
  });

  it('micro-batching leaves the loss and the gradients as they are', async () => {
    const seqs = sequences();
    const lora = Lora.init(model.config, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj'] }, 3);
    try {
      const policy = loraPolicy(model, lora);
      const whole = await sftLossAndGrads(learnerOf(policy), seqs, 1 << 20);
      const cut = await sftLossAndGrads(learnerOf(policy), seqs, 200);
      expect(cut.loss).toBeCloseTo(whole.loss, 5);
      for (const [k, g] of whole.grads) expectClose(await cut.grads.get(k)!.data(), Array.from(await g.data()), k);
      [...whole.grads.values(), ...cut.grads.values()].forEach((t) => t.dispose());
    } finally {
      lora.dispose();
    }
  }, 120_000);

  it('steps (every weight) lower the loss and leave no tensor behind', async () => {
    const seqs = sequences();
    const policy = fullPolicy(model);
    const opt = new AdamW(policy.trainable, { lr: 3e-3, ...ADAM_MOMENTS, weightDecay: 0.01, gradClip: 1 });
    try {
      const first = await sftStepOf(learnerOf(policy), opt, seqs, 3e-3, 300);
      const before = tf.memory().numTensors;
      let last = first;
      for (let i = 0; i < 8; i++) last = await sftStepOf(learnerOf(policy), opt, seqs, 3e-3, 300);
      expect(tf.memory().numTensors).toBe(before);
      expect(first.applied && last.applied).toBe(true);
      expect(last.loss).toBeLessThan(first.loss - 0.5);
      expect(first.trainedTokens).toBe(seqs.reduce((n, s) => n + s.weights.reduce((a, b) => a + b, 0), 0));
    } finally {
      opt.dispose();
      policy.trainable.forEach((v) => v.dispose());
    }
  }, 120_000);

  describe.skipIf(py.python === null)(`equals torch autograd${py.python === null ? ` (skipped: ${py.why})` : ''}`, () => {
    it('LoRA: the loss and every adapter gradient equal PEFT with torch autograd', async () => {
      const seqs = sequences().slice(0, 6);
      const lora = Lora.init(model.config, { r: 4, alpha: 8, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] }, 3);
      // B starts at zero, where A's gradient is zero: give it values so that both are checked.
      lora.params.forEach((v, k) => k.endsWith('lora_B') && v.assign(tf.randomNormal(v.shape, 0, 0.05, 'float32', 7)));
      await mkdir(join(dir, 'adapter'), { recursive: true });
      await writeFile(join(dir, 'adapter', 'adapter_config.json'), JSON.stringify(peftAdapterConfig(lora.config, model.config, join(dir, 'model'))));
      await writeFile(join(dir, 'adapter', 'adapter_model.safetensors'), encodeSafetensors(await lora.peftTensors()));
      const ours = await sftLossAndGrads(learnerOf(loraPolicy(model, lora)), seqs, 256);
      const theirs = await torchSide(join(dir, 'adapter'), seqs);
      expect(Math.abs(ours.loss - theirs.loss) / theirs.loss).toBeLessThan(1e-4);
      expect([...ours.grads.keys()].map((k) => `${k}.weight`).sort()).toEqual(Object.keys(theirs.grads).sort());
      for (const [k, g] of ours.grads) expectClose(await g.data(), (theirs.grads[`${k}.weight`] as number[][]).flat(), k);
      ours.grads.forEach((t) => t.dispose());
      lora.dispose();
    }, 240_000);

    it('full fine-tuning: the loss and the gradient of every weight equal torch autograd', async () => {
      const seqs = sequences().slice(0, 4);
      const policy = fullPolicy(model);
      const ours = await sftLossAndGrads(learnerOf(policy), seqs, 1 << 20);
      const theirs = await torchSide('-', seqs);
      expect(Math.abs(ours.loss - theirs.loss) / theirs.loss).toBeLessThan(1e-4);
      expect([...ours.grads.keys()].sort()).toEqual(Object.keys(theirs.grads).sort());
      for (const [k, g] of ours.grads) expectClose(await g.data(), [theirs.grads[k]].flat(2) as number[], k);
      ours.grads.forEach((t) => t.dispose());
      policy.trainable.forEach((v) => v.dispose());
    }, 240_000);
  });
});
