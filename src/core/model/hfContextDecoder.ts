/**
 * The rollout scheduler's `ContextDecoder` over a Hugging Face decoder (decoder.ts: GPT-2 and the
 * Llama family): many contexts (slots) of different lengths advance together, and the slots fed
 * one token each go through one forward.
 *
 * Layout: a slot's keys and values live in exactly one place. Slots that step one token at a time
 * share a left-padded batch cache, [rows, kvHeads, width, headDim] per layer with each row's pad
 * masked out of attention (decoderForward's `pad`); while the same slots keep stepping, each feed
 * runs straight from it and the forward's returned keys and values (which already hold the new
 * column) become the next cache. When the stepping slots change, the batch is changed as little as
 * it can be (copies of a whole cache are what a change costs; kvMoves.ts): a row that leaves is
 * picked out to the slot's own cache, [1, kvHeads, length, headDim] at its own positions, and stays
 * in the batch as a dead row that steps on with a filler token, unread; rows that join are
 * left-padded and concatenated at the end. Dead rows and padding columns no row needs are dropped
 * once they are a quarter of the batch (or the width would pass maxPositions). Multi-token feeds
 * (prompts, injected text) run in their own forwards from a slot's own cache; fresh slots' prompts
 * share left-padded passes.
 *
 * Rotary keys: decoderForward rotates every row's new query at the batch's column (width), so in
 * the batch a row's keys must be rotated at column = position + pad, and moving a row (a new pad,
 * or out of the batch) turns its keys by the change. Rotations compose (R(a)·R(b) = R(a + b)), and
 * turning a key is exact up to float rounding. GPT-2's learned positions are counted per row from
 * its first real token by decoderForward itself: its keys never move.
 *
 * Weights (and LoRA adapters) are read at every feed. A weight update does not recompute existing
 * caches: callers close and reopen slots after updating weights.
 */
import * as tf from '@tensorflow/tfjs';
import { type Adapters, type DecoderConfig, type DecoderParams, type LayerKv, decoderForward, ropeInverseFrequencies } from './decoder';
import type { ContextDecoder } from '../rollout/scheduler';
import { disposeKv, pickRows, tidyKv, turnKeys, widen } from './kvMoves';

/**
 * Token positions (rows × longest prompt) one padded prefill pass computes at most: many clones
 * spawned in one step would otherwise hold all their attention scores at once.
 */
const PREFILL_TOKENS = 4096;

/**
 * Dead rows, or padding columns no live row needs, are dropped when they pass this share of the
 * batch: dropping them costs a copy of the whole cache (and a turn of every rotary key when
 * columns go), keeping them a share of every step.
 */
const SLACK = 0.25;

interface Slot {
  /** Tokens held. */
  length: number;
  /** Row in the batch cache; null when the keys and values are the slot's own (or it is empty). */
  row: number | null;
  /** The slot's own keys and values [1, kvHeads, length, headDim], rotated at its positions; null when empty or in the batch. */
  kv: LayerKv[] | null;
}

interface Batch {
  /** Each row's slot; null: a dead row (its slot was closed or moved out), stepped with a filler token until the batch is compacted. */
  slots: (number | null)[];
  /** Left padding of each row: its position p is column p + pad. */
  pad: number[];
  width: number;
  /** Null while every row is empty (width 0). */
  kv: LayerKv[] | null;
}

/** One forward's logits [n, vocab] and the caller's index of each row (-1: a dead row, not read). */
interface Part {
  logits: tf.Tensor2D;
  indices: number[];
}

export class HfContextDecoder implements ContextDecoder {
  readonly vocabSize: number;
  /** Longest context a slot can hold (max_position_embeddings). */
  readonly maxPositions: number;
  private readonly slots = new Map<number, Slot>();
  private batch: Batch | null = null;
  /** Inverse rotary frequencies; null for GPT-2 (learned positions). */
  private readonly inverse: Float64Array | null;
  private repacks = 0;
  private disposed = false;
  /** Shared prompt heads read so far (newest last), with the weights they were read under (weightsStamp). */
  private heads: { tokens: number[]; kv: LayerKv[] }[] = [];
  private headsStamp: readonly object[] = [];

  constructor(
    private readonly params: DecoderParams,
    private readonly config: DecoderConfig,
    private readonly adapters?: Adapters,
  ) {
    this.vocabSize = config.vocabSize;
    this.maxPositions = config.maxPositions;
    this.inverse = config.family === 'gpt2' ? null : ropeInverseFrequencies(config);
  }

  /** Opens an empty context and returns its slot id (the lowest id not in use). */
  open(): number {
    this.checkAlive();
    let slot = 0;
    while (this.slots.has(slot)) slot++;
    this.slots.set(slot, { length: 0, row: null, kv: null });
    return slot;
  }

  close(slot: number): void {
    this.checkAlive();
    const s = this.slotOf(slot);
    if (s.row !== null) this.vacate(s.row);
    disposeKv(s.kv);
    this.slots.delete(slot);
  }

  /** Tokens held by a slot's context. */
  length(slot: number): number {
    return this.slotOf(slot).length;
  }

  /** How many times the batch cache was changed because the stepping slots changed (benches and tests read it). */
  get repackCount(): number {
    return this.repacks;
  }

  /**
   * Appends tokens[i] (at least one token each) to slots[i] and returns the logits after each
   * slot's last new token, row-major [slots.length × vocabSize] in the order given. Slots not
   * named are untouched. Throws, changing nothing, if a slot is not open, named twice, a token is
   * out of range, or a context would exceed maxPositions.
   */
  async feed(slots: readonly number[], tokens: readonly (readonly number[])[]): Promise<Float32Array> {
    this.checkAlive();
    this.validateFeed(slots, tokens);
    const V = this.vocabSize;
    const out = new Float32Array(slots.length * V);
    if (slots.length === 0) return out;

    const singles = slots.map((_, i) => i).filter((i) => tokens[i].length === 1);
    const multis = slots.map((_, i) => i).filter((i) => tokens[i].length > 1);
    const parts: Part[] = [];
    try {
      // Prompts and injections run apart from the stepping slots, so a long prefill does not pad every row to its length.
      for (const i of multis) {
        const s = this.slotOf(slots[i]);
        if (s.row !== null) this.moveOut(s.row);
      }
      const fresh = multis.filter((i) => this.slotOf(slots[i]).length === 0);
      for (const group of prefillGroups(fresh, (i) => tokens[i].length)) {
        const prompts = group.map((i) => tokens[i]);
        const head = this.headFor(prompts);
        parts.push(
          head !== null
            ? this.prefillShared(
                group.map((i) => slots[i]),
                prompts,
                group,
                head,
              )
            : this.prefill(
                group.map((i) => slots[i]),
                prompts,
                group,
              ),
        );
      }
      for (const i of multis.filter((i) => !fresh.includes(i))) parts.push(this.extend(slots[i], tokens[i], i));
      if (singles.length > 0) {
        this.arrange(singles.map((i) => slots[i]));
        parts.push(this.step(new Map(singles.map((i) => [slots[i], i])), (i) => tokens[i][0]));
      }
      // One readback per feed.
      const logits = parts.length === 1 ? parts[0].logits : tf.concat(parts.map((p) => p.logits));
      try {
        const values = (await logits.data()) as Float32Array;
        parts.flatMap((p) => p.indices).forEach((index, r) => index >= 0 && out.set(values.subarray(r * V, (r + 1) * V), index * V));
      } finally {
        if (parts.length > 1) logits.dispose();
      }
    } finally {
      parts.forEach((p) => p.logits.dispose());
    }
    return out;
  }

  /** Frees every cache (not the parameters). The decoder is unusable after. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.slots.forEach((s) => disposeKv(s.kv));
    this.slots.clear();
    disposeKv(this.batch?.kv ?? null);
    this.batch = null;
    this.heads.forEach((h) => disposeKv(h.kv));
    this.heads = [];
  }

  // ------------------------------------------------------------------------------ internals

  private checkAlive(): void {
    if (this.disposed) throw new Error('decoder: used after dispose()');
  }

  private slotOf(slot: number): Slot {
    const s = this.slots.get(slot);
    if (s === undefined) throw new Error(`decoder: slot ${slot} is not open`);
    return s;
  }

  private validateFeed(slots: readonly number[], tokens: readonly (readonly number[])[]): void {
    if (slots.length !== tokens.length) throw new Error(`decoder: feed got ${slots.length} slots but ${tokens.length} token lists`);
    const seen = new Set<number>();
    const { vocabSize, maxPositions } = this;
    slots.forEach((slot, i) => {
      const s = this.slotOf(slot);
      if (seen.has(slot)) throw new Error(`decoder: slot ${slot} is named twice in one feed`);
      seen.add(slot);
      const list = tokens[i];
      if (list.length === 0) throw new Error(`decoder: token list for slot ${slot} is empty (need at least 1 token)`);
      for (const t of list) {
        if (!Number.isInteger(t) || t < 0 || t >= vocabSize) throw new Error(`decoder: token ${t} for slot ${slot} is not an integer in [0, ${vocabSize - 1}]`);
      }
      const end = s.length + list.length;
      if (end > maxPositions) {
        throw new Error(
          `decoder: slot ${slot} would hold ${end} tokens, more than max_position_embeddings (${maxPositions}); it has ${s.length} and was fed ${list.length}`,
        );
      }
    });
  }

  /** Batch row `row`'s keys and values [1, kvHeads, length, headDim] at its own positions (the batch keeps its own). */
  private rowKv(b: Batch, row: number): LayerKv[] {
    const kv = b.kv as LayerKv[];
    const pad = b.pad[row];
    return tidyKv(() =>
      kv.map((l) => {
        // A batch of one unpadded row is the row itself: a clone (shared data) outlives the batch.
        const k = turnKeys(this.inverse, widen(pickRows(l.k, [row]), -pad), [-pad]);
        const v = widen(pickRows(l.v, [row]), -pad);
        return { k: k === l.k ? tf.clone(k) : k, v: v === l.v ? tf.clone(v) : v };
      }),
    );
  }

  /** Moves a batch row's keys and values to its slot's own cache. */
  private moveOut(row: number): void {
    const b = this.batch as Batch;
    const s = this.slotOf(b.slots[row] as number);
    s.kv = this.rowKv(b, row);
    s.row = null;
    this.vacate(row);
  }

  /** Marks a row dead; the batch is dropped once no row is live. */
  private vacate(row: number): void {
    const b = this.batch as Batch;
    b.slots[row] = null;
    if (b.slots.every((s) => s === null)) {
      disposeKv(b.kv);
      this.batch = null;
    }
  }

  /**
   * Makes the live rows of the batch exactly `slots`: nothing to do when they already are (and the
   * batch is not too slack); else rows whose slot is not stepping move out, the batch is compacted
   * when it is too slack, and the new slots are left-padded in after the rows already there.
   */
  private arrange(slots: readonly number[]): void {
    const want = new Set(slots);
    const entering = slots.filter((s) => this.slotOf(s).row === null);
    const leaving = (this.batch?.slots ?? []).flatMap((slot, row) => (slot !== null && !want.has(slot) ? [row] : []));
    if (entering.length === 0 && leaving.length === 0 && !this.tooSlack(0)) return;
    this.repacks++;
    for (const row of leaving) this.moveOut(row);
    const longest = Math.max(...slots.map((s) => this.slotOf(s).length));
    if (this.batch !== null && this.tooSlack(entering.length)) {
      const b = this.batch;
      this.rebuild(
        b.slots.flatMap((slot, row) => (slot !== null ? [row] : [])),
        longest,
      );
    }
    // A joining slot longer than the batch widens it.
    if (this.batch !== null && longest > this.batch.width) {
      const b = this.batch;
      this.rebuild(
        b.slots.map((_, row) => row),
        longest,
      );
    }
    if (entering.length > 0) this.append(entering);
  }

  /**
   * Whether dead rows (of the rows after `joining` more) or padding columns no live row needs pass
   * SLACK, or the next column would pass maxPositions (the width kept after the longest row left).
   */
  private tooSlack(joining: number): boolean {
    const b = this.batch;
    if (b === null) return false;
    let live = 0;
    let longest = 0;
    for (const slot of b.slots) {
      if (slot === null) continue;
      live++;
      longest = Math.max(longest, this.slotOf(slot).length);
    }
    return b.slots.length - live > SLACK * (b.slots.length + joining) || b.width - longest > SLACK * b.width || b.width + 1 > this.maxPositions;
  }

  /**
   * The batch reduced to rows `rows` (in order) at width `width`: columns cut from the left or
   * zeros added there, every kept row's keys turned by the change of its pad.
   */
  private rebuild(rows: readonly number[], width: number): void {
    const b = this.batch as Batch;
    const shift = width - b.width;
    const kv = tidyKv(() =>
      (b.kv as LayerKv[]).map((l) => ({
        k: turnKeys(this.inverse, widen(pickRows(l.k, rows), shift), [shift]),
        v: widen(pickRows(l.v, rows), shift),
      })),
    );
    const kept = new Set(kv.flatMap((l) => [l.k, l.v]));
    (b.kv as LayerKv[]).forEach((l) => [l.k, l.v].forEach((t) => kept.has(t) || t.dispose()));
    const slots = rows.map((r) => b.slots[r]);
    slots.forEach((slot, row) => slot !== null && (this.slotOf(slot).row = row));
    this.batch = { slots, pad: rows.map((r) => b.pad[r] + shift), width, kv };
  }

  /** Slots (not in the batch, at most its width long unless it is empty) left-padded into new rows after the others. */
  private append(slots: readonly number[]): void {
    const b = this.batch;
    const width = b?.width ?? Math.max(...slots.map((s) => this.slotOf(s).length));
    const pads = slots.map((s) => width - this.slotOf(s).length);
    const kv =
      width === 0
        ? null
        : tidyKv(() =>
            Array.from({ length: this.config.layers }, (_, l): LayerKv => {
              const pieces: LayerKv[] = b?.kv ? [b.kv[l]] : [];
              slots.forEach((slot, i) => {
                const own = this.slotOf(slot).kv;
                if (own === null) {
                  // An empty slot fed its first token: a row of padding only.
                  const shape: [number, number, number, number] = [1, this.config.kvHeads, width, this.config.headDim];
                  pieces.push({ k: tf.zeros(shape) as tf.Tensor4D, v: tf.zeros(shape) as tf.Tensor4D });
                } else pieces.push({ k: turnKeys(this.inverse, widen(own[l].k, pads[i]), [pads[i]]), v: widen(own[l].v, pads[i]) });
              });
              return {
                k: pieces.length === 1 ? pieces[0].k : (tf.concat(pieces.map((p) => p.k)) as tf.Tensor4D),
                v: pieces.length === 1 ? pieces[0].v : (tf.concat(pieces.map((p) => p.v)) as tf.Tensor4D),
              };
            }),
          );
    // A lone piece that needed no change is passed on as it is, not disposed.
    const kept = new Set(kv?.flatMap((l) => [l.k, l.v]));
    const replaced = [b?.kv ?? [], ...slots.map((slot) => this.slotOf(slot).kv ?? [])].flat();
    replaced.forEach((l) => [l.k, l.v].forEach((t) => kept.has(t) || t.dispose()));
    const before = b?.slots.length ?? 0;
    slots.forEach((slot, i) => {
      const s = this.slotOf(slot);
      s.kv = null;
      s.row = before + i;
    });
    this.batch = { slots: [...(b?.slots ?? []), ...slots], pad: [...(b?.pad ?? []), ...pads], width, kv };
  }

  /** One token for every batch row (`tokenOf` by the caller's index): one forward, the cache grows by a column. */
  private step(indexOf: ReadonlyMap<number, number>, tokenOf: (index: number) => number): Part {
    const b = this.batch as Batch;
    const indices = b.slots.map((slot) => (slot === null ? -1 : (indexOf.get(slot) as number)));
    const rows = indices.length;
    let next: LayerKv[] = [];
    const logits = tf.tidy(() => {
      const input = tf.tensor2d(
        indices.map((i) => (i < 0 ? 0 : tokenOf(i))),
        [rows, 1],
        'int32',
      );
      const r = decoderForward(this.params, this.config, input, b.kv, this.adapters, b.pad.some((p) => p > 0) ? b.pad : undefined);
      next = r.kv.map((l) => ({ k: tf.keep(l.k), v: tf.keep(l.v) }));
      return tf.reshape(r.logits, [rows, this.vocabSize]) as tf.Tensor2D;
    });
    disposeKv(b.kv);
    b.kv = next;
    b.width++;
    for (const slot of b.slots) if (slot !== null) this.slotOf(slot).length++;
    return { logits, indices };
  }

  /** Tokens appended to a slot that holds some already, from its own cache. */
  private extend(slot: number, tokens: readonly number[], index: number): Part {
    const s = this.slotOf(slot);
    const n = tokens.length;
    let next: LayerKv[] = [];
    const logits = tf.tidy(() => {
      const r = decoderForward(this.params, this.config, tf.tensor2d([[...tokens]], [1, n], 'int32'), s.kv, this.adapters);
      next = r.kv.map((l) => ({ k: tf.keep(l.k), v: tf.keep(l.v) }));
      return tf.reshape(tf.slice(r.logits, [0, n - 1, 0], [1, 1, this.vocabSize]), [1, this.vocabSize]) as tf.Tensor2D;
    });
    disposeKv(s.kv);
    s.kv = next;
    s.length += n;
    return { logits, indices: [index] };
  }

  /** The weights as they are now: a variable's data changes identity when it is assigned (an update). */
  private weightsStamp(): object[] {
    const adapted = (this.adapters as { params?: ReadonlyMap<string, tf.Tensor> } | undefined)?.params;
    return [...this.params.values(), ...(adapted?.values() ?? [])].map((t) => t.dataId);
  }

  /**
   * The head a group of fresh prompts shares: one read before under the same weights (a chat's
   * system prompt, the clones' own), else their common first part read now when two or more begin
   * alike; null when they share too little. Every prompt keeps at least one token of its own.
   */
  private headFor(prompts: readonly (readonly number[])[]): { tokens: number[]; kv: LayerKv[] } | null {
    const stamp = this.weightsStamp();
    if (stamp.length !== this.headsStamp.length || stamp.some((d, i) => d !== this.headsStamp[i])) {
      this.heads.forEach((h) => disposeKv(h.kv));
      this.heads = [];
      this.headsStamp = stamp;
    }
    const fits = (h: { tokens: number[] }) => prompts.every((p) => p.length > h.tokens.length && h.tokens.every((t, i) => p[i] === t));
    const known = this.heads.filter(fits).sort((a, b) => b.tokens.length - a.tokens.length)[0];
    const shared = prompts.length > 1 ? sharedHead(prompts) : 0;
    if (known !== undefined && known.tokens.length >= shared) return known;
    if (shared < SHARED_HEAD_MIN) return known ?? null;
    const tokens = prompts[0].slice(0, shared);
    const kv = tidyKv(() => decoderForward(this.params, this.config, tf.tensor2d([tokens], [1, shared], 'int32'), null, this.adapters).kv);
    this.heads.push({ tokens, kv });
    if (this.heads.length > MAX_HEADS) disposeKv((this.heads.shift() as { kv: LayerKv[] }).kv);
    return this.heads[this.heads.length - 1];
  }

  /**
   * Prompts of empty slots that begin alike (a chat's system prompt and tools; a GRPO group's one
   * prompt): the first `shared` tokens read once, their keys and values copied to every row, then
   * every prompt's rest in one forward from there, right-padded with its last token (causal
   * attention keeps a real position from reading the padding after it); each slot keeps its own
   * positions' keys and values, and its logits are those after its last real token.
   */
  private prefillShared(slots: readonly number[], prompts: readonly (readonly number[])[], indices: number[], head: { tokens: number[]; kv: LayerKv[] }): Part {
    const rows = slots.length;
    const shared = head.tokens.length;
    const rests = prompts.map((p) => p.slice(shared));
    const longest = Math.max(...rests.map((r) => r.length));
    const V = this.vocabSize;
    let own: LayerKv[][] = [];
    const logits = tf.tidy(() => {
      const tiled = head.kv.map((l) => ({ k: tf.tile(l.k, [rows, 1, 1, 1]) as tf.Tensor4D, v: tf.tile(l.v, [rows, 1, 1, 1]) as tf.Tensor4D }));
      const input = tf.tensor2d(
        rests.map((r) => [...r, ...new Array<number>(longest - r.length).fill(r[r.length - 1])]),
        [rows, longest],
        'int32',
      );
      const r = decoderForward(this.params, this.config, input, tiled, this.adapters);
      own = rests.map((rest, row) =>
        r.kv.map((l) => {
          const keep = (t: tf.Tensor4D) => {
            const one = pickRows(t, [row]);
            return tf.keep(tf.slice(one, [0, 0, 0, 0], [1, one.shape[1], shared + rest.length, one.shape[3]]) as tf.Tensor4D);
          };
          return { k: keep(l.k), v: keep(l.v) };
        }),
      );
      return tf.concat(
        rests.map((rest, row) => tf.reshape(tf.slice(r.logits, [row, rest.length - 1, 0], [1, 1, V]), [1, V])),
        0,
      ) as tf.Tensor2D;
    });
    slots.forEach((slot, row) => {
      const s = this.slotOf(slot);
      s.kv = own[row];
      s.length = prompts[row].length;
    });
    return { logits, indices };
  }

  /** Prompts of empty slots in one left-padded forward; each slot keeps its rows of keys and values. */
  private prefill(slots: readonly number[], prompts: readonly (readonly number[])[], indices: number[]): Part {
    const rows = slots.length;
    const longest = Math.max(...prompts.map((p) => p.length));
    const pad = prompts.map((p) => longest - p.length);
    const V = this.vocabSize;
    let own: LayerKv[][] = [];
    const logits = tf.tidy(() => {
      // Padding repeats a row's first token (any id would do: it is never attended to).
      const input = tf.tensor2d(
        prompts.map((p, r) => [...new Array<number>(pad[r]).fill(p[0]), ...p]),
        [rows, longest],
        'int32',
      );
      const r = decoderForward(this.params, this.config, input, null, this.adapters, pad.some((p) => p > 0) ? pad : undefined);
      const b: Batch = { slots: [...slots], pad, width: longest, kv: r.kv };
      own = slots.map((_, row) => (rows === 1 ? r.kv : this.rowKv(b, row)).map((l) => ({ k: tf.keep(l.k), v: tf.keep(l.v) })));
      return tf.reshape(tf.slice(r.logits, [0, longest - 1, 0], [rows, 1, V]), [rows, V]) as tf.Tensor2D;
    });
    slots.forEach((slot, row) => {
      const s = this.slotOf(slot);
      s.kv = own[row];
      s.length = prompts[row].length;
    });
    return { logits, indices };
  }
}

/** Fewest tokens a feed's prompts must share for their common first part to be read once (prefillShared). */
const SHARED_HEAD_MIN = 8;
/** Shared heads a decoder keeps (the root's chat, the clones' chat, a few more). */
const MAX_HEADS = 4;

/** Tokens every prompt begins with, leaving each at least one of its own (its logits come from there). */
function sharedHead(prompts: readonly (readonly number[])[]): number {
  let n = Math.min(...prompts.map((p) => p.length)) - 1;
  for (const p of prompts.slice(1)) {
    let k = 0;
    while (k < n && p[k] === prompts[0][k]) k++;
    n = k;
  }
  return Math.max(0, n);
}

/** Callers' indices in passes of at most PREFILL_TOKENS padded positions. */
function prefillGroups(indices: readonly number[], lengthOf: (index: number) => number): number[][] {
  const groups: number[][] = [];
  let group: number[] = [];
  let longest = 0;
  for (const i of indices) {
    const n = Math.max(longest, lengthOf(i));
    if (group.length > 0 && (group.length + 1) * n > PREFILL_TOKENS) {
      groups.push(group);
      group = [];
      longest = 0;
    }
    group.push(i);
    longest = Math.max(longest, lengthOf(i));
  }
  if (group.length > 0) groups.push(group);
  return groups;
}
