/**
 * How fast this project's trainer teaches a small decoder to copy (docs/TRAINING.md, "Copying, the
 * slow part of a text warm start"): `npx tsx scripts/copyProbe.ts FAMILY LAYERS HIDDEN STEPS LR GAP`
 * makes a random FAMILY (qwen2 or gpt2) folder of LAYERS × HIDDEN and trains it, every weight, by
 * the warm start's step (sftStepOf over the model's scorer, AdamW, clip 1, weight decay 0.01) on
 * batches of 16 sequences: a prefix of 5–30 fixed tokens, 12 random digits, a separator, GAP (0 or
 * up to 19) random filler tokens, another separator, the 12 digits again. Only the copy is trained;
 * it prints the copy's loss (nats a token; ln 10 ≈ 2.30 is a guess among the digits) every 50 steps.
 */
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { folderFiles } from '../src/core/io/hfFolderParts';
import { filesFolderReader } from '../src/core/io/hfFolder';
import { INIT_DEFAULT_SIZES, initHfFolder } from '../src/core/model/hfInit';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import type { TrainSequence } from '../src/core/parallel/sequences';
import { fullPolicy, hfScorer } from '../src/core/policyModel';
import { Rng } from '../src/core/rng';
import { scorerLearner, sftStepOf } from '../src/core/sft/sft';
import { initBackend } from '../src/runtime/backend';

const DIGITS = 55; // the protocol tokenizer's "0"; "0".."9" are 55..64
const SEP = 3;

function batch(step: number, gap: boolean): TrainSequence[] {
  const rng = new Rng(1000 + step);
  return Array.from({ length: 16 }, () => {
    const prefix = Array.from({ length: 5 + Math.floor(rng.next() * 26) }, (_, i) => 100 + ((i * 37) % 200));
    const digits = Array.from({ length: 12 }, () => DIGITS + Math.floor(rng.next() * 10));
    const filler = Array.from({ length: gap ? Math.floor(rng.next() * 20) : 0 }, () => 300 + Math.floor(rng.next() * 50));
    const tokens = [...prefix, ...digits, SEP, ...filler, SEP, ...digits];
    const copyFrom = tokens.length - digits.length;
    return { tokens, weights: tokens.slice(1).map((_, i) => (i + 1 >= copyFrom ? 1 : 0)) };
  });
}

async function main(): Promise<void> {
  const [family = 'qwen2', layers = '2', hidden = '64', steps = '400', lr = '3e-3', gap = '1'] = process.argv.slice(2);
  if (family !== 'qwen2' && family !== 'gpt2') throw new Error(`FAMILY must be qwen2 or gpt2 (got ${family})`);
  await initBackend('wasm');
  const h = Number(hidden);
  const parts = initHfFolder(
    family,
    { ...INIT_DEFAULT_SIZES, layers: Number(layers), hiddenSize: h, heads: 4, kvHeads: family === 'gpt2' ? 4 : 2, intermediateSize: 2 * h, maxPositions: 256 },
    3,
  );
  const files = new Map(folderFiles(parts).map((f) => [f.name, f.bytes]));
  const { model } = await loadHfTextModel(filesFolderReader(files), 'float32');
  const policy = fullPolicy(model);
  const learner = scorerLearner(hfScorer(policy.model, policy.trainable));
  const optimizer = new AdamW(policy.trainable, { ...ADAM_MOMENTS, lr: Number(lr), weightDecay: 0.01, gradClip: 1 });
  for (let s = 0; s < Number(steps); s++) {
    const r = await sftStepOf(learner, optimizer, batch(s, gap !== '0'), Number(lr), 1 << 16);
    if (s % 50 === 0 || s === Number(steps) - 1) console.log(`step ${s} copy loss ${r.loss.toFixed(3)}`);
  }
}

main().catch((e: unknown) => {
  console.error((e as Error).message);
  process.exit(1);
});
