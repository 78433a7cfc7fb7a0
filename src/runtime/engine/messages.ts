/**
 * The typed message protocol between the page and the trainer worker (the "engine").
 * Every request carries an id; the engine answers each with exactly one reply (ok or
 * error) and may send events at any time. The page never runs model math.
 *
 * This file is the contract the runtime and the app are built against.
 */
import type { FrontierPoint, Method } from '../../core/eval/frontier';
import type { ModelCounters, ProvenanceEvent } from '../../core/io/provenance';
import type { RunConfig } from '../../core/runConfig';
import type { EpisodeTrace } from '../../core/rollout/trace';
import type { StepAnatomy } from '../../core/rl/anatomy';
import type { StepMetrics } from '../../core/rl/grpoStep';
import type { SftMetricsRow } from '../../core/sft/sft';

/** Checkpoint files by name (model.safetensors, config.json, tokenizer.json, selfcest.json, …). */
export type CheckpointFiles = Record<string, ArrayBuffer>;

export type EngineRequest =
  /** Start the backend and the rollout worker pool. */
  | { kind: 'init'; config: RunConfig; wasmPaths?: string }
  /** Fetch and load a served checkpoint directory (e.g. 'checkpoints/warmstart/'). */
  | { kind: 'loadUrl'; baseUrl: string }
  /**
   * Fetch a Hugging Face model by its Hub id (owner/name) from the Hub, or from `endpoint` (a
   * mirror serving the Hub's paths). Validated as a folder; on failure the current model stays.
   */
  | { kind: 'loadHub'; id: string; endpoint?: string }
  /** Load checkpoint files chosen by the user. Validated; on failure the current model stays. */
  /** `source`: what the report names the model by (default: the file names), e.g. the folder picked. */
  | { kind: 'loadFiles'; files: CheckpointFiles; resume?: ResumeModel; source?: string }
  /** Apply a validated config (a preset change re-initialises the model). */
  | { kind: 'setConfig'; config: RunConfig }
  /** Supervised warm start for `steps` steps (progress events; interruptible by pause). */
  | { kind: 'sft'; steps: number }
  /** GRPO until paused. */
  | { kind: 'train' }
  | { kind: 'pause' }
  /** Exactly one GRPO step. */
  | { kind: 'step' }
  /** One GRPO step of the run, returned stage by stage for the slow-motion view (StepAnatomy). */
  | { kind: 'slowStep' }
  /** Back to the loaded checkpoint; metrics and episodes cleared. */
  | { kind: 'reset' }
  /** A seeded random init of the config's preset in place of the model. */
  | { kind: 'randomInit' }
  /** Token-by-token stepper over one new rollout. */
  | { kind: 'stepperStart'; seed: number; prompt?: string; allowSpawn: boolean }
  | { kind: 'stepperAdvance'; until: 'token' | 'spawn' | 'end' }
  /**
   * Accuracy–cost points of the current weights on the fixed held-out set (config.evalN
   * problems unless `n`): every method at every root limit, run in the rollout workers. Each
   * point is also sent as a 'frontier' event as soon as it is done.
   */
  | { kind: 'frontier'; methods: Method[]; limits: number[]; n?: number }
  /** Logits of a text under the current weights (for checks against the CLI). */
  | { kind: 'logits'; text: string }
  /**
   * Files to download. `origin`: the weights of the model's origin (its KL reference, what Reset
   * returns to) instead of the current ones; `provenance`, with the counters of the exported
   * weights, is written into selfcest.json's `training` (the provenance.json format);
   * `optimizer`: with the current weights, the optimizers' moments too (OPTIMIZER_FILES), as the
   * page's saved session keeps them.
   */
  | { kind: 'exportWeights'; origin?: boolean; provenance?: ProvenanceEvent[]; optimizer?: boolean }
  | { kind: 'exportTraces' }
  | { kind: 'exportMetrics'; format: 'jsonl' | 'csv' };

export type EngineRequestKind = EngineRequest['kind'];

/** loadFiles of a model that goes on where it was (a saved page session, an export with its provenance). */
export interface ResumeModel {
  /** Counters of the loaded weights (instead of all 0). */
  counters: ModelCounters;
  /** The model's origin when it is not the loaded weights: the KL reference, what Reset returns to. */
  origin?: { files: CheckpointFiles; counters: ModelCounters };
  /**
   * The run's history so far (a saved session's), so that the exports after a reload hold the
   * steps before it too. Optimizer moments travel as files among `files` (OPTIMIZER_FILES).
   */
  log?: { metrics: StepMetrics[]; traces: { step: number; trace: EpisodeTrace }[] };
  /** The report's source (default: the file names). */
  source?: string;
}

export interface StepperState {
  /** The episode so far (contexts, events, violations). */
  trace: EpisodeTrace;
  /**
   * Contexts still generating, each with the top-k of the distribution its latest token was
   * drawn from (empty before its first token; without spawning, spawn tokens are excluded).
   */
  live: { context: number; role: 'root' | 'clone'; waiting: boolean; topK: { token: string; prob: number }[] }[];
  done: boolean;
}

export interface EngineReplies {
  init: { backend: BackendReport; workers: number; gradWorkers: number };
  loadUrl: ModelReport;
  loadHub: ModelReport;
  loadFiles: ModelReport;
  setConfig: ModelReport;
  sft: { steps: number; loss: number };
  train: { steps: number };
  pause: { policyVersion: number };
  step: { metrics: StepMetrics };
  slowStep: StepAnatomy;
  reset: ModelReport;
  randomInit: ModelReport;
  stepperStart: StepperState;
  stepperAdvance: StepperState;
  frontier: { points: FrontierPoint[] };
  logits: { tokens: number[]; logits: number[][] };
  /** The files, and the counters of the weights in them (read in the same turn, so they agree). */
  exportWeights: { files: Record<string, Uint8Array>; counters: ModelCounters };
  exportTraces: { jsonl: string };
  exportMetrics: { text: string };
}

export interface BackendReport {
  backend: 'webgpu' | 'wasm' | 'cpu';
  adapter: { vendor: string; architecture: string; description: string } | null;
  /** Why an earlier choice was not used (e.g. "webgpu: device lost, fell back to wasm"). */
  notes: string[];
  /**
   * Why 'auto' deliberately chose this backend over WebGPU (a software adapter), shown next to
   * the backend; null when nothing was passed over by choice.
   */
  reason: string | null;
}

export interface ModelReport {
  /** The toy model, or a Hugging Face folder (absent in a report saved before it was recorded: the toy). */
  kind?: 'toy' | 'hf';
  /** The toy's preset (tiny, small, custom), or the folder's family (qwen2, llama, gpt2, qwen3). */
  preset: string;
  parameters: number;
  policyVersion: number;
  /** Where the weights came from (URL, file names, or 'random init'). */
  source: string;
  /**
   * What trained the loaded checkpoint, as its selfcest.json records it (a CLI `train` run: grpo,
   * `sft`: the warm start); null when it does not say (random inits, the page's own exports, whose
   * provenance tells instead).
   */
  trainedBy?: 'grpo' | 'sft' | null;
  /** What of a run under the current config will not fit a Hugging Face model (its window, its chat template), one sentence each. */
  warnings?: string[];
}

export type EngineEvent =
  /** The backends, and how many rollout and gradient workers run (they change with the config). */
  | { kind: 'backend'; report: BackendReport; workers: number; gradWorkers: number }
  | { kind: 'status'; state: 'idle' | 'sft' | 'training' | 'paused'; policyVersion: number }
  /** Pause arrived while a loop or step runs: it stops after `finishing` (e.g. "step 12", "the evaluation at step 10"). */
  | { kind: 'status'; state: 'pausing'; policyVersion: number; finishing: string }
  /** A GRPO step finished: the policy version its updates produced (status events come only with a change of state). */
  | { kind: 'policyVersion'; policyVersion: number }
  /** Sent in batches (every few steps), never per token. */
  | { kind: 'metrics'; rows: StepMetrics[] }
  /** The most recent episodes of a step (for the rollout table and the tree view). */
  | { kind: 'episodes'; step: number; traces: EpisodeTrace[] }
  /** Finished frontier points: of a 'frontier' request, or of the periodic evaluation while training (with `step`). */
  | { kind: 'frontier'; points: FrontierPoint[] }
  | { kind: 'sftProgress'; step: number; steps: number; loss: number; tokensPerSec: number; etaSec: number }
  /**
   * Where a GRPO step or an evaluation is, at most every 250 ms: `what` names it ("step 12:
   * rollouts", "step 12: updates", "evaluation: delegate at 48"), `done` of `total` (episodes,
   * or optimizer updates).
   */
  | { kind: 'progress'; what: string; done: number; total: number }
  /** Every warm-start step's row, as the CLI's sft writes it to metrics.jsonl. */
  | { kind: 'sftMetrics'; rows: SftMetricsRow[] }
  | { kind: 'log'; level: 'info' | 'warn' | 'error'; message: string };
