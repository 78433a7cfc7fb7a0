/**
 * A policy is a model config plus its weights: the thing rollouts sample from and
 * trainers update. This file bridges it to the checkpoint file set (core/io).
 */
import { type Checkpoint, makeSelfcestMeta, type SelfcestMeta } from './io/checkpoint';
import type { ModelConfig } from './model/config';
import { type GPTParams, paramsFromArrays, paramsToArrays } from './model/params';
import { buildTokenizerConfig, buildTokenizerJson } from './tokenizer/tokenizerJson';

export interface Policy {
  config: ModelConfig;
  params: GPTParams;
}

export async function policyToCheckpoint(p: Policy, meta: Partial<Omit<SelfcestMeta, 'format' | 'vocab'>> = {}): Promise<Checkpoint> {
  return {
    config: p.config,
    tensors: await paramsToArrays(p.params),
    tokenizer: buildTokenizerJson(),
    tokenizerConfig: buildTokenizerConfig(),
    selfcest: makeSelfcestMeta(meta),
  };
}

/** Variables from a decoded (already validated) checkpoint. */
export function policyFromCheckpoint(ckpt: Checkpoint, trainable = true): Policy {
  return { config: ckpt.config, params: paramsFromArrays(ckpt.config, ckpt.tensors, { trainable }) };
}
