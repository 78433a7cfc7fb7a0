import * as tf from '@tensorflow/tfjs';
import { defineCommand } from '../command';
import { UsageError } from '../args';
import { BACKEND_FLAG, getTokenizer, loadPolicyFlag, setupBackend } from '../setup';
import { forwardLogits } from '../../core/model/gpt';
import { disposeParams } from '../../core/model/params';

export const logits = defineCommand(
  'logits',
  'Print the token ids and per-position logits of a text (no special tokens added).',
  {
    checkpoint: { type: 'string', dir: true, required: true, help: 'checkpoint directory' },
    text: { type: 'string', required: true, help: 'input text (special tokens written <name>)' },
    json: { type: 'bool', default: false, help: 'print {"tokens": [...], "logits": [[...], ...]}' },
    backend: BACKEND_FLAG,
  },
  async (f) => {
    let tokens: number[];
    try {
      tokens = getTokenizer().encode(f.text);
    } catch (e) {
      throw new UsageError(`--text ${JSON.stringify(f.text)}: ${(e as Error).message}`);
    }
    if (tokens.length === 0) throw new UsageError('--text is empty: give the text whose logits to print (special tokens written <name>)');
    await setupBackend(f.backend);
    const { policy } = await loadPolicyFlag('checkpoint', f.checkpoint, false);
    if (tokens.length > policy.config.nPositions) {
      disposeParams(policy.params);
      throw new UsageError(`--text has ${tokens.length} tokens; the model holds at most ${policy.config.nPositions}`);
    }
    const out = tf.tidy(() => forwardLogits(policy.params, policy.config, tf.tensor2d([tokens], [1, tokens.length], 'int32')));
    const rows = (await out.array())[0];
    out.dispose();
    disposeParams(policy.params);
    // JSON writes NaN and ±Infinity as null: refuse instead of printing numbers that are not there.
    rows.forEach((row, i) => {
      const j = row.findIndex((v) => !Number.isFinite(v));
      if (j >= 0) {
        throw new Error(
          `${f.checkpoint}: the logits are not finite (${row[j]} for token ${j} at position ${i} of --text); the weights are probably too large for float32`,
        );
      }
    });
    if (f.json) {
      console.log(JSON.stringify({ tokens, logits: rows }));
    } else {
      rows.forEach((row, i) => {
        const best = row.indexOf(Math.max(...row));
        console.log(`${i}\t${tokens[i]}\tnext argmax ${best}`);
      });
    }
  },
);
