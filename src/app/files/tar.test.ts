import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

  it('round-trips through untar', () => {
    const back = untar(tarArchive('ckpt', files, 0));
    expect(back.map((f) => f.name)).toEqual(['ckpt/config.json', 'ckpt/model.safetensors', 'ckpt/empty.txt']);
    back.forEach((f, i) => expect(Array.from(f.bytes)).toEqual(Array.from(files[i].bytes)));
  });

  it('is read by the system tar', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tar-test-'));
    try {
      writeFileSync(join(dir, 'a.tar'), tarArchive('ckpt', files));
      execFileSync('tar', ['-xf', 'a.tar'], { cwd: dir });
      expect(Array.from(readFileSync(join(dir, 'ckpt/model.safetensors')))).toEqual(Array.from(files[1].bytes));
      expect(readFileSync(join(dir, 'ckpt/config.json'), 'utf8')).toBe('{"n_layer": 2}');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a name that does not fit the header', () => {
    expect(() => tarArchive('x'.repeat(90), [{ name: 'model.safetensors', bytes: new Uint8Array(1) }])).toThrow(/longer than 100 bytes/);
  });
});
