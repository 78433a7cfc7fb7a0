import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FolderReader } from '../../core/io/hfFolder';

/** A folder on disk as a FolderReader (the CLI, tests): a missing or unreadable file is null. */
export function nodeFolderReader(dir: string): FolderReader {
  return async (name) => {
    try {
      return new Uint8Array(await readFile(join(dir, name)));
    } catch {
      return null;
    }
  };
}
