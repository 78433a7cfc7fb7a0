/**
 * The safetensors container (Hugging Face), bytes in and bytes out.
 *
 * Layout: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON mapping each tensor name
 * to {dtype, shape, data_offsets: [begin, end]} (offsets relative to the first data byte) plus
 * an optional "__metadata__" string→string map, then the tensors' bytes, row-major,
 * little-endian. We write F32 values, or F16/BF16 patterns as given; we read F32, F16 and BF16
 * (the dtypes HF checkpoints are usually saved in), F16/BF16 kept as their patterns and widened to
 * Float32Array when read as values.
 *
 * The reader treats the file as hostile: every number in the header is checked before it is
 * used, and the byte ranges must tile the data section exactly (no overlap, no gap, nothing
 * left over), as the reference implementation requires.
 */

export type SafetensorsDtype = 'F32' | 'F16' | 'BF16';

/** A tensor to write as F32. */
export interface TensorToEncode {
  name: string;
  shape: number[];
  data: Float32Array;
}

/** A tensor to write as F16 or BF16: its 16-bit patterns, written as given. */
export interface HalfTensorToEncode {
  name: string;
  shape: number[];
  dtype: 'F16' | 'BF16';
  bits: Uint16Array;
}

const valuesOf = (t: TensorToEncode | HalfTensorToEncode): Float32Array | Uint16Array => ('bits' in t ? t.bits : t.data);

export interface DecodedTensor {
  /** The dtype stored in the file; `data` is always widened to f32. */
  dtype: SafetensorsDtype;
  shape: number[];
  /** The values as f32 (for F16 and BF16 widened anew on each read: read it once). */
  readonly data: Float32Array;
  /** F16 and BF16: the stored 16-bit patterns, element by element. */
  bits?: Uint16Array;
}

export interface DecodedSafetensors {
  tensors: Map<string, DecodedTensor>;
  metadata: Record<string, string>;
}

const BYTES_PER_ELEMENT: Record<SafetensorsDtype, number> = { F32: 4, F16: 2, BF16: 2 };
/** Same cap as the reference implementation: a bigger header is corrupt or hostile. */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;
const METADATA_KEY = '__metadata__';
const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export class SafetensorsError extends Error {
  constructor(message: string) {
    super(`safetensors: ${message}`);
    this.name = 'SafetensorsError';
  }
}

function fail(message: string): never {
  throw new SafetensorsError(message);
}

function elementCount(shape: readonly number[]): number {
  return shape.reduce((n, d) => n * d, 1);
}

const shapeText = (shape: readonly number[]) => `[${shape.join(', ')}]`;

// ---------------------------------------------------------------------------------------------
// Encode

export function encodeSafetensors(tensors: readonly (TensorToEncode | HalfTensorToEncode)[], metadata?: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = {};
  if (metadata !== undefined) {
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== 'string') fail(`metadata value for ${JSON.stringify(k)} must be a string`);
    }
    header[METADATA_KEY] = { ...metadata };
  }
  let offset = 0;
  const seen = new Set<string>();
  for (const t of tensors) {
    if (t.name === METADATA_KEY || t.name.length === 0) fail(`invalid tensor name ${JSON.stringify(t.name)}`);
    if (seen.has(t.name)) fail(`duplicate tensor name ${t.name}`);
    seen.add(t.name);
    if (!t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      fail(`tensor ${t.name}: shape ${shapeText(t.shape)} must be non-negative integers`);
    }
    const values = valuesOf(t);
    if (elementCount(t.shape) !== values.length) {
      fail(`tensor ${t.name}: shape ${shapeText(t.shape)} holds ${elementCount(t.shape)} values but data has ${values.length}`);
    }
    const end = offset + values.byteLength;
    header[t.name] = { dtype: 'bits' in t ? t.dtype : 'F32', shape: [...t.shape], data_offsets: [offset, end] };
    offset = end;
  }

  let json = new TextEncoder().encode(JSON.stringify(header));
  // Pad with spaces so the data section starts 8-byte aligned (lets readers map it in place).
  const padded = Math.ceil(json.length / 8) * 8;
  if (padded !== json.length) {
    const p = new Uint8Array(padded).fill(0x20);
    p.set(json);
    json = p;
  }

  const out = new Uint8Array(8 + json.length + offset);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  let pos = 8 + json.length;
  for (const t of tensors) {
    const values = valuesOf(t);
    if (LITTLE_ENDIAN_HOST) {
      out.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), pos);
    } else if (values instanceof Uint16Array) {
      for (let i = 0; i < values.length; i++) view.setUint16(pos + 2 * i, values[i], true);
    } else {
      for (let i = 0; i < values.length; i++) view.setFloat32(pos + 4 * i, values[i], true);
    }
    pos += values.byteLength;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Decode

interface Entry {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  begin: number;
  end: number;
}

export function decodeSafetensors(bytes: Uint8Array): DecodedSafetensors {
  if (bytes.length < 8) {
    fail(`file is ${bytes.length} bytes, shorter than the 8-byte header length (empty or truncated file)`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLen = view.getBigUint64(0, true);
  if (headerLen > BigInt(bytes.length - 8)) {
    fail(`header length ${headerLen} extends beyond the file (${bytes.length - 8} bytes after the length field): truncated file or not safetensors`);
  }
  const n = Number(headerLen);
  if (n > MAX_HEADER_BYTES) fail(`header length ${n} exceeds the ${MAX_HEADER_BYTES}-byte limit`);

  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n));
  } catch {
    return fail('header is not valid UTF-8');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return fail(`header is not valid JSON (${(e as Error).message})`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    fail('header JSON must be an object mapping tensor names to {dtype, shape, data_offsets}');
  }
  const header = parsed as Record<string, unknown>;
  // JSON.parse keeps the last of two equal keys: a header naming a tensor twice is refused, not half read.
  const twice = duplicateKey(text);
  if (twice !== null) fail(`header names ${JSON.stringify(twice)} twice`);

  const metadata = parseMetadata(header[METADATA_KEY]);
  const entries: Entry[] = [];
  for (const [name, info] of Object.entries(header)) {
    if (name === METADATA_KEY) continue;
    entries.push(parseEntry(name, info));
  }

  const data = bytes.subarray(8 + n);
  checkTiling(entries, data.length);

  const tensors = new Map<string, DecodedTensor>();
  for (const e of entries) {
    tensors.set(e.name, decodedTensor(e.dtype, e.shape, data.subarray(e.begin, e.end)));
  }
  return { tensors, metadata };
}

/**
 * The first key given twice in the top-level object of a JSON text (already parsed, so valid),
 * or null. Walks the text keeping the nesting depth; a string at depth 1 followed by `:` is a key.
 */
export function duplicateKey(text: string): string | null {
  const seen = new Set<string>();
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    else if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (depth === 1) {
        let k = j + 1;
        while (k < text.length && /\s/.test(text[k])) k++;
        if (text[k] === ':') {
          const key = JSON.parse(text.slice(i, j + 1)) as string;
          if (seen.has(key)) return key;
          seen.add(key);
        }
      }
      i = j;
    }
  }
  return null;
}

function parseMetadata(raw: unknown): Record<string, string> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) fail('__metadata__ must be an object of strings');
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
    if (typeof v !== 'string') fail(`__metadata__.${k} must be a string (got ${JSON.stringify(v)})`);
    out[k] = v as string;
  }
  return out;
}

function parseEntry(name: string, info: unknown): Entry {
  if (info === null || typeof info !== 'object' || Array.isArray(info)) {
    fail(`tensor ${name}: entry must be an object {dtype, shape, data_offsets}`);
  }
  const { dtype, shape, data_offsets: offsets } = info as Record<string, unknown>;
  if (typeof dtype !== 'string') fail(`tensor ${name}: dtype is missing or not a string`);
  if (!(dtype === 'F32' || dtype === 'F16' || dtype === 'BF16')) {
    fail(`tensor ${name}: unsupported dtype ${JSON.stringify(dtype)} (supported: F32, F16, BF16)`);
  }
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    fail(`tensor ${name}: shape must be an array of non-negative integers (got ${JSON.stringify(shape)})`);
  }
  const dims = shape as number[];
  const count = elementCount(dims);
  if (!Number.isSafeInteger(count)) fail(`tensor ${name}: shape ${shapeText(dims)} is too large`);
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) || offsets[0] > offsets[1]) {
    fail(`tensor ${name}: data_offsets must be [begin, end] with integers 0 <= begin <= end (got ${JSON.stringify(offsets)})`);
  }
  const [begin, end] = offsets as [number, number];
  const dt = dtype as SafetensorsDtype;
  const need = count * BYTES_PER_ELEMENT[dt];
  if (end - begin !== need) {
    fail(`tensor ${name}: data_offsets [${begin}, ${end}] span ${end - begin} bytes but shape ${shapeText(dims)} of ${dt} needs ${need}`);
  }
  return { name, dtype: dt, shape: [...dims], begin, end };
}

/** The byte ranges must cover the data section exactly once, in some order. */
function checkTiling(entries: Entry[], dataLength: number): void {
  for (const e of entries) {
    if (e.end > dataLength) {
      fail(`tensor ${e.name}: data_offsets [${e.begin}, ${e.end}] go past the end of the data section (${dataLength} bytes): truncated file`);
    }
  }
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let pos = 0;
  let prev: Entry | undefined;
  for (const e of sorted) {
    if (e.begin < pos) {
      fail(`tensors ${prev?.name} and ${e.name} overlap (bytes ${e.begin}..${pos})`);
    }
    if (e.begin > pos) {
      fail(`${e.begin - pos} unused bytes before tensor ${e.name} (offset ${pos}..${e.begin}): data sections must be contiguous`);
    }
    pos = e.end;
    prev = e;
  }
  if (pos !== dataLength) {
    fail(`${dataLength - pos} trailing bytes after the last tensor (data section is ${dataLength} bytes, tensors cover ${pos})`);
  }
}

/** A tensor's entry: F32 read at once; F16 and BF16 kept as their 16-bit patterns and widened to f32 when `data` is first read. */
function decodedTensor(dtype: SafetensorsDtype, shape: number[], raw: Uint8Array): DecodedTensor {
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  if (dtype === 'F32') {
    // A copy into a fresh, aligned buffer the result owns (new Uint8Array, not slice(): a Node
    // Buffer's slice is a view of the whole file).
    if (LITTLE_ENDIAN_HOST) return { dtype, shape, data: new Float32Array(new Uint8Array(raw).buffer) };
    const out = new Float32Array(raw.length / 4);
    for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(4 * i, true);
    return { dtype, shape, data: out };
  }
  const bits = LITTLE_ENDIAN_HOST
    ? new Uint16Array(new Uint8Array(raw).buffer)
    : Uint16Array.from({ length: raw.length / 2 }, (_, i) => view.getUint16(2 * i, true));
  const entry = { dtype, shape, bits } as { dtype: SafetensorsDtype; shape: number[]; bits: Uint16Array; data: Float32Array };
  // Widened on each read and not kept: a loader that reads each tensor once to copy it holds the
  // 16-bit patterns and one tensor's f32 values at a time, never a second copy of the whole file.
  return Object.defineProperty(entry, 'data', { enumerable: true, get: () => widenBits(dtype, bits) });
}

/** 16-bit patterns of F16 or BF16 as f32 values (exact: every one is representable). */
export function widenBits(dtype: 'F16' | 'BF16', bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  if (dtype === 'BF16') {
    // bfloat16 is the top half of an f32: shift the bits back into place.
    const wide = new Uint32Array(out.buffer);
    for (let i = 0; i < out.length; i++) wide[i] = bits[i] << 16;
  } else {
    for (let i = 0; i < out.length; i++) out[i] = halfToFloat(bits[i]);
  }
  return out;
}

/** IEEE 754 binary16 → number (exact: every half is representable as an f32). */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24; // zero or subnormal
  if (exp === 0x1f) return frac === 0 ? sign * Infinity : NaN;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}
