import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tarArchive, untar } from './tar';

const files = [
  { name: 'config.json', bytes: new TextEncoder().encode('{"n_layer": 2}') },
  { name: 'model.safetensors', bytes: Uint8Array.from({ length: 1300 }, (_, i) => i % 251) },
  { name: 'empty.txt', bytes: new Uint8Array(0) },
];

describe('tarArchive', () => {
  it('pads every member to 512-byte blocks and ends with two zero blocks', () => {
    const tar = tarArchive('ckpt', files, 0);
    // 3 headers + ceil(14/512) + ceil(1300/512) + 0 data blocks + 2 closing blocks.
    expect(tar.length).toBe(512 * (3 + 1 + 3 + 0 + 2));
    expect(tar.subarray(tar.length - 1024).every((b) => b === 0)).toBe(true);
  });

  it('round-trips through untar: the same names and bytes, a member over 512 bytes and a 100-byte name', () => {
    const long = { name: 'n'.repeat(100 - 'ckpt/'.length), bytes: Uint8Array.from({ length: 513 }, (_, i) => (i * 7) % 256) };
    const back = untar(tarArchive('ckpt', [...files, long], 0));
    expect(back.map((f) => f.name)).toEqual(['ckpt/config.json', 'ckpt/model.safetensors', 'ckpt/empty.txt', `ckpt/${long.name}`]);
    expect(back[3].name).toHaveLength(100);
    back.forEach((f, i) => expect(Array.from(f.bytes)).toEqual(Array.from([...files, long][i].bytes)));
  });

  it('is read by the system tar', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tar-test-'));
    const long = 'n'.repeat(100 - 'ckpt/'.length);
    try {
      writeFileSync(join(dir, 'a.tar'), tarArchive('ckpt', [...files, { name: long, bytes: files[0].bytes }]));
      execFileSync('tar', ['-xf', 'a.tar'], { cwd: dir });
      expect(Array.from(readFileSync(join(dir, 'ckpt/model.safetensors')))).toEqual(Array.from(files[1].bytes));
      expect(readFileSync(join(dir, 'ckpt/config.json'), 'utf8')).toBe('{"n_layer": 2}');
      expect(readFileSync(join(dir, 'ckpt', long), 'utf8')).toBe('{"n_layer": 2}');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a name that does not fit the header', () => {
    expect(() => tarArchive('x'.repeat(90), [{ name: 'model.safetensors', bytes: new Uint8Array(1) }])).toThrow(/longer than 100 bytes/);
  });
});

/** Rewrites the header checksum at `at`, so that a test can corrupt another field alone. */
function reseal(tar: Uint8Array, at: number): void {
  tar.fill(0x20, at + 148, at + 156);
  const sum = tar.subarray(at, at + 512).reduce((a, b) => a + b, 0);
  tar.set(new TextEncoder().encode(`${sum.toString(8).padStart(6, '0')}\0 `), at + 148);
}

describe('untar', () => {
  const tar = () => tarArchive('ckpt', files, 0);

  it('reads what the system tar writes: directory entries skipped, long names (GNU and pax), ustar prefixes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'untar-test-'));
    const deep = `run/${'d'.repeat(60)}/${'f'.repeat(70)}.json`; // over 100 bytes: a long-name record or a prefix
    try {
      mkdirSync(join(dir, 'run', 'd'.repeat(60)), { recursive: true });
      writeFileSync(join(dir, 'run/model.safetensors'), files[1].bytes);
      writeFileSync(join(dir, deep), '{"deep": true}');
      for (const format of ['gnu', 'pax', 'ustar']) {
        execFileSync('tar', [`--format=${format}`, '-cf', `${format}.tar`, 'run'], { cwd: dir });
        const back = untar(readFileSync(join(dir, `${format}.tar`)));
        const byName = new Map(back.map((f) => [f.name, f.bytes]));
        expect([...byName.keys()].sort(), format).toEqual([deep, 'run/model.safetensors']);
        expect(Array.from(byName.get('run/model.safetensors') ?? []), format).toEqual(Array.from(files[1].bytes));
        expect(new TextDecoder().decode(byName.get(deep)), format).toBe('{"deep": true}');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names a bad header checksum, and a file that is not a tar at all', () => {
    const bad = tar();
    bad[512 + 512 + 3] ^= 0x01; // the second header (after config.json's one data block), inside its name
    expect(() => untar(bad)).toThrow(/^tar: bad header checksum for entry 2 at byte 1024: stored \d+, computed \d+ \(the archive is corrupt\)$/);
    const json = new TextEncoder().encode(JSON.stringify({ text: 'x'.repeat(600) }));
    expect(() => untar(json)).toThrow(/bad header checksum for entry 1 at byte 0: .*\(this is not a tar archive\)/);
  });

  it('names a truncated archive: data cut short (size beyond end), a cut header, no end-of-archive block', () => {
    const whole = tar();
    // model.safetensors: header at 1024, 1300 bytes from 1536.
    expect(() => untar(whole.subarray(0, 1536 + 1000))).toThrow(
      'tar: truncated: ckpt/model.safetensors (entry 2 at byte 1024) declares 1300 bytes, but the archive has only 1000 after its header (size beyond end)',
    );
    expect(() => untar(whole.subarray(0, 1024 + 100))).toThrow('tar: truncated: the header of entry 2 at byte 1024 has 100 of its 512 bytes');
    expect(() => untar(whole.subarray(0, 1024))).toThrow('tar: truncated: the archive ends after 1 file without its end-of-archive block');
  });

  it('names a bad size field and a member that is not a regular file', () => {
    const badSize = tar();
    badSize.set(new TextEncoder().encode('12x4'), 124);
    reseal(badSize, 0);
    expect(() => untar(badSize)).toThrow('tar: ckpt/config.json (entry 1 at byte 0): bad size field "12x4');

    const dir = mkdtempSync(join(tmpdir(), 'untar-link-'));
    try {
      mkdirSync(join(dir, 'ckpt'));
      writeFileSync(join(dir, 'ckpt/real.safetensors'), 'x');
      symlinkSync('real.safetensors', join(dir, 'ckpt/model.safetensors'));
      execFileSync('tar', ['--format=ustar', '-cf', 'a.tar', 'ckpt/model.safetensors'], { cwd: dir });
      expect(() => untar(readFileSync(join(dir, 'a.tar')))).toThrow(
        'tar: ckpt/model.safetensors (entry 1 at byte 0) is a symbolic link; only regular files can be read',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
