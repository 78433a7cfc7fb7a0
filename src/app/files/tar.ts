/**
 * A minimal uncompressed tar (ustar) writer: lets the page hand over a whole checkpoint folder
 * as one download (browsers ask before a page saves several files at once).
 */

const BLOCK = 512;

function writeString(buf: Uint8Array, offset: number, length: number, text: string): void {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length > length) throw new Error(`tar: ${JSON.stringify(text)} is longer than ${length} bytes`);
  buf.set(bytes, offset);
}

function writeOctal(buf: Uint8Array, offset: number, length: number, value: number): void {
  writeString(buf, offset, length, value.toString(8).padStart(length - 1, '0') + '\0');
}

function header(name: string, size: number, mtimeSec: number): Uint8Array {
  const h = new Uint8Array(BLOCK);
  writeString(h, 0, 100, name);
  writeOctal(h, 100, 8, 0o644);
  writeOctal(h, 108, 8, 0);
  writeOctal(h, 116, 8, 0);
  writeOctal(h, 124, 12, size);
  writeOctal(h, 136, 12, mtimeSec);
  h.fill(0x20, 148, 156); // checksum field counts as spaces while summing
  writeString(h, 156, 1, '0');
  writeString(h, 257, 6, 'ustar\0');
  writeString(h, 263, 2, '00');
  const sum = h.reduce((a, b) => a + b, 0);
  writeString(h, 148, 8, sum.toString(8).padStart(6, '0') + '\0 ');
  return h;
}

/** Files under `folder/` in one tar archive. */
export function tarArchive(folder: string, files: readonly { name: string; bytes: Uint8Array }[], mtimeSec = Math.floor(Date.now() / 1000)): Uint8Array<ArrayBuffer> {
  const padded = (n: number) => Math.ceil(n / BLOCK) * BLOCK;
  const total = files.reduce((a, f) => a + BLOCK + padded(f.bytes.length), 2 * BLOCK);
  const out = new Uint8Array(total);
  let at = 0;
  for (const f of files) {
    out.set(header(`${folder}/${f.name}`, f.bytes.length, mtimeSec), at);
    out.set(f.bytes, at + BLOCK);
    at += BLOCK + padded(f.bytes.length);
  }
  return out; // the two closing zero blocks are already zero
}

/** Reads a tar written by tarArchive (for tests). */
export function untar(data: Uint8Array): { name: string; bytes: Uint8Array }[] {
  const files: { name: string; bytes: Uint8Array }[] = [];
  const text = (from: number, len: number) => new TextDecoder().decode(data.subarray(from, from + len)).replace(/\0.*$/s, '');
  for (let at = 0; at + BLOCK <= data.length; ) {
    const name = text(at, 100);
    if (!name) break;
    const size = parseInt(text(at + 124, 12), 8);
    files.push({ name, bytes: data.slice(at + BLOCK, at + BLOCK + size) });
    at += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
  }
  return files;
}
