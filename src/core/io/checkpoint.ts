/**
 * A checkpoint as a set of files (pure: names → bytes; src/cli/checkpointDir.ts does the disk).
 *
 *   model.safetensors   F32 weights, HF GPT-2 names, Conv1D [in, out] layout, no lm_head
 *   config.json         HF GPT2Config (see hfConfig.ts)
 *   tokenizer.json      HF tokenizers format
 *   selfcest.json       what HF does not know: protocol version, vocabulary, training run
 *
 * The same directory loads in `transformers` (GPT2LMHeadModel.from_pretrained) and back here.
 * Import is strict: every file, tensor, shape and value is checked, and the first problem is
 * reported by name, so a bad file never reaches a running model.
 */
import { PROTOCOL_VERSION } from '../protocol/grammar';
import { paramSpecs, validateModelConfig, type ModelConfig, type ParamSpec } from '../model/config';
import { VOCAB } from '../tokenizer/vocab';
import { tokenizerJsonError } from '../tokenizer/tokenizerJson';
import { fromHfConfig, toHfConfig } from './hfConfig';
import { decodeSafetensors, encodeSafetensors, type DecodedTensor } from './safetensors';

/** Version of the delegation protocol (token semantics, docs/PROTOCOL.md) a checkpoint speaks. */
export const SELFCEST_PROTOCOL_VERSION = PROTOCOL_VERSION;
export const SUPPORTED_PROTOCOL_VERSIONS: readonly number[] = [1];

export const CHECKPOINT_FORMAT = 'selfcest-checkpoint';

export const CHECKPOINT_FILES = {
  weights: 'model.safetensors',
  config: 'config.json',
  tokenizer: 'tokenizer.json',
  selfcest: 'selfcest.json',
  /** Optional: lets HF AutoTokenizer find the tokenizer class. */
  tokenizerConfig: 'tokenizer_config.json',
} as const;

/** The files decodeCheckpoint cannot do without (selfcest.json carries the vocabulary check). */
export const REQUIRED_CHECKPOINT_FILES: readonly string[] = [
  CHECKPOINT_FILES.weights,
  CHECKPOINT_FILES.config,
  CHECKPOINT_FILES.tokenizer,
  CHECKPOINT_FILES.selfcest,
];
/** Read when present; every other file of a folder is not part of the checkpoint. */
export const OPTIONAL_CHECKPOINT_FILES: readonly string[] = [CHECKPOINT_FILES.tokenizerConfig];

export interface SelfcestMeta {
  format: typeof CHECKPOINT_FORMAT;
  protocolVersion: number;
  /** The full vocabulary, so a checkpoint from a different token table is refused. */
  vocab: string[];
  preset?: string;
  /** Optimizer steps taken when the checkpoint was written. */
  step?: number;
  /** ISO 8601 time. */
  createdAt?: string;
  /** The training config / command that produced the weights. */
  training?: Record<string, unknown>;
  notes?: string;
}

export interface Checkpoint {
  config: ModelConfig;
  /** HF names (see paramSpecs) → values, row-major; never contains lm_head.weight. */
  tensors: Map<string, Float32Array>;
  /** tokenizer.json content. */
  tokenizer: object;
  selfcest: SelfcestMeta;
  /** tokenizer_config.json content, written and read when present. */
  tokenizerConfig?: object;
}

/** SelfcestMeta for this build: current protocol version and vocabulary. */
export function makeSelfcestMeta(extra: Partial<Omit<SelfcestMeta, 'format' | 'vocab'>> = {}): SelfcestMeta {
  return {
    format: CHECKPOINT_FORMAT,
    protocolVersion: SELFCEST_PROTOCOL_VERSION,
    vocab: [...VOCAB],
    createdAt: new Date().toISOString(),
    ...extra,
  };
}

export class CheckpointError extends Error {
  constructor(message: string) {
    super(`checkpoint: ${message}`);
    this.name = 'CheckpointError';
  }
}

function fail(message: string): never {
  throw new CheckpointError(message);
}

/** A parsed JSON value for a message; an absent field reads "missing". */
const show = (v: unknown) => (v === undefined ? 'missing' : JSON.stringify(v));
const shapeText = (shape: readonly number[]) => `[${shape.join(', ')}]`;
const sameShape = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((d, i) => d === b[i]);

const WTE = 'transformer.wte.weight';
const WPE = 'transformer.wpe.weight';
const LM_HEAD = 'lm_head.weight';
/** Causal-mask buffers older transformers versions saved; not parameters, safe to drop. */
const HF_BUFFER = /^transformer\.h\.\d+\.attn\.(bias|masked_bias)$/;
const LAYER_OF = /^transformer\.h\.(\d+)\./;

// ---------------------------------------------------------------------------------------------
// Encode

export function encodeCheckpoint(ckpt: Checkpoint): Map<string, Uint8Array> {
  validateModelConfig(ckpt.config);
  const specs = paramSpecs(ckpt.config);
  const names = new Set(specs.map((s) => s.name));
  for (const name of ckpt.tensors.keys()) {
    if (!names.has(name)) fail(`cannot export unexpected tensor ${name} (not a parameter of this config)`);
  }
  for (const spec of specs) {
    const data = ckpt.tensors.get(spec.name);
    if (data === undefined) fail(`cannot export: missing tensor ${spec.name}`);
    const need = spec.shape.reduce((a, b) => a * b, 1);
    if (data.length !== need) {
      fail(`cannot export tensor ${spec.name}: ${data.length} values, shape ${shapeText(spec.shape)} needs ${need}`);
    }
    checkFinite(spec.name, data);
  }
  checkMeta(ckpt.selfcest);

  const weights = encodeSafetensors(
    specs.map((s) => ({ name: s.name, shape: s.shape, data: ckpt.tensors.get(s.name) as Float32Array })),
    // transformers refuses safetensors files whose metadata lacks a known framework tag.
    { format: 'pt' },
  );
  const files = new Map<string, Uint8Array>([
    [CHECKPOINT_FILES.weights, weights],
    [CHECKPOINT_FILES.config, jsonBytes(toHfConfig(ckpt.config))],
    [CHECKPOINT_FILES.tokenizer, jsonBytes(ckpt.tokenizer)],
    [CHECKPOINT_FILES.selfcest, jsonBytes(ckpt.selfcest)],
  ]);
  if (ckpt.tokenizerConfig !== undefined) {
    files.set(CHECKPOINT_FILES.tokenizerConfig, jsonBytes(ckpt.tokenizerConfig));
  }
  return files;
}

function jsonBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(`${JSON.stringify(value, null, 2)}\n`);
}

// ---------------------------------------------------------------------------------------------
// Decode

export function decodeCheckpoint(files: ReadonlyMap<string, Uint8Array>): Checkpoint {
  const missing = REQUIRED_CHECKPOINT_FILES.filter((f) => !files.has(f));
  if (missing.length > 0) {
    fail(`missing file${missing.length > 1 ? 's' : ''} ${missing.join(', ')} (a checkpoint holds ${REQUIRED_CHECKPOINT_FILES.join(', ')})`);
  }
  const get = (name: string) => files.get(name) as Uint8Array;

  // selfcest.json first: a wrong vocabulary or protocol explains every later mismatch.
  const selfcest = parseMeta(parseJsonFile(CHECKPOINT_FILES.selfcest, get(CHECKPOINT_FILES.selfcest)));

  const hfConfig = parseJsonFile(CHECKPOINT_FILES.config, get(CHECKPOINT_FILES.config));
  let config: ModelConfig;
  try {
    config = fromHfConfig(hfConfig);
  } catch (e) {
    return fail((e as Error).message);
  }
  if (config.vocabSize !== VOCAB.length) {
    fail(`config.json: vocab_size is ${config.vocabSize} but the vocabulary has ${VOCAB.length} tokens`);
  }

  const tokenizer = parseJsonFile(CHECKPOINT_FILES.tokenizer, get(CHECKPOINT_FILES.tokenizer));
  checkTokenizer(tokenizer);
  const tokenizerConfigBytes = files.get(CHECKPOINT_FILES.tokenizerConfig);
  const tokenizerConfig = tokenizerConfigBytes === undefined ? undefined : parseJsonFile(CHECKPOINT_FILES.tokenizerConfig, tokenizerConfigBytes);

  let decoded: Map<string, DecodedTensor>;
  try {
    decoded = decodeSafetensors(get(CHECKPOINT_FILES.weights)).tensors;
  } catch (e) {
    return fail(`${CHECKPOINT_FILES.weights} is invalid: ${(e as Error).message}`);
  }
  const tensors = checkTensors(config, decoded);

  const ckpt: Checkpoint = { config, tensors, tokenizer, selfcest };
  if (tokenizerConfig !== undefined) ckpt.tokenizerConfig = tokenizerConfig;
  return ckpt;
}

function parseJsonFile(name: string, bytes: Uint8Array): object {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (e) {
    return fail(`${name} is not valid JSON (${(e as Error).message})`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) fail(`${name} must hold a JSON object`);
  return value as object;
}

function parseMeta(raw: object): SelfcestMeta {
  const j = raw as Record<string, unknown>;
  const where = CHECKPOINT_FILES.selfcest;
  if (j.format !== CHECKPOINT_FORMAT) {
    fail(`${where}: format must be "${CHECKPOINT_FORMAT}" (got ${show(j.format)})`);
  }
  const meta: SelfcestMeta = {
    format: CHECKPOINT_FORMAT,
    protocolVersion: j.protocolVersion as number,
    vocab: j.vocab as string[],
  };
  const optional = <K extends keyof SelfcestMeta>(key: K, ok: (v: unknown) => boolean, what: string) => {
    const v = j[key];
    if (v === undefined) return;
    if (!ok(v)) fail(`${where}: ${key} must be ${what} (got ${JSON.stringify(v)})`);
    meta[key] = v as SelfcestMeta[K];
  };
  const isString = (v: unknown) => typeof v === 'string';
  optional('preset', isString, 'a string');
  optional('step', (v) => Number.isInteger(v) && (v as number) >= 0, 'a non-negative integer');
  optional('createdAt', isString, 'a string');
  optional('training', (v) => v !== null && typeof v === 'object' && !Array.isArray(v), 'an object');
  optional('notes', isString, 'a string');
  checkMeta(meta);
  return meta;
}

/** Shared by export and import: the checks that make a checkpoint usable by this build. */
function checkMeta(meta: SelfcestMeta): void {
  const where = CHECKPOINT_FILES.selfcest;
  if (meta.format !== CHECKPOINT_FORMAT) fail(`${where}: format must be "${CHECKPOINT_FORMAT}"`);
  const v = meta.protocolVersion;
  if (!Number.isInteger(v)) fail(`${where}: protocolVersion must be an integer (got ${show(v)})`);
  if (!SUPPORTED_PROTOCOL_VERSIONS.includes(v)) {
    fail(`${where}: unsupported protocolVersion ${v} (this build supports ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`);
  }
  const vocab: unknown = meta.vocab;
  if (!Array.isArray(vocab) || !vocab.every((t) => typeof t === 'string')) {
    fail(`${where}: vocab must be an array of strings${vocab === undefined ? ' (got missing)' : ''}`);
  }
  const theirs = vocab as string[];
  const n = Math.min(theirs.length, VOCAB.length);
  for (let i = 0; i < n; i++) {
    if (theirs[i] !== VOCAB[i]) {
      fail(
        `${where}: vocab differs from this build's vocabulary at id ${i}: checkpoint has ${JSON.stringify(theirs[i])}, expected ${JSON.stringify(VOCAB[i])}`,
      );
    }
  }
  if (theirs.length !== VOCAB.length) {
    fail(`${where}: vocab has ${theirs.length} tokens but this build's vocabulary has ${VOCAB.length}`);
  }
}

/** tokenizer.json by the one check every reader applies (tokenizerJsonError). */
function checkTokenizer(tok: object): void {
  const error = tokenizerJsonError(tok, CHECKPOINT_FILES.tokenizer);
  if (error) fail(error);
}

function checkTensors(config: ModelConfig, decoded: Map<string, DecodedTensor>): Map<string, Float32Array> {
  checkConfigAgainstTensors(config, decoded);

  const specs = paramSpecs(config);
  const missing = specs.filter((s) => !decoded.has(s.name)).map((s) => s.name);
  if (missing.length > 0) {
    fail(`model.safetensors is missing tensor${missing.length > 1 ? 's' : ''} ${listNames(missing)}`);
  }
  const known = new Set(specs.map((s) => s.name));
  const extra = [...decoded.keys()].filter((n) => !known.has(n) && n !== LM_HEAD && !HF_BUFFER.test(n));
  if (extra.length > 0) {
    fail(`model.safetensors has unexpected tensor${extra.length > 1 ? 's' : ''} ${listNames(extra)}`);
  }

  const out = new Map<string, Float32Array>();
  for (const spec of specs) {
    const t = decoded.get(spec.name) as DecodedTensor;
    checkShape(spec, t);
    const data = t.data;
    checkFinite(spec.name, data);
    out.set(spec.name, data);
  }

  const head = decoded.get(LM_HEAD);
  if (head !== undefined) checkTiedHead(head, out.get(WTE) as Float32Array, config);
  return out;
}

/** The shapes that carry config fields: report them as a config.json mismatch. */
function checkConfigAgainstTensors(config: ModelConfig, decoded: Map<string, DecodedTensor>): void {
  const disagree = (field: string, value: number, tensor: string, shape: number[]) =>
    fail(`config.json does not match model.safetensors: ${field} = ${value} but ${tensor} has shape ${shapeText(shape)}`);
  const wte = decoded.get(WTE);
  if (wte !== undefined && wte.shape.length === 2) {
    if (wte.shape[1] !== config.nEmbd) disagree('n_embd', config.nEmbd, WTE, wte.shape);
    if (wte.shape[0] !== config.vocabSize) disagree('vocab_size', config.vocabSize, WTE, wte.shape);
  }
  const wpe = decoded.get(WPE);
  if (wpe !== undefined && wpe.shape.length === 2 && wpe.shape[0] !== config.nPositions) {
    disagree('n_positions', config.nPositions, WPE, wpe.shape);
  }
  let layers = 0;
  for (const name of decoded.keys()) {
    const m = LAYER_OF.exec(name);
    if (m) layers = Math.max(layers, Number(m[1]) + 1);
  }
  if (layers !== config.nLayer) {
    fail(`config.json does not match model.safetensors: n_layer = ${config.nLayer} but the tensors have ${layers} layers (transformer.h.0..${layers - 1})`);
  }
}

function checkShape(spec: ParamSpec, t: DecodedTensor): void {
  if (!sameShape(spec.shape, t.shape)) {
    fail(`tensor ${spec.name} has shape ${shapeText(t.shape)} but config.json implies ${shapeText(spec.shape)}`);
  }
}

function checkTiedHead(head: DecodedTensor, wte: Float32Array, config: ModelConfig): void {
  const wteShape = [config.vocabSize, config.nEmbd];
  if (!sameShape(head.shape, wteShape)) {
    fail(`${LM_HEAD} has shape ${shapeText(head.shape)} but must equal ${WTE} ${shapeText(wteShape)} (the head is tied)`);
  }
  const values = head.data;
  for (let i = 0; i < wte.length; i++) {
    if (values[i] !== wte[i]) {
      fail(`${LM_HEAD} differs from ${WTE} (first at index ${i}: ${values[i]} vs ${wte[i]}); only a tied LM head is supported`);
    }
  }
}

function checkFinite(name: string, data: Float32Array): void {
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i])) fail(`tensor ${name} contains ${data[i]} at index ${i} (values must be finite)`);
  }
}

function listNames(names: string[]): string {
  const shown = names.slice(0, 5).join(', ');
  return names.length > 5 ? `${shown} and ${names.length - 5} more` : shown;
}
