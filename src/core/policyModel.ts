/**
 * The model seam: what the trainer, the rollouts and the warm start need of a model, so that the
 * toy and every Hugging Face family run through one runner and one trainer.
 *
 *   Scorer       the variables training updates, and the log-probs (and entropies) of target
 *                tokens after inputs: what the policy loss, the reference pass and SFT read;
 *   PolicyModel  a Scorer that also decodes (a ContextDecoder for the rollout scheduler over the
 *                weights as they are now) in its protocol (the toy's token grammar, or tool calls
 *                in text under a chat template).
 *
 * The toy's fast kernels (BatchedDecoder, its hand-written backward) are the toy's side of this
 * one interface; a Hugging Face model's side is decoderForward with its LoRA adapters.
 */
import * as tf from '@tensorflow/tfjs';
import type { Policy } from './policy';
import type { Protocol } from './protocol/protocol';
import { textProtocol } from './protocol/textProtocol';
import { tokenProtocol } from './protocol/tokenProtocol';
import { PolicyDecoder } from './rollout/policyDecoder';
import type { RolloutConfig } from './rollout/config';
import type { ContextDecoder } from './rollout/scheduler';
import type { HfTokenizer } from './tokenizer/hfTokenizer';
import type { ModelConfig } from './model/config';
import { type Adapters, type DecoderConfig, type DecoderParams, decoderTargetScores, decoderTensorSpecs } from './model/decoder';
import { targetLogProbsAndEntropy } from './model/gpt';
import { HfContextDecoder } from './model/hfContextDecoder';
import { asFloat } from './model/halfWeights';
import { type Lora, type LoraConfig, attentionTargets, linearModules } from './model/lora';
import { type RunConfig, RunConfigError } from './runConfig';
import { type GPTParams, paramsFromArrays } from './model/params';

export interface Scorer {
  /** The variables a gradient is taken for (and an optimizer updates), by name. */
  readonly params: ReadonlyMap<string, tf.Variable>;
  /** Log-probs [B, T] of `targets` after `inputs` (both [B, T]) at `temperature`, and each position's entropy; call inside a tidy or a gradient. */
  scores(inputs: tf.Tensor2D, targets: tf.Tensor2D, temperature: number): { logp: tf.Tensor2D; entropy: tf.Tensor2D };
}

export interface PolicyModel extends Scorer {
  /** The model's protocol, with the rollout's settings it reads (the toy cuts injected answers to `answerMaxChars`). */
  protocol(rollout: Pick<RolloutConfig, 'answerMaxChars'>): Protocol;
  readonly vocabSize: number;
  /** Longest context the model holds. */
  readonly maxPositions: number;
  /** A decoder over the weights as they are now, with room for `capacity` contexts to start with; the caller disposes it. */
  decoder(capacity: number): ContextDecoder & { dispose(): void };
  /** The toy's policy behind this model; absent for a Hugging Face model. */
  readonly toy?: Policy;
  /**
   * What a gradient worker needs to rebuild this model from its trained weights (`params`) alone;
   * absent where those are not the whole model (LoRA adapters over frozen weights).
   */
  readonly replica?: ReplicaSpec;
}

/** A model a worker rebuilds from its weights: the toy GPT, or a Hugging Face decoder of this config.json. */
export type ReplicaSpec = { kind: 'toy'; config: ModelConfig } | { kind: 'hf'; config: DecoderConfig };

export const sameReplica = (a: ReplicaSpec, b: ReplicaSpec): boolean => JSON.stringify(a) === JSON.stringify(b);

/** A replica's vocabulary and window. */
export const replicaShape = (spec: ReplicaSpec): { vocabSize: number; maxPositions: number } =>
  spec.kind === 'toy'
    ? { vocabSize: spec.config.vocabSize, maxPositions: spec.config.nPositions }
    : { vocabSize: spec.config.vocabSize, maxPositions: spec.config.maxPositions };

/**
 * The weights of `spec` as variables (names, sizes and finiteness checked before any is made),
 * with the model's scorer over them: what a gradient worker computes with.
 */
export function replicaFromArrays(spec: ReplicaSpec, arrays: ReadonlyMap<string, Float32Array>, trainable = true): Scorer {
  if (spec.kind === 'toy') return toyScorer(paramsFromArrays(spec.config, arrays, { trainable }), spec.config);
  const specs = decoderTensorSpecs(spec.config);
  const known = new Set(specs.map((t) => t.name));
  const unknown = [...arrays.keys()].filter((k) => !known.has(k));
  if (unknown.length > 0) throw new Error(`weights: unexpected tensor(s) ${unknown.slice(0, 5).join(', ')} for this config.json`);
  for (const { name, shape } of specs) {
    const a = arrays.get(name);
    const size = shape.reduce((x, y) => x * y, 1);
    if (a === undefined || a.length !== size)
      throw new Error(`weights: ${name} must have shape [${shape.join(', ')}] (${size} values), got ${a?.length ?? 'none'}`);
    const bad = a.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) throw new Error(`weights: ${name} has a non-finite value at index ${bad}`);
  }
  const params = new Map(
    specs.map(({ name, shape }) => [name, tf.tidy(() => tf.variable(tf.tensor(arrays.get(name) as Float32Array, shape, 'float32'), trainable))]),
  );
  return hfScorer({ config: spec.config, params }, params);
}

/** The toy GPT's scorer over `params` (all of them trained). */
export function toyScorer(params: GPTParams, config: ModelConfig): Scorer {
  return { params, scores: (inputs, targets, temperature) => targetLogProbsAndEntropy(params, config, inputs, targets, temperature) };
}

/** The toy GPT as a policy model: the token grammar, its batched decoder and its scorer. */
export function toyPolicyModel(policy: Policy, encode: (text: string) => number[]): PolicyModel {
  return {
    ...toyScorer(policy.params, policy.config),
    protocol: (rollout) => tokenProtocol(encode, rollout.answerMaxChars),
    vocabSize: policy.config.vocabSize,
    maxPositions: policy.config.nPositions,
    decoder: (capacity) => new PolicyDecoder(policy, capacity),
    toy: policy,
    replica: { kind: 'toy', config: policy.config },
  };
}

/** A Hugging Face decoder's weights, with the adapters it decodes with (LoRA) where it has them. */
export interface HfWeights {
  config: DecoderConfig;
  params: DecoderParams;
  adapters?: Adapters;
}

/** A Hugging Face model as held: its weights (and the adapters it decodes with) and its tokenizer. */
export interface TextModel extends HfWeights {
  tokenizer: HfTokenizer;
}

/** A model being trained, and what of it trains. */
export interface TextPolicy {
  /** What decodes and is scored: the weights, with the adapters where LoRA trains. */
  model: TextModel;
  /** What the optimizer updates (keys as the optimizer's): the adapters' A and B, or every weight. */
  trainable: Map<string, tf.Variable>;
  /** The KL reference's weights, decoded without adapters: the frozen base (LoRA) or the starting weights. */
  reference: DecoderParams;
}

/** Adds one micro-batch's gradients (by variable name, tf.variableGrads) into `sum` (by the policy's keys); takes ownership of them. */
export function addPolicyGrads(sum: Map<string, tf.Tensor>, policy: Pick<TextPolicy, 'trainable'>, byVariable: tf.NamedTensorMap): void {
  for (const [name, v] of policy.trainable) {
    const gv = byVariable[v.name];
    if (!gv) continue;
    const prev = sum.get(name);
    sum.set(name, prev ? tf.tidy(() => tf.add(prev, gv)) : gv);
    if (prev) {
      prev.dispose();
      gv.dispose();
    }
  }
}

/**
 * What of a Hugging Face model trains, from the run config: every weight (`loraR` 0) or LoRA
 * adapters of the named layers (`loraTargets`; empty: the attention's), checked against the model.
 */
export function textTrainingOf(rc: Pick<RunConfig, 'loraR' | 'loraAlpha' | 'loraTargets'>, config: DecoderConfig): { full: boolean; lora: LoraConfig } {
  const full = rc.loraR === 0;
  const targets = rc.loraTargets === '' ? attentionTargets(config) : rc.loraTargets.split(',');
  const modules = new Set([...linearModules(config).keys()].map((m) => m.split('.').at(-1) as string));
  const unknown = targets.filter((t) => !modules.has(t));
  if (!full && (targets.length === 0 || unknown.length > 0)) {
    throw new RunConfigError([
      `loraTargets: ${targets.length === 0 ? 'name at least one layer' : `${unknown.join(', ')} is not a linear layer of this model`} (it has ${[...modules].sort().join(', ')})`,
    ]);
  }
  return { full, lora: { r: rc.loraR, alpha: rc.loraAlpha, targetModules: targets } };
}

/** A policy that trains LoRA adapters over frozen base weights. */
export function loraPolicy(model: TextModel, adapters: Lora): TextPolicy {
  return { model: { ...model, adapters }, trainable: adapters.params, reference: model.params };
}

/**
 * A policy that trains every weight: the weights become variables (`model.params` stays as the
 * frozen reference, sharing their memory until the first update).
 */
export function fullPolicy(model: TextModel): TextPolicy {
  // Variables are float32: a 16-bit matrix is widened once here.
  const trainable = new Map(
    [...model.params].map(([k, t]) => {
      const w = asFloat(t);
      // Unnamed: tfjs names it uniquely, so two models' weights may live at once.
      const v = tf.variable(w, true);
      // The variable holds the widened data; the widening's own handle goes.
      if (w !== t) w.dispose();
      return [k, v] as const;
    }),
  );
  return { model: { config: model.config, tokenizer: model.tokenizer, params: trainable }, trainable, reference: model.params };
}

/** A Hugging Face decoder's scorer: `trainable` (its LoRA adapters, or every weight) is what a gradient is taken for. */
export function hfScorer(w: HfWeights, trainable: ReadonlyMap<string, tf.Variable>): Scorer {
  return { params: trainable, scores: (inputs, targets, temperature) => decoderTargetScores(w.params, w.config, inputs, targets, temperature, w.adapters) };
}

/**
 * A Hugging Face decoder's frozen KL reference, decoded without adapters (the base under LoRA, or
 * the weights as loaded): no gradient is taken for it, and its weights stand as its `params`,
 * what a gradient worker rebuilds the reference from.
 */
export function hfReferenceScorer(config: DecoderConfig, params: DecoderParams): Scorer {
  return {
    // Frozen tensors, not variables: the gradient code only reads (and sends) them.
    params: params as ReadonlyMap<string, tf.Tensor> as ReadonlyMap<string, tf.Variable>,
    scores: (inputs, targets, temperature) => decoderTargetScores(params, config, inputs, targets, temperature),
  };
}

/** A Hugging Face decoder as a policy model: the text protocol under its tokenizer's chat template, decoded by HfContextDecoder. */
export function hfPolicyModel(w: HfWeights, tokenizer: HfTokenizer, trainable: ReadonlyMap<string, tf.Variable>): PolicyModel {
  const protocol = textProtocol(tokenizer);
  return {
    ...hfScorer(w, trainable),
    protocol: () => protocol,
    vocabSize: w.config.vocabSize,
    maxPositions: w.config.maxPositions,
    decoder: () => Object.assign(new HfContextDecoder(w.params, w.config, w.adapters), { protocol }),
    // Every weight trained (no adapters): a worker rebuilds the model from them.
    ...(w.adapters === undefined && trainable.size === w.params.size ? { replica: { kind: 'hf', config: w.config } as const } : {}),
  };
}
