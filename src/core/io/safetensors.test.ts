import { describe, expect, it } from 'vitest';
import { decodeSafetensors, duplicateKey, encodeSafetensors, halfToFloat } from './safetensors';

/** A safetensors file from a header object (or raw header text) and raw data bytes. */
function rawFile(header: unknown, data: Uint8Array = new Uint8Array(0)): Uint8Array {
  const json = new TextEncoder().encode(typeof header === 'string' ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

function u16le(values: number[]): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  const v = new DataView(out.buffer);
  values.forEach((x, i) => v.setUint16(2 * i, x, true));
  return out;
}

const bitsOf = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

describe('encodeSafetensors / decodeSafetensors', () => {
  it('round-trips values bit-exactly, including -0, subnormals, infinities and NaN payloads', () => {
    const special = new Float32Array(8);
    new Uint32Array(special.buffer).set([
      0x80000000, // -0
      0x00000001, // smallest subnormal
      0x7f800000, // +Inf
      0xff800000, // -Inf
      0x7fc00001, // NaN with a payload
      0x3eaaaaab, // 1/3
      0x7f7fffff, // max float
      0x12345678,
    ]);
    const matrix = Float32Array.from({ length: 12 }, (_, i) => Math.sin(i + 1) * 10 ** (i - 6));
    const tensors = [
      { name: 'a.special', shape: [2, 4], data: special },
      { name: 'b.matrix', shape: [3, 4], data: matrix },
      { name: 'c.scalar', shape: [], data: Float32Array.of(-7.25) },
      { name: 'd.empty', shape: [0, 5], data: new Float32Array(0) },
    ];
    const bytes = encodeSafetensors(tensors, { format: 'pt', note: 'hé' });
    const decoded = decodeSafetensors(bytes);

    expect(decoded.metadata).toEqual({ format: 'pt', note: 'hé' });
    expect([...decoded.tensors.keys()].sort()).toEqual(['a.special', 'b.matrix', 'c.scalar', 'd.empty']);
    for (const t of tensors) {
      const got = decoded.tensors.get(t.name);
      expect(got?.dtype).toBe('F32');
      expect(got?.shape).toEqual(t.shape);
      expect(bitsOf(got?.data as Float32Array)).toEqual(bitsOf(t.data));
    }
  });

  it('writes the documented layout: u64 LE header size, space-padded JSON, 8-byte aligned data', () => {
    const bytes = encodeSafetensors([{ name: 'x', shape: [3], data: Float32Array.of(1, 2, 3) }]);
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    expect((8 + n) % 8).toBe(0);
    const headerText = new TextDecoder().decode(bytes.subarray(8, 8 + n));
    expect(JSON.parse(headerText)).toEqual({ x: { dtype: 'F32', shape: [3], data_offsets: [0, 12] } });
    expect(headerText.trimEnd().length).toBeLessThanOrEqual(n);
    expect(/^ *$/.test(headerText.slice(headerText.trimEnd().length))).toBe(true);
    expect(bytes.length).toBe(8 + n + 12);
    expect(new DataView(bytes.buffer).getFloat32(8 + n + 4, true)).toBe(2);
  });

  it('decodes a tensor whose data is not 4-byte aligned in the file', () => {
    // Header of odd length, no padding: data starts at an odd offset.
    const data = new Uint8Array(new Float32Array([1.5, -2]).buffer);
    const file = rawFile('{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} ', data);
    expect((file.length - 8) % 4).not.toBe(0);
    expect(Array.from(decodeSafetensors(file).tensors.get('t')?.data ?? [])).toEqual([1.5, -2]);
  });

  it('decodes F16 to the exact float32 values', () => {
    const halves = [0x3c00, 0xc000, 0x3555, 0x7bff, 0x0001, 0x8000, 0x7c00, 0xfc00, 0x7e00];
    const file = rawFile({ h: { dtype: 'F16', shape: [3, 3], data_offsets: [0, 18] } }, u16le(halves));
    const t = decodeSafetensors(file).tensors.get('h');
    expect(t?.dtype).toBe('F16');
    expect(t?.shape).toEqual([3, 3]);
    const v = Array.from(t?.data ?? []);
    expect(v.slice(0, 5)).toEqual([1, -2, 0.333251953125, 65504, 2 ** -24]);
    expect(Object.is(v[5], -0)).toBe(true);
    expect(v[6]).toBe(Infinity);
    expect(v[7]).toBe(-Infinity);
    expect(Number.isNaN(v[8])).toBe(true);
    expect(halfToFloat(0x03ff)).toBe(1023 * 2 ** -24); // largest subnormal
  });

  it('decodes BF16 to the exact float32 values', () => {
    const file = rawFile({ b: { dtype: 'BF16', shape: [5], data_offsets: [0, 10] } }, u16le([0x3f80, 0xc040, 0x3eab, 0x4049, 0xff80]));
    const t = decodeSafetensors(file).tensors.get('b');
    expect(t?.dtype).toBe('BF16');
    expect(Array.from(t?.data ?? [])).toEqual([1, -3, 0.333984375, 3.140625, -Infinity]);
  });

  it('writes F16 and BF16 patterns as given, and reads back the patterns and their values', () => {
    const h = Uint16Array.of(0x3c00, 0xc000, 0x0001, 0x7c00);
    const b = Uint16Array.of(0x3f80, 0xc040, 0x3eab, 0x4049);
    const file = encodeSafetensors([
      { name: 'h', shape: [2, 2], dtype: 'F16', bits: h },
      { name: 'f', shape: [1], data: Float32Array.of(0.5) },
      { name: 'b', shape: [4], dtype: 'BF16', bits: b },
    ]);
    const t = decodeSafetensors(file).tensors;
    expect(t.get('h')).toMatchObject({ dtype: 'F16', shape: [2, 2] });
    expect(Array.from(t.get('h')?.bits ?? [])).toEqual(Array.from(h));
    expect(Array.from(t.get('h')?.data ?? [])).toEqual([1, -2, 2 ** -24, Infinity]);
    expect(t.get('f')?.bits).toBeUndefined();
    expect(Array.from(t.get('b')?.data ?? [])).toEqual([1, -3, 0.333984375, 3.140625]);
    expect(() => encodeSafetensors([{ name: 'x', shape: [3], dtype: 'F16', bits: h }])).toThrow('holds 3 values but data has 4');
  });

  it('copies each tensor out of a Node Buffer (whose slice is a view of a shared pool)', () => {
    const file = encodeSafetensors([
      { name: 'a', shape: [2], data: Float32Array.of(1, 2) },
      { name: 'b', shape: [2], dtype: 'BF16', bits: Uint16Array.of(0x3f80, 0x4040) },
    ]);
    const t = decodeSafetensors(Buffer.from(file)).tensors;
    expect(Array.from(t.get('a')?.data ?? [])).toEqual([1, 2]);
    expect(Array.from(t.get('b')?.data ?? [])).toEqual([1, 3]);
  });

  it('accepts mixed dtypes in one file with offsets in any header order', () => {
    const f32 = new Uint8Array(Float32Array.of(4).buffer);
    const file = rawFile(
      {
        __metadata__: { format: 'pt' },
        second: { dtype: 'F32', shape: [1], data_offsets: [2, 6] },
        first: { dtype: 'BF16', shape: [1], data_offsets: [0, 2] },
      },
      new Uint8Array([...u16le([0x3f80]), ...f32]),
    );
    const { tensors } = decodeSafetensors(file);
    expect(tensors.get('first')?.data[0]).toBe(1);
    expect(tensors.get('second')?.data[0]).toBe(4);
  });
});

describe('decodeSafetensors rejects bad files with a message naming the problem', () => {
  const f32x3 = new Uint8Array(12);
  const ok = { dtype: 'F32', shape: [3], data_offsets: [0, 12] };

  const cases: [string, () => Uint8Array, RegExp][] = [
    ['a file shorter than 8 bytes', () => new Uint8Array(5), /file is 5 bytes, shorter than the 8-byte header length/],
    [
      'a header length beyond the file',
      () => {
        const f = rawFile({ t: ok }, f32x3);
        new DataView(f.buffer).setBigUint64(0, 1000n, true);
        return f;
      },
      /header length 1000 extends beyond the file \(\d+ bytes after the length field\)/,
    ],
    ['a header that is not JSON', () => rawFile('{"t": {', f32x3), /header is not valid JSON/],
    ['a header that is not an object', () => rawFile('[1, 2]'), /header JSON must be an object/],
    // JSON.parse would keep the second entry and silently drop the first.
    ['a header naming a tensor twice', () => rawFile(`{"t": ${JSON.stringify(ok)}, "t": ${JSON.stringify(ok)}}`, f32x3), /header names "t" twice/],
    [
      'a header naming a tensor twice, written with an escape',
      () => rawFile(`{"t": ${JSON.stringify(ok)}, "\\u0074": ${JSON.stringify(ok)}}`, f32x3),
      /header names "t" twice/,
    ],
    ['a tensor entry that is not an object', () => rawFile({ t: 3 }), /tensor t: entry must be an object/],
    [
      'an unknown dtype',
      () => rawFile({ t: { ...ok, dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, new Uint8Array(8)),
      /tensor t: unsupported dtype "I64" \(supported: F32, F16, BF16\)/,
    ],
    [
      'a shape that is not integers',
      () => rawFile({ t: { ...ok, shape: [1.5, 2] } }, f32x3),
      /tensor t: shape must be an array of non-negative integers \(got \[1.5,2\]\)/,
    ],
    ['a negative dimension', () => rawFile({ t: { ...ok, shape: [-3] } }, f32x3), /tensor t: shape must be an array of non-negative integers/],
    [
      'malformed data_offsets',
      () => rawFile({ t: { ...ok, data_offsets: [12, 0] } }, f32x3),
      /tensor t: data_offsets must be \[begin, end\] with integers 0 <= begin <= end \(got \[12,0\]\)/,
    ],
    [
      'data_offsets that do not match shape × dtype',
      () => rawFile({ t: { ...ok, data_offsets: [0, 8] } }, new Uint8Array(8)),
      /tensor t: data_offsets \[0, 8\] span 8 bytes but shape \[3\] of F32 needs 12/,
    ],
    [
      'data_offsets past the end of the data',
      () => rawFile({ t: { ...ok, data_offsets: [4, 16] } }, f32x3),
      /tensor t: data_offsets \[4, 16\] go past the end of the data section \(12 bytes\): truncated file/,
    ],
    [
      'overlapping tensors',
      () =>
        rawFile({ a: ok, b: { dtype: 'F32', shape: [2], data_offsets: [8, 16] }, c: { dtype: 'F32', shape: [1], data_offsets: [16, 20] } }, new Uint8Array(20)),
      /tensors a and b overlap \(bytes 8\.\.12\)/,
    ],
    [
      'a gap between tensors',
      () => rawFile({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] }, b: { dtype: 'F32', shape: [1], data_offsets: [8, 12] } }, f32x3),
      /4 unused bytes before tensor b \(offset 4\.\.8\)/,
    ],
    [
      'trailing bytes after the last tensor',
      () => rawFile({ t: ok }, new Uint8Array(16)),
      /4 trailing bytes after the last tensor \(data section is 16 bytes, tensors cover 12\)/,
    ],
    [
      'truncated data (missing bytes)',
      () => encodeSafetensors([{ name: 'w', shape: [2, 2], data: Float32Array.of(1, 2, 3, 4) }]).slice(0, -4),
      /tensor w: data_offsets \[0, 16\] go past the end of the data section \(12 bytes\): truncated file/,
    ],
    ['metadata with a non-string value', () => rawFile({ __metadata__: { step: 3 }, t: ok }, f32x3), /__metadata__\.step must be a string \(got 3\)/],
    [
      'a header that is not UTF-8',
      () => {
        const f = rawFile('{"t":1}');
        f[9] = 0xff;
        return f;
      },
      /header is not valid UTF-8/,
    ],
  ];

  it.each(cases)('%s', (_label, make, message) => {
    expect(() => decodeSafetensors(make())).toThrow(message);
  });

  it('finds repeated keys only at the top level of the header (nested objects, strings with quotes and braces are not keys)', () => {
    expect(duplicateKey('{"a": {"x": 1, "y": {"x": 2}}, "b": ["a", "a"], "c\\"}": 1}')).toBeNull();
    expect(duplicateKey('{"a": 1, "b": {"a": 2}, "a" : 3}')).toBe('a');
    expect(duplicateKey('{"__metadata__": {"k": "v"}, "__metadata__": {}}')).toBe('__metadata__');
  });

  it('prefixes every message with "safetensors:"', () => {
    expect(() => decodeSafetensors(new Uint8Array(0))).toThrow(/^safetensors: /);
  });
});

describe('encodeSafetensors rejects inconsistent input', () => {
  it('names a tensor whose data does not fill its shape', () => {
    expect(() => encodeSafetensors([{ name: 'w', shape: [2, 3], data: new Float32Array(5) }])).toThrow(
      /tensor w: shape \[2, 3\] holds 6 values but data has 5/,
    );
  });
  it('names a duplicate tensor', () => {
    const t = { name: 'w', shape: [1], data: new Float32Array(1) };
    expect(() => encodeSafetensors([t, t])).toThrow(/duplicate tensor name w/);
  });
});
