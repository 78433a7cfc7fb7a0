/**
 * The warm start of a Hugging Face model: the same demonstrations as the toy's (sft.ts draws
 * them, by the same seed and step), rendered in the text protocol (textDemos.ts), and trained with
 * the mean next-token NLL over the tokens the model writes,
 *
 *   loss = − Σ_rows Σ_t w[t] · log p(tokens[t+1] | tokens[..t]) / Σ w
 *
 * through decoderTargetScores, over what the policy trains (TextPolicy: LoRA adapters or every
 * weight), by AdamW at the toy's cosine schedule. Micro-batches are weighted by their share of the
 * step's trained tokens, so how the sequences are cut cannot change the gradient.
 */
import * as tf from '@tensorflow/tfjs';
import { decoderTargetScores } from '../model/decoder';
import type { AdamW } from '../optim/adamw';
import { type TrainSequence, groupPlan, padBatch } from '../parallel/sequences';
import { type TextPolicy, addPolicyGrads } from '../rl/textGrpo';
import type { HfTokenizer } from '../tokenizer/hfTokenizer';
import { Tokenizer } from '../tokenizer/tokenizer';
import { type SftConfig, type SftStepOutcome, type TaskMixEntry, sftMixSequences } from './sft';
import { type TextDemoLengths, renderTextDemo, textDemoContexts, textTrainSequence } from './textDemos';

const toy = Tokenizer.builtin();

/**
 * The sequences of one warm-start step for a text model: the toy's draw (sftMixSequences) with each
 * demonstration rendered and tokenized as the text loop has it. A demonstration with a context past
 * the model's window, a root past `rootMaxTokens` or a clone past `cloneBudget` is left out whole and
 * the next problem drawn (the loop could not run it). The toy's sloppy clones apply (a clone
 * without its answer is cut at the clone budget); a root limit in the prompt has no text form.
 */
export function textSftSequences<O>(
  mix: readonly TaskMixEntry<O>[],
  cfg: SftConfig,
  step: number,
  tokenizer: HfTokenizer,
  lengths: TextDemoLengths,
  maxPositions: number,
): TrainSequence[] {
  if (cfg.rootLimits) throw new Error('sft: a root limit in the prompt has no form in the text protocol');
  return sftMixSequences(
    mix,
    cfg,
    step,
    (t) => toy.encode(t),
    maxPositions,
    (demo) => textDemoContexts(renderTextDemo(demo), tokenizer, lengths)?.map(textTrainSequence) ?? null,
  );
}

/** The masked NLL of `seqs` (summed over micro-batches, each its share of the token mean) and its gradients by the policy's keys. */
export async function textSftLossAndGrads(
  policy: TextPolicy,
  seqs: readonly TrainSequence[],
  microTokens: number,
): Promise<{ loss: number; grads: Map<string, tf.Tensor>; trainedTokens: number }> {
  const total = seqs.reduce((n, s) => n + s.weights.reduce((a, b) => a + b, 0), 0);
  if (total === 0) throw new Error('sft: no trainable tokens in the batch');
  const { config, params, adapters } = policy.model;
  const vars = [...policy.trainable.values()];
  const plan = groupPlan(
    seqs.map((s) => s.tokens.length - 1),
    1,
    microTokens,
  );
  const grads = new Map<string, tf.Tensor>();
  let loss = 0;
  for (const group of plan.groups) {
    const b = padBatch(seqs, group);
    const g = tf.variableGrads(() => {
      const inputs = tf.tensor2d(b.inputs, [b.rows, b.length], 'int32');
      const targets = tf.tensor2d(b.targets, [b.rows, b.length], 'int32');
      const weights = tf.tensor2d(b.weights, [b.rows, b.length], 'float32');
      const { logp } = decoderTargetScores(params, config, inputs, targets, 1, adapters);
      return tf.div(tf.neg(tf.sum(tf.mul(logp, weights))), total) as tf.Scalar;
    }, vars);
    loss += (await g.value.data())[0];
    g.value.dispose();
    addPolicyGrads(grads, policy, g.grads);
  }
  return { loss, grads, trainedTokens: total };
}

/** One warm-start step of a text model over `seqs`; a non-finite loss or gradient skips the update. */
export async function textSftStep(
  policy: TextPolicy,
  optimizer: AdamW,
  seqs: readonly TrainSequence[],
  lr: number,
  microTokens: number,
): Promise<SftStepOutcome> {
  const { loss, grads, trainedTokens } = await textSftLossAndGrads(policy, seqs, microTokens);
  try {
    const stats = Number.isFinite(loss) ? await optimizer.apply(grads, lr) : { gradNorm: NaN, applied: false };
    return { loss, ...stats, trainedTokens, tokens: seqs.reduce((n, s) => n + s.tokens.length, 0) };
  } finally {
    grads.forEach((t) => t.dispose());
  }
}
