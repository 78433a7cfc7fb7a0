/**
 * KV-cached batched decoding: the hot loop of rollouts.
 *
 * Many contexts (a root and its clones, several episodes) live side by side in one cache per
 * layer. A context is a *slot*; feeding a slot appends tokens to it and returns the logits after
 * its last token, without recomputing its prefix. One feed serves any mix of slots: a prompt
 * prefill for a new clone next to single sampled tokens for everyone else.
 *
 * Layout: keys K [rows, H, W, dh] and values Vᵀ [rows, H, dh, W], so that for a single new token
 * both attention products are batched matMuls against a transposed operand whose rows lie
 * contiguous (dot products in the project's wasm kernel, no transpose). W grows in chunks of 32 columns; the last
 * column is scratch where padding and idle rows write, and no query ever attends to it. Rows
 * grow by doubling and are compacted when most are closed.
 *
 * Rows have different lengths: each query gets its own additive mask that admits exactly its
 * own prefix, so a row never sees another row's keys, stale keys of a closed slot, or padding.
 *
 * Parameters are read at every feed (derived tensors are rebuilt when a variable is assigned).
 * A weight update does not recompute existing caches: contexts fed before and after it mix two
 * policies, so callers close and reopen slots after updating weights.
 */
import * as tf from '@tensorflow/tfjs';
import { type ModelConfig, paramSpecs, validateModelConfig } from './config';
import { decodeLayer, fusedDecodeLayerAvailable, fusedRowNormAvailable, rowNorm } from './decodeLayer';
import { MASKED, geluNew } from './gpt';
import type { GPTParams } from './params';
import { cacheWrite, inPlaceCacheWriteAvailable } from './cacheWrite';
import { type Weights, deriveWeights, disposeWeights } from './decodeWeights';

export interface DecoderOptions {
  /** Slots held before the cache has to grow (default 8). */
  capacity?: number;
}

const WIDTH_CHUNK = 32;

/**
 * Token positions (rows × longest prompt) one prefill pass computes at most. A pass holds its
 * attention scores [rows·H, tq, W] and the inputs built for it at once: hundreds of clones
 * spawned in one step (an evaluation batch of long-context episodes) would otherwise need
 * gigabytes in one pass and can exhaust wasm's heap.
 */
const PREFILL_TOKENS = 8192;

/** Prefill entries in passes of at most PREFILL_TOKENS positions (padded to each pass's longest). */
function prefillGroups(entries: readonly Entry[]): Entry[][] {
  const groups: Entry[][] = [];
  let group: Entry[] = [];
  let longest = 0;
  for (const e of entries) {
    const tq = Math.max(longest, e.tokens.length);
    if (group.length > 0 && (group.length + 1) * tq > PREFILL_TOKENS) {
      groups.push(group);
      group = [];
      longest = 0;
    }
    group.push(e);
    longest = Math.max(longest, e.tokens.length);
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/** One slot's part of a feed. */
interface Entry {
  /** Position in the caller's list (where its logits go). */
  index: number;
  row: number;
  tokens: readonly number[];
  /** Context length before this feed. */
  start: number;
}

function dense(x: tf.Tensor2D, w: tf.Tensor2D, b: tf.Tensor1D): tf.Tensor2D {
  return tf.fused.matMul({ a: x, b: w, bias: b }) as tf.Tensor2D;
}

export class BatchedDecoder {
  /** Width of each logits row. */
  readonly vocabSize: number;
  /** Longest context a slot can hold (the model's nPositions). */
  readonly maxPositions: number;
  private readonly params: GPTParams;
  private readonly config: ModelConfig;
  private readonly heads: number;
  private readonly dh: number;
  private readonly initialCapacity: number;
  private readonly specNames: string[];
  private weights: Weights | null = null;

  private capacity: number;
  private width = 0;
  private keys: tf.Tensor4D[] = [];
  private valuesT: tf.Tensor4D[] = [];
  private readonly rowOfSlot = new Map<number, number>();
  /** Per row: context length, or -1 when the row is free. */
  private rowLength: number[];
  private disposed = false;

  constructor(params: GPTParams, config: ModelConfig, opts: DecoderOptions = {}) {
    validateModelConfig(config);
    const capacity = opts.capacity ?? 8;
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > 4096) {
      throw new Error(`decoder: capacity must be an integer in [1, 4096] (got ${capacity})`);
    }
    this.params = params;
    this.config = { ...config };
    this.vocabSize = config.vocabSize;
    this.maxPositions = config.nPositions;
    this.heads = config.nHead;
    this.dh = config.nEmbd / config.nHead;
    this.initialCapacity = capacity;
    this.capacity = capacity;
    this.rowLength = new Array<number>(capacity).fill(-1);
    this.specNames = paramSpecs(config).map((s) => s.name);
  }

  // ------------------------------------------------------------------------------ slots

  /** Opens an empty context and returns its slot id (the lowest id not in use). */
  open(): number {
    this.checkAlive();
    let slot = 0;
    while (this.rowOfSlot.has(slot)) slot++;
    let row = this.rowLength.indexOf(-1);
    if (row < 0) {
      row = this.capacity;
      this.capacity *= 2;
      this.rowLength.length = this.capacity;
      this.rowLength.fill(-1, row);
    }
    this.rowLength[row] = 0;
    this.rowOfSlot.set(slot, row);
    return slot;
  }

  close(slot: number): void {
    this.checkAlive();
    const row = this.rowOf(slot);
    this.rowLength[row] = -1;
    this.rowOfSlot.delete(slot);
  }

  /** Tokens held by a slot's context. */
  length(slot: number): number {
    return this.rowLength[this.rowOf(slot)];
  }

  liveSlots(): number[] {
    return [...this.rowOfSlot.keys()].sort((a, b) => a - b);
  }

  // ------------------------------------------------------------------------------ feeding

  /**
   * Appends tokens[i] (at least one token each) to slots[i] and returns the logits after each
   * slot's last new token, row-major [slots.length × vocabSize] in the order given. Slots not
   * named are untouched. Throws, changing nothing, if a slot is not open, named twice, a token
   * is out of range, or a context would exceed nPositions.
   */
  async feed(slots: readonly number[], tokens: readonly (readonly number[])[]): Promise<Float32Array> {
    this.checkAlive();
    this.validateFeed(slots, tokens);
    const vocab = this.config.vocabSize;
    const out = new Float32Array(slots.length * vocab);
    if (slots.length === 0) return out;

    this.refreshWeights();
    this.maybeCompact();
    const entries: Entry[] = slots.map((slot, index) => {
      const row = this.rowOf(slot);
      return { index, row, tokens: tokens[index], start: this.rowLength[row] };
    });
    this.ensureStorage(Math.max(...entries.map((e) => e.start + e.tokens.length)));

    // Single tokens and multi-token lists go in separate passes so a long prefill does not pad
    // every stepping row to its length.
    const singles = entries.filter((e) => e.tokens.length === 1);
    const multis = entries.filter((e) => e.tokens.length > 1);
    const passes = [singles, ...prefillGroups(multis)].filter((group) => group.length > 0);
    const parts = passes.map((group) => this.runPass(group));
    for (const e of entries) this.rowLength[e.row] = e.start + e.tokens.length;

    // One readback per feed.
    const logits = parts.length === 1 ? parts[0] : tf.tidy(() => tf.concat(parts, 0));
    try {
      const values = (await logits.data()) as Float32Array;
      passes.flat().forEach((e, i) => out.set(values.subarray(i * vocab, (i + 1) * vocab), e.index * vocab));
    } finally {
      tf.dispose([logits, ...parts]);
    }
    return out;
  }

  /** Frees the caches and derived weights (not the parameters). The decoder is unusable after. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.dropStorage();
    if (this.weights !== null) disposeWeights(this.weights);
    this.weights = null;
    this.rowOfSlot.clear();
  }

  // ------------------------------------------------------------------------------ internals

  private checkAlive(): void {
    if (this.disposed) throw new Error('decoder: used after dispose()');
  }

  private rowOf(slot: number): number {
    const row = this.rowOfSlot.get(slot);
    if (row === undefined) throw new Error(`decoder: slot ${slot} is not open`);
    return row;
  }

  private validateFeed(slots: readonly number[], tokens: readonly (readonly number[])[]): void {
    if (slots.length !== tokens.length) {
      throw new Error(`decoder: feed got ${slots.length} slots but ${tokens.length} token lists`);
    }
    const seen = new Set<number>();
    const { vocabSize, nPositions } = this.config;
    slots.forEach((slot, i) => {
      const row = this.rowOf(slot);
      if (seen.has(slot)) throw new Error(`decoder: slot ${slot} is named twice in one feed`);
      seen.add(slot);
      const list = tokens[i];
      if (list.length === 0) throw new Error(`decoder: token list for slot ${slot} is empty (need at least 1 token)`);
      for (const t of list) {
        if (!Number.isInteger(t) || t < 0 || t >= vocabSize) {
          throw new Error(`decoder: token ${t} for slot ${slot} is not an integer in [0, ${vocabSize - 1}]`);
        }
      }
      const end = this.rowLength[row] + list.length;
      if (end > nPositions) {
        throw new Error(
          `decoder: slot ${slot} would hold ${end} tokens, more than nPositions (${nPositions}); ` + `it has ${this.rowLength[row]} and was fed ${list.length}`,
        );
      }
    });
  }

  /** Rebuilds the derived weights when any variable was assigned (or on first use). */
  private refreshWeights(): void {
    const vars = this.specNames.map((name) => {
      const v = this.params.get(name);
      if (v === undefined || v.isDisposed) throw new Error(`decoder: parameter ${name} is missing or disposed`);
      return v;
    });
    const current = this.weights;
    if (current !== null && vars.every((v, i) => v.dataId === current.sources[i])) return;
    if (current !== null) disposeWeights(current);

    this.weights = { ...deriveWeights(this.params, this.config), sources: vars.map((v) => v.dataId) };
  }

  private dropStorage(): void {
    for (const t of [...this.keys, ...this.valuesT]) t.dispose();
    this.keys = [];
    this.valuesT = [];
    this.width = 0;
  }

  /**
   * Makes the cache tensors [capacity rows × at least maxEnd+1 columns] (one scratch column),
   * growing with zeros; contents of existing rows and columns are kept.
   */
  private ensureStorage(maxEnd: number): void {
    const needWidth = Math.ceil((maxEnd + 1) / WIDTH_CHUNK) * WIDTH_CHUNK;
    const { nLayer } = this.config;
    const h = this.heads;
    const dh = this.dh;
    if (this.keys.length === 0) {
      this.width = needWidth;
      for (let l = 0; l < nLayer; l++) {
        this.keys.push(tf.zeros([this.capacity, h, this.width, dh]));
        this.valuesT.push(tf.zeros([this.capacity, h, dh, this.width]));
      }
      return;
    }
    const rows = this.keys[0].shape[0];
    const width = Math.max(this.width, needWidth);
    if (rows === this.capacity && width === this.width) return;
    this.replaceStorage((t, timeAxis) => {
      let out = t;
      const pad = (axis: number, size: number) => {
        const shape = [...out.shape] as [number, number, number, number];
        shape[axis] = size;
        out = tf.concat([out, tf.zeros(shape)], axis);
      };
      if (width > this.width) pad(timeAxis, width - this.width);
      if (this.capacity > rows) pad(0, this.capacity - rows);
      return out;
    });
    this.width = width;
  }

  /**
   * Gives memory and time back: when at most a quarter of the rows are live they move to the
   * front of a smaller cache, and when the longest live context needs at most half the columns
   * the cache is cut to fit (attention cost follows the width).
   */
  private maybeCompact(): void {
    if (this.keys.length === 0) return;
    const live = this.rowOfSlot.size;
    if (live === 0) {
      this.dropStorage();
      this.capacity = this.initialCapacity;
      this.rowLength = new Array<number>(this.capacity).fill(-1);
      return;
    }
    if (this.capacity > this.initialCapacity && live * 4 <= this.capacity) this.compactRows(live);
    const longest = Math.max(...this.rowLength);
    const width = Math.ceil((longest + 1) / WIDTH_CHUNK) * WIDTH_CHUNK;
    if (width * 2 <= this.width) this.cutWidth(width);
  }

  private compactRows(live: number): void {
    let capacity = this.initialCapacity;
    while (capacity < 2 * live) capacity *= 2;
    const oldRows = this.keys[0].shape[0];
    const moves = [...this.rowOfSlot.entries()].sort((a, b) => a[1] - b[1]);
    const pick = new Float32Array(capacity * oldRows);
    // Rows opened since the storage last grew have never been fed: nothing to carry over.
    moves.forEach(([, row], i) => row < oldRows && (pick[i * oldRows + row] = 1));
    const select = tf.tensor2d(pick, [capacity, oldRows]);
    this.replaceStorage((t) => selectRows(select, t));
    select.dispose();
    const lengths = new Array<number>(capacity).fill(-1);
    moves.forEach(([slot, row], i) => {
      lengths[i] = this.rowLength[row];
      this.rowOfSlot.set(slot, i);
    });
    this.rowLength = lengths;
    this.capacity = capacity;
  }

  private cutWidth(width: number): void {
    this.replaceStorage((t, timeAxis) => {
      const size = [...t.shape] as [number, number, number, number];
      size[timeAxis] = width;
      return tf.slice(t, [0, 0, 0, 0], size);
    });
    this.width = width;
  }

  private replaceStorage(f: (t: tf.Tensor4D, timeAxis: 2 | 3) => tf.Tensor4D): void {
    for (let l = 0; l < this.config.nLayer; l++) {
      const k = tf.tidy(() => f(this.keys[l], 2));
      const v = tf.tidy(() => f(this.valuesT[l], 3));
      this.keys[l].dispose();
      this.valuesT[l].dispose();
      this.keys[l] = k;
      this.valuesT[l] = v;
    }
  }

  /**
   * Runs one batch of entries through the model, writing their keys/values into the caches, and
   * returns the logits after each entry's last token [entries.length, V] (not yet read back).
   *
   * Either every cache row takes part (idle rows compute throw-away values) or only the entries'
   * rows are copied out of the cache first; the cheaper one is chosen from the counts.
   */
  private runPass(entries: readonly Entry[]): tf.Tensor2D {
    const w = this.weights as Weights;
    const { vocabSize, nPositions, nEmbd: d, layerNormEps: eps } = this.config;
    const h = this.heads;
    const dh = this.dh;
    const width = this.width;
    const scratch = width - 1;
    const capacity = this.capacity;
    const tq = Math.max(...entries.map((e) => e.tokens.length));
    const n = entries.length;
    // A single token per row is cheap to compute for idle rows and costly to copy out; a long
    // prefill for few rows is the opposite.
    const allRows = tq === 1 ? n * 8 >= capacity : n * 4 >= capacity * 3;
    const rows = allRows ? capacity : n;
    const rowIds: number[] = allRows ? Array.from({ length: capacity }, (_, r) => r) : entries.map((e) => e.row);
    const entryAt: (Entry | undefined)[] = new Array<Entry | undefined>(rows);
    if (allRows) for (const e of entries) entryAt[e.row] = e;
    else entries.forEach((e, i) => (entryAt[i] = e));

    // Inputs built on the CPU: two-hot embedding rows, per-query masks, the cache slot each
    // token writes (row, position), and the scatter's indices where the cache is not written in place.
    const nTok = rows * tq;
    const embedRows = vocabSize + nPositions;
    const twoHot = new Float32Array(nTok * embedRows);
    const mask = new Float32Array(nTok * width).fill(MASKED);
    const inPlace = inPlaceCacheWriteAvailable();
    const slots = new Int32Array(nTok * 2);
    const keyIdx = new Int32Array(inPlace ? 0 : nTok * h * 3);
    const valIdx = new Int32Array(inPlace ? 0 : nTok * h * dh * 4);
    for (let i = 0; i < rows; i++) {
      const e = entryAt[i];
      for (let j = 0; j < tq; j++) {
        const t = i * tq + j;
        const real = e !== undefined && j < e.tokens.length;
        const pos = real ? (e as Entry).start + j : scratch;
        if (real) {
          twoHot[t * embedRows + (e as Entry).tokens[j]] = 1;
          twoHot[t * embedRows + vocabSize + pos] = 1;
          mask.fill(0, t * width, t * width + pos + 1);
        }
        slots[2 * t] = rowIds[i];
        slots[2 * t + 1] = pos;
        if (inPlace) continue;
        for (let hh = 0; hh < h; hh++) {
          const ki = (t * h + hh) * 3;
          keyIdx[ki] = rowIds[i];
          keyIdx[ki + 1] = hh;
          keyIdx[ki + 2] = pos;
          for (let c = 0; c < dh; c++) {
            const vi = ((t * h + hh) * dh + c) * 4;
            valIdx[vi] = rowIds[i];
            valIdx[vi + 1] = hh;
            valIdx[vi + 2] = c;
            valIdx[vi + 3] = pos;
          }
        }
      }
    }
    // Which computed position holds each entry's last token, in entry order.
    const lastOf = entries.map((e) => (allRows ? e.row : entryAt.indexOf(e)) * tq + e.tokens.length - 1);
    const needPick = !(tq === 1 && rows === n && lastOf.every((t, i) => t === i));

    const newKeys: tf.Tensor4D[] = [];
    const newValues: tf.Tensor4D[] = [];
    const logits = tf.tidy((): tf.Tensor2D => {
      const slotsT = inPlace ? tf.tensor2d(slots, [nTok, 2], 'int32') : null;
      const keyIndices = inPlace ? null : tf.tensor2d(keyIdx, [nTok * h, 3], 'int32');
      const valIndices = inPlace ? null : tf.tensor2d(valIdx, [nTok * h * dh, 4], 'int32');
      const maskT = tq === 1 ? tf.tensor3d(mask, [rows, 1, width]) : tf.tensor4d(mask, [rows, 1, tq, width]);
      let select: tf.Tensor2D | null = null;
      if (!allRows) {
        const pick = new Float32Array(rows * capacity);
        rowIds.forEach((r, i) => (pick[i * capacity + r] = 1));
        select = tf.tensor2d(pick, [rows, capacity]);
      }

      let x: tf.Tensor2D = tf.matMul(tf.tensor2d(twoHot, [nTok, embedRows]), w.embed);
      // Each layer in its own scope: a prefill's scores and probabilities ([rows·H, tq, W]) are
      // freed before the next layer's are made, so the pass's peak is one layer's, not all of them.
      // One kernel a layer where the backend has it (wasm): every cache row steps one token.
      const fused = tq === 1 && select === null && slotsT !== null && fusedDecodeLayerAvailable();
      w.layers.forEach(
        (lw, l) =>
          (x = tf.tidy(() => {
            if (fused) {
              const [out, keys, values] = decodeLayer(x, lw, this.keys[l], this.valuesT[l], maskT, slotsT, eps);
              newKeys.push(tf.keep(keys));
              newValues.push(tf.keep(values));
              return out;
            }
            const a = normalize(x, eps);
            const q = dense(a, lw.wq, lw.bq);
            const k = dense(a, lw.wk, lw.bk);
            const v = dense(a, lw.wv, lw.bv);
            const keys = slotsT
              ? cacheWrite(this.keys[l], k, slotsT, 'keys')
              : (tf.tensorScatterUpdate(this.keys[l], keyIndices!, tf.reshape(k, [nTok * h, dh])) as tf.Tensor4D);
            const values = slotsT
              ? cacheWrite(this.valuesT[l], v, slotsT, 'valuesT')
              : (tf.tensorScatterUpdate(this.valuesT[l], valIndices!, tf.reshape(v, [nTok * h * dh])) as tf.Tensor4D);
            newKeys.push(tf.keep(keys));
            newValues.push(tf.keep(values));
            const kr = select === null ? keys : selectRows(select, keys);
            const vr = select === null ? values : selectRows(select, values);

            let attended: tf.Tensor2D;
            if (tq === 1) {
              // One query per row: [rows·H, 1, dh] against the cached keys and values, no transposes.
              const scores = tf.matMul(tf.reshape(q, [rows * h, 1, dh]), tf.reshape(kr, [rows * h, width, dh]), false, true);
              const probs = tf.softmax(tf.add(tf.reshape(scores, [rows, h, width]), maskT));
              attended = tf.reshape(tf.matMul(tf.reshape(probs, [rows * h, 1, width]), tf.reshape(vr, [rows * h, dh, width]), false, true), [rows, d]);
            } else {
              const qh = tf.reshape(tf.transpose(tf.reshape(q, [rows, tq, h, dh]), [0, 2, 1, 3]), [rows * h, tq, dh]);
              const scores = tf.reshape(tf.matMul(qh, tf.reshape(kr, [rows * h, width, dh]), false, true), [rows, h, tq, width]);
              const probs = tf.reshape(tf.softmax(tf.add(scores, maskT)), [rows * h, tq, width]);
              const mixed = tf.matMul(probs, tf.reshape(vr, [rows * h, dh, width]), false, true);
              attended = tf.reshape(tf.transpose(tf.reshape(mixed, [rows, h, tq, dh]), [0, 2, 1, 3]), [nTok, d]);
            }
            const mid = tf.add(x, dense(attended, lw.wo, lw.bo)) as tf.Tensor2D;
            const up = geluNew(dense(normalize(mid, eps), lw.wfc, lw.bfc));
            return tf.add(mid, dense(up, lw.wproj, lw.bproj)) as tf.Tensor2D;
          })),
      );
      if (needPick) {
        const pick = new Float32Array(n * nTok);
        lastOf.forEach((t, i) => (pick[i * nTok + t] = 1));
        x = tf.matMul(tf.tensor2d(pick, [n, nTok]), x);
      }
      return dense(normalize(x, eps), w.head, w.headBias);
    });
    for (let l = 0; l < this.config.nLayer; l++) {
      this.keys[l].dispose();
      this.valuesT[l].dispose();
      this.keys[l] = newKeys[l];
      this.valuesT[l] = newValues[l];
    }
    return logits;
  }
}

/**
 * Rows of a cache tensor picked by a one-hot matrix [out, rows]. On wasm a matMul (exact: one
 * 1·x term, the rest 0·x) is far faster than gather or slice for this.
 */
function selectRows(select: tf.Tensor2D, t: tf.Tensor4D): tf.Tensor4D {
  return tf.tidy(() => {
    const [rows, a, b, c] = t.shape;
    const picked = tf.matMul(select, tf.reshape(t, [rows, a * b * c]));
    return tf.reshape(picked, [select.shape[0], a, b, c]) as tf.Tensor4D;
  });
}

/** LayerNorm without its affine part (that is folded into the next projection). */
function normalize(x: tf.Tensor2D, eps: number): tf.Tensor2D {
  if (fusedRowNormAvailable()) return rowNorm(x, eps);
  const centred = tf.sub(x, tf.mean(x, -1, true));
  return tf.mul(centred, tf.rsqrt(tf.add(tf.mean(tf.square(centred), -1, true), eps)));
}
