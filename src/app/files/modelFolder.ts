/**
 * A Hugging Face model folder picked in the page: from a directory input (`webkitdirectory`, each
 * File with its webkitRelativePath) or a dropped folder (DataTransferItem.webkitGetAsEntry). Only
 * the files a model load reads are kept, from the folder's top level.
 */
import { isModelFolderFile } from '../../core/io/hfFolder';

/** Whether a file of the folder's top level is one the load reads. */
const neededFile = isModelFolderFile;

/** The folder's name and its needed top-level files, from a directory input's files. */
export function filesOfDirectoryInput(files: readonly File[]): { folder: string; files: File[] } {
  const picked: File[] = [];
  let folder = '';
  for (const f of files) {
    const parts = (f.webkitRelativePath || f.name).split('/');
    // A directory input gives "folder/name"; deeper files are not the model's.
    if (parts.length > 2) continue;
    folder ||= parts.length === 2 ? parts[0] : '';
    if (neededFile(parts.at(-1) as string)) picked.push(f);
  }
  return { folder, files: picked };
}

interface EntryLike {
  isFile: boolean;
  isDirectory: boolean;
  name: string;
  file?: (ok: (f: File) => void, fail: (e: unknown) => void) => void;
  createReader?: () => { readEntries: (ok: (e: EntryLike[]) => void, fail: (e: unknown) => void) => void };
}

/** The folder dropped (its needed top-level files), or null when the drop holds no folder. */
export async function filesOfDrop(items: DataTransferItemList): Promise<{ folder: string; files: File[] } | null> {
  const entries: EntryLike[] = [];
  for (const item of Array.from(items)) {
    const entry = (item as unknown as { webkitGetAsEntry?: () => EntryLike | null }).webkitGetAsEntry?.() ?? null;
    if (entry !== null) entries.push(entry);
  }
  const dir = entries.find((e) => e.isDirectory);
  if (!dir?.createReader) return null;
  const reader = dir.createReader();
  const all: EntryLike[] = [];
  // readEntries returns the folder in batches until an empty one.
  for (;;) {
    const batch = await new Promise<EntryLike[]>((ok, fail) => reader.readEntries(ok, fail));
    if (batch.length === 0) break;
    all.push(...batch);
  }
  const files = await Promise.all(all.filter((e) => e.isFile && neededFile(e.name) && e.file).map((e) => new Promise<File>((ok, fail) => e.file!(ok, fail))));
  return { folder: dir.name, files };
}
