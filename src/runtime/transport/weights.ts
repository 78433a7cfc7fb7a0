/**
 * Weights on the wire: every parameter (HF names) packed into one buffer.
 *
 * Where SharedArrayBuffer is usable (Node; a cross-origin-isolated page and its workers) one
 * shared buffer is written per version and posted to every rollout worker without a copy per
 * worker; otherwise each worker gets its own copy, transferred (not cloned). A packed buffer is
 * never written again after it is posted: the next version gets a fresh one, so a worker that
 * is still reading the old version cannot see a half-written new one.
 */

export interface WeightPayload {
  names: string[];
  /** Start of each tensor in `buffer`, in float32 elements. */
  offsets: number[];
  lengths: number[];
  buffer: ArrayBuffer | SharedArrayBuffer;
}

export function packWeights(arrays: ReadonlyMap<string, Float32Array>, shared: boolean): WeightPayload {
  const names = [...arrays.keys()];
  const lengths = names.map((n) => (arrays.get(n) as Float32Array).length);
  const offsets: number[] = [];
  let total = 0;
  for (const n of lengths) {
    offsets.push(total);
    total += n;
  }
  const buffer = shared ? new SharedArrayBuffer(total * 4) : new ArrayBuffer(total * 4);
  const all = new Float32Array(buffer);
  names.forEach((name, i) => all.set(arrays.get(name) as Float32Array, offsets[i]));
  return { names, offsets, lengths, buffer };
}

export function isShared(p: WeightPayload): boolean {
  return typeof SharedArrayBuffer !== 'undefined' && p.buffer instanceof SharedArrayBuffer;
}

/** A payload for one more receiver: the same shared buffer, or a private copy to transfer. */
export function payloadForReceiver(p: WeightPayload): { payload: WeightPayload; transfer: Transferable[] } {
  if (isShared(p)) return { payload: p, transfer: [] };
  const buffer = (p.buffer as ArrayBuffer).slice(0);
  return { payload: { ...p, buffer }, transfer: [buffer] };
}

/** Name → values. Views of a private buffer; copies out of a shared one (it is not ours to keep). */
export function unpackWeights(p: WeightPayload): Map<string, Float32Array> {
  const n = p.names.length;
  if (p.offsets.length !== n || p.lengths.length !== n) throw new Error('weights: names, offsets and lengths differ in length');
  const total = p.buffer.byteLength / 4;
  const shared = isShared(p);
  const out = new Map<string, Float32Array>();
  p.names.forEach((name, i) => {
    const start = p.offsets[i];
    const length = p.lengths[i];
    if (!Number.isInteger(start) || !Number.isInteger(length) || start < 0 || length < 0 || start + length > total) {
      throw new Error(`weights: ${name} lies outside the buffer (offset ${start}, length ${length}, buffer ${total} values)`);
    }
    const view = new Float32Array(p.buffer, start * 4, length);
    out.set(name, shared ? view.slice() : view);
  });
  return out;
}
