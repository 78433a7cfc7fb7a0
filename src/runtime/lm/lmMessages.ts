/**
 * The messages between the page and the language-model worker (lm.worker.ts), which holds a
 * Hugging Face model (gpt2, llama, qwen2, qwen3) picked from disk and runs the spawn_clone text
 * protocol and GRPO with LoRA on it. Request/reply and events as transport/rpc.ts carries them.
 */
import type { FrontierPoint } from '../../core/eval/frontier';
import type { WeightStoragePreference } from '../../core/io/hfTextModel';
import type { LoraConfig } from '../../core/model/lora';
import type { TextStepAnatomy, TextStepMetrics } from '../../core/rl/textGrpo';
import type { TextEpisodeTrace } from '../../core/rollout/textTrace';
import type { TextLimits } from '../../core/rollout/textLimits';
import type { RunConfig } from '../../core/runConfig';
import type { BackendPreference } from '../backend';
import type { LmStepperState, StepUntil } from './lmStepper';

/** A model folder's files by name (config.json, model.safetensors, tokenizer.json, …). */
export type LmFiles = Record<string, ArrayBuffer>;

export interface LmModelInfo {
  family: string;
  parameters: number;
  /** The weights as float32, MB. */
  megabytes: number;
  /** The weights as held (16-bit matrices at 2 bytes a value), MB. */
  heldMegabytes: number;
  /** How many weight matrices are held 16-bit (float16 or bfloat16, as the checkpoint stores them). */
  halfTensors: number;
  /** What the backend holds after loading, MB. */
  backendMegabytes: number;
  loadMs: number;
  layers: number;
  hiddenSize: number;
  heads: number;
  kvHeads: number;
  vocabSize: number;
  maxPositions: number;
  chatTemplate: boolean;
  /** The family's attention projections: the LoRA targets a new adapter takes unless told otherwise. */
  attentionTargets: string[];
}

export type LmRequest =
  | { kind: 'init'; backend: BackendPreference; wasmPaths?: string }
  | { kind: 'load'; files: LmFiles; storage?: WeightStoragePreference }
  /** A model from the Hub by id (owner/name), fetched by the worker from `endpoint` (default the Hub's). */
  | { kind: 'loadHub'; id: string; endpoint?: string; storage?: WeightStoragePreference }
  /** `n` episodes of the config's task, the problems from `seed`; temperature 0 decodes greedily. */
  | { kind: 'rollout'; config: RunConfig; seed: number; n: number; temperature: number; limits: TextLimits }
  /** One GRPO step with the run config's settings over LoRA adapters (made at the first step, or when `lora` changes). */
  | { kind: 'trainStep'; config: RunConfig; lora: LoraConfig; limits: TextLimits }
  /** A new episode stepped token by token (stopped before its first token); temperature 0 decodes greedily. */
  | { kind: 'stepperStart'; config: RunConfig; seed: number; temperature: number; limits: TextLimits }
  /** On to the next token, the first token of the next turn (a clone, the root again), or the end. */
  | { kind: 'stepperAdvance'; until: StepUntil }
  /** Accuracy–cost points of the model as it decodes now, greedy, on `n` held-out problems (monitored split). */
  | { kind: 'frontier'; config: RunConfig; methods: ('delegate' | 'mono')[]; rootLimits: number[]; n: number; limits: Omit<TextLimits, 'rootMaxTokens'> }
  /** The adapters in PEFT's format (adapter_config.json, adapter_model.safetensors). */
  | { kind: 'exportAdapter' }
  /** Drop the adapters and the optimizer: the model as loaded. */
  | { kind: 'resetAdapters' };

export interface LmReplies {
  init: { backend: string };
  load: LmModelInfo;
  loadHub: LmModelInfo;
  rollout: { traces: TextEpisodeTrace[] };
  /** The step's metrics, its episodes and what it did to its first prompt's group (slow motion). */
  trainStep: { metrics: TextStepMetrics; traces: TextEpisodeTrace[]; anatomy: TextStepAnatomy };
  exportAdapter: { files: LmFiles };
  frontier: { points: FrontierPoint[] };
  /** The episode where it stopped; at the end also its trace. */
  stepperStart: { state: LmStepperState; trace?: TextEpisodeTrace };
  stepperAdvance: { state: LmStepperState; trace?: TextEpisodeTrace };
  resetAdapters: null;
}

export type LmEvent = { kind: 'progress'; what: 'rollout' | 'step' | 'frontier'; done: number; total: number };
