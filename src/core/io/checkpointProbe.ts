/**
 * The last import check: a fixed token sequence through the model on the backend that will run it.
 *
 * decodeCheckpoint proves every weight finite, but finite weights can still overflow float32 in
 * the forward pass (every weight × 1e30 does), and then the logits are NaN or ±Infinity. Without
 * this probe such a file loads, `logits` prints nulls and sampling fails far from the file. The
 * probe fills the whole context, cycling through the token ids, so every embedding row and every
 * position row is read: one oversized position row poisons every position of a long rollout (the
 * attention's zero weight times its NaN), so a short probe would miss it. About 100 ms for the
 * small preset on wasm. Kept out of checkpoint.ts so that file stays pure (bytes in, arrays out).
 */
import * as tf from '@tensorflow/tfjs';
import type { ModelConfig } from '../model/config';
import { forwardLogits } from '../model/gpt';
import { disposeParams, type GPTParams, paramsFromArrays } from '../model/params';
import { type Checkpoint, CHECKPOINT_FILES, CheckpointError } from './checkpoint';

/** [B, nPositions]: ids 0, 1, … vocabSize-1, 0, 1, … filling each row; more rows only if the context is shorter than the vocabulary. */
export function probeTokens(config: ModelConfig): number[][] {
  const width = config.nPositions;
  const rows: number[][] = [];
  for (let start = 0; start < config.vocabSize; start += width) {
    rows.push(Array.from({ length: width }, (_, t) => (start + t) % config.vocabSize));
  }
  return rows;
}

/**
 * Runs the probe on live weights; throws a CheckpointError naming model.safetensors when a
 * logit is not finite. The caller keeps ownership of `params`.
 */
export async function probeLogits(params: GPTParams, config: ModelConfig): Promise<void> {
  const rows = probeTokens(config);
  const logits = tf.tidy(() => forwardLogits(params, config, tf.tensor2d(rows, [rows.length, rows[0].length], 'int32')));
  let values: Float32Array;
  try {
    values = (await logits.data()) as Float32Array;
  } finally {
    logits.dispose();
  }
  const bad = values.findIndex((v) => !Number.isFinite(v));
  if (bad < 0) return;
  const perRow = rows[0].length * config.vocabSize;
  const row = Math.floor(bad / perRow);
  const position = Math.floor((bad % perRow) / config.vocabSize);
  const largest = await largestWeight(params);
  const cause =
    largest.abs > 1e4
      ? `the weights are too large for float32 arithmetic (largest |value| ${largest.abs.toExponential(2)}, in ${largest.name})`
      : `the weights overflow or divide by zero in the forward pass (largest |value| ${largest.abs.toExponential(2)}, in ${largest.name})`;
  throw new CheckpointError(
    `${CHECKPOINT_FILES.weights}: the model's logits are not finite (${values[bad]} at position ${position} of probe row ${row}, token ${rows[row][position]}): ${cause}`,
  );
}

/** probeLogits on temporary variables made from a decoded checkpoint; frees them either way. */
export async function probeCheckpoint(ckpt: Checkpoint): Promise<void> {
  const params = paramsFromArrays(ckpt.config, ckpt.tensors, { trainable: false });
  try {
    await probeLogits(params, ckpt.config);
  } finally {
    disposeParams(params);
  }
}

async function largestWeight(params: GPTParams): Promise<{ name: string; abs: number }> {
  let best = { name: '', abs: -1 };
  for (const [name, v] of params) {
    const m = tf.tidy(() => tf.max(tf.abs(v)));
    const abs = (await m.data())[0];
    m.dispose();
    if (abs > best.abs) best = { name, abs };
  }
  return best;
}
