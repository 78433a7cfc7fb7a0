/**
 * The checkpoint as the page moves it: the export writes the engine's files as one .tar (a folder
 * of them); the import takes that .tar or the loose files, keeps the files decodeCheckpoint reads
 * and names every other one as ignored (a CLI run folder also holds metrics.jsonl, traces.jsonl,
 * state.json). Validation of the kept files stays with the engine.
 */
import { OPTIONAL_CHECKPOINT_FILES, REQUIRED_CHECKPOINT_FILES } from '../../core/io/checkpoint';
import { tarArchive, untar } from './tar';

/** What the import's file input says about the files it takes. */
export const IMPORT_HELP =
  `The exported .tar, or the loose files. Required: ${REQUIRED_CHECKPOINT_FILES.join(', ')}. ` +
  `Optional: ${OPTIONAL_CHECKPOINT_FILES.join(', ')}. Other files are ignored.`;

/** The download of the engine's exported files: `selfcest-<preset>-v<version>.tar`, one folder inside. */
export function weightsTar(preset: string, policyVersion: number, files: Readonly<Record<string, Uint8Array>>): { filename: string; bytes: Uint8Array<ArrayBuffer> } {
  const folder = `selfcest-${preset}-v${policyVersion}`;
  return { filename: `${folder}.tar`, bytes: tarArchive(folder, Object.entries(files).map(([name, bytes]) => ({ name, bytes }))) };
}

export interface PickedFile {
  name: string;
  bytes: Uint8Array<ArrayBuffer>;
}

export interface CheckpointPick {
  /** Checkpoint file name → bytes: only the files decodeCheckpoint reads. */
  files: Map<string, Uint8Array<ArrayBuffer>>;
  /** Where each kept file came from: its name, or `archive.tar: folder/name`. */
  origins: Map<string, string>;
  /** The picked files (or tar members) that are not part of a checkpoint. */
  ignored: string[];
}

const CHECKPOINT_NAMES = new Set([...REQUIRED_CHECKPOINT_FILES, ...OPTIONAL_CHECKPOINT_FILES]);
const isGzip = (b: Uint8Array) => b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b;

/**
 * The checkpoint files among the picked ones; a `.tar` is unpacked and its members are matched by
 * their base name, whatever folder they are in. Throws, naming the file, on a damaged or
 * compressed archive and on a checkpoint file given twice (two folders in one tar, or a loose
 * file beside the tar that holds it): which one was meant cannot be guessed.
 */
export function checkpointFilesOf(picked: readonly PickedFile[]): CheckpointPick {
  const pick: CheckpointPick = { files: new Map(), origins: new Map(), ignored: [] };
  const take = (name: string, bytes: Uint8Array<ArrayBuffer>, origin: string) => {
    if (!CHECKPOINT_NAMES.has(name)) {
      pick.ignored.push(origin);
      return;
    }
    const earlier = pick.origins.get(name);
    if (earlier !== undefined) throw new Error(`${name} is given twice (${earlier} and ${origin}); pick the files of one checkpoint`);
    pick.files.set(name, bytes);
    pick.origins.set(name, origin);
  };
  for (const f of picked) {
    const lower = f.name.toLowerCase();
    if (lower.endsWith('.tar.gz') || lower.endsWith('.tgz') || (lower.endsWith('.tar') && isGzip(f.bytes))) {
      throw new Error(`${f.name} is a compressed tar; the page reads a plain .tar as its export writes it (unpack it first, or pick the files)`);
    }
    if (!lower.endsWith('.tar')) {
      take(f.name, f.bytes, f.name);
      continue;
    }
    let members;
    try {
      members = untar(f.bytes);
    } catch (e) {
      throw new Error(`${f.name}: ${(e as Error).message}`);
    }
    for (const m of members) take(m.name.split('/').pop() ?? m.name, m.bytes, `${f.name}: ${m.name}`);
  }
  return pick;
}
