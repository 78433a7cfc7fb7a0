/**
 * A minimal uncompressed tar (ustar) writer and reader: the page hands over a whole checkpoint
 * folder as one download (browsers ask before a page saves several files at once) and reads
 * that download back on import.
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
export function tarArchive(
  folder: string,
  files: readonly { name: string; bytes: Uint8Array }[],
  mtimeSec = Math.floor(Date.now() / 1000),
): Uint8Array<ArrayBuffer> {
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

// ---------------------------------------------------------------------------------------------
// Read

export interface TarFile {
  /** The member's path inside the archive, e.g. `selfcest-tiny-v3/model.safetensors`. */
  name: string;
  bytes: Uint8Array<ArrayBuffer>;
}

export class TarError extends Error {
  constructor(message: string) {
    super(`tar: ${message}`);
    this.name = 'TarError';
  }
}

const decoder = new TextDecoder();
/** A NUL-terminated (or field-filling) string field. */
const field = (h: Uint8Array, from: number, len: number) => decoder.decode(h.subarray(from, from + len)).replace(/\0.*$/s, '');

/** An octal number field (digits, padded with NULs or spaces); null when it is not one. */
function octal(h: Uint8Array, from: number, len: number): number | null {
  const text = field(h, from, len).trim();
  return /^[0-7]+$/.test(text) ? parseInt(text, 8) : null;
}

/** The header checksum: every byte, the checksum field read as spaces (some writers sum signed bytes). */
function checksums(h: Uint8Array): [number, number] {
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const b = i >= 148 && i < 156 ? 0x20 : h[i];
    unsigned += b;
    signed += b > 127 ? b - 256 : b;
  }
  return [unsigned, signed];
}

/** The `path` of a pax extended header (records of "<length> <key>=<value>\n"), if it has one. */
function paxPath(data: Uint8Array, where: string): string | undefined {
  let path: string | undefined;
  for (let at = 0; at < data.length;) {
    const space = data.indexOf(0x20, at);
    const length = space < 0 ? NaN : Number(decoder.decode(data.subarray(at, space)));
    if (!Number.isInteger(length) || length <= space - at || at + length > data.length) {
      if (data.subarray(at).every((b) => b === 0)) break; // padding after the records
      throw new TarError(`${where}: malformed pax record at byte ${at} of the extended header`);
    }
    const record = decoder.decode(data.subarray(space + 1, at + length - 1));
    const eq = record.indexOf('=');
    if (eq > 0 && record.slice(0, eq) === 'path') path = record.slice(eq + 1);
    at += length;
  }
  return path;
}

const TYPE_NAMES: Record<string, string> = { '1': 'a hard link', '2': 'a symbolic link', '3': 'a character device', '4': 'a block device', '6': 'a FIFO' };

/**
 * The regular files of an uncompressed tar: ustar as tarArchive writes it, and what GNU tar and
 * bsdtar write by default (directory entries skipped, long names from GNU `L` and pax `path`
 * records). Refuses a damaged archive with what is wrong and where, instead of returning part of it.
 */
export function untar(data: Uint8Array): TarFile[] {
  const files: TarFile[] = [];
  let longName: string | undefined; // from a GNU 'L' or pax 'x' entry, for the next member
  let at = 0;
  for (let entry = 1; ; entry++) {
    if (at === data.length) {
      throw new TarError(`truncated: the archive ends after ${files.length} file${files.length === 1 ? '' : 's'} without its end-of-archive block`);
    }
    if (at + BLOCK > data.length) {
      throw new TarError(`truncated: the header of entry ${entry} at byte ${at} has ${data.length - at} of its ${BLOCK} bytes`);
    }
    const h = data.subarray(at, at + BLOCK);
    if (h.every((b) => b === 0)) {
      if (longName !== undefined) throw new TarError(`truncated: a long-name entry at byte ${at - BLOCK} is not followed by its file`);
      return files; // end of archive (writers add a second zero block and padding; nothing after it is read)
    }
    const where = `entry ${entry} at byte ${at}`;
    const stored = octal(h, 148, 8);
    const [unsigned, signed] = checksums(h);
    if (stored === null || (stored !== unsigned && stored !== signed)) {
      const magic = field(h, 257, 6);
      const what = entry === 1 && !magic.startsWith('ustar') ? ' (this is not a tar archive)' : ' (the archive is corrupt)';
      throw new TarError(
        `bad header checksum for ${where}: stored ${stored === null ? JSON.stringify(field(h, 148, 8)) : stored.toString(8)}, computed ${unsigned.toString(8)}${what}`,
      );
    }
    const ustar = field(h, 257, 6) === 'ustar'; // POSIX ustar: the prefix field extends the name
    const prefix = ustar ? field(h, 345, 155) : '';
    const name = longName ?? (prefix ? `${prefix}/${field(h, 0, 100)}` : field(h, 0, 100));
    longName = undefined;
    if (h[124] & 0x80) throw new TarError(`${name} (${where}): its size is in base-256 form (a file over 8 GB), which this reader does not support`);
    const size = octal(h, 124, 12);
    if (size === null) throw new TarError(`${name} (${where}): bad size field ${JSON.stringify(field(h, 124, 12))}`);
    const start = at + BLOCK;
    if (start + size > data.length) {
      throw new TarError(
        `truncated: ${name} (${where}) declares ${size} bytes, but the archive has only ${data.length - start} after its header (size beyond end)`,
      );
    }
    const body = data.subarray(start, start + size);
    const type = String.fromCharCode(h[156]);
    if (type === '0' || type === '\0' || type === '7') files.push({ name, bytes: body.slice() });
    else if (type === 'L') longName = field(body, 0, body.length);
    else if (type === 'x') longName = paxPath(body, `${name} (${where})`);
    else if (type in TYPE_NAMES) throw new TarError(`${name} (${where}) is ${TYPE_NAMES[type]}; only regular files can be read`);
    // '5' directories, 'g' global pax headers and vendor extensions carry no file of their own.
    at = start + Math.ceil(size / BLOCK) * BLOCK;
  }
}
