import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type FolderParts, folderFiles } from '../../core/io/hfFolderParts';

/** A model folder's parts written to `dir` (made when missing). */
export async function writeHfFolder(dir: string, parts: FolderParts): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const f of folderFiles(parts)) await writeFile(join(dir, f.name), f.bytes);
}
