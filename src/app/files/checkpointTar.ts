/**
 * The checkpoint as the page moves it: the export writes the engine's files as one .tar (a folder
 * of them, with the page's provenance.json); the import takes that .tar or the loose files, keeps
 * the files decodeCheckpoint reads and provenance.json, sets aside the run history a CLI run
 * folder (or the page's own exports) holds beside them (RUN_FILES: read by runFolder.ts), and
 * names every other one as ignored. Validation of the kept checkpoint files stays with the engine.
 */
import { CHECKPOINT_FILES, OPTIONAL_CHECKPOINT_FILES, REQUIRED_CHECKPOINT_FILES } from '../../core/io/checkpoint';
import { PROVENANCE_FILE, type Provenance, decodeProvenance, parseProvenance } from '../../core/io/provenance';
import { tarArchive, untar } from './tar';
import { isModelFolderFile } from '../../core/io/hfFolder';

/**
 * A run's history beside its checkpoint: the CLI train's (and the page's Metrics and Traces
 * exports') metrics.jsonl and traces.jsonl, and the run.json or state.json that says its group size.
 */
export const RUN_FILES = ['metrics.jsonl', 'traces.jsonl', 'run.json', 'state.json'] as const;
export type RunFileName = (typeof RUN_FILES)[number];

/** What the import's file input says about the files it takes. */
export const IMPORT_HELP =
  `The exported .tar, a CLI run folder's files (or its .tar), or the loose files. Required: ${REQUIRED_CHECKPOINT_FILES.join(', ')}. ` +
  `Optional: ${[...OPTIONAL_CHECKPOINT_FILES, PROVENANCE_FILE].join(', ')} (the history of the weights; the model resumes at its policy version); ` +
  `metrics.jsonl and traces.jsonl (the run's curves and rollouts, with run.json or state.json for its group size). ` +
  `Or a Hugging Face model folder's files (config.json, model.safetensors, tokenizer.json, tokenizer_config.json with a chat template), or its export's .tar. Other files are ignored.`;

/** The download of the engine's exported files: `selfcest-<preset>-v<version>.tar`, one folder inside. */
export function weightsTar(
  preset: string,
  policyVersion: number,
  files: Readonly<Record<string, Uint8Array>>,
): { filename: string; bytes: Uint8Array<ArrayBuffer> } {
  const folder = `selfcest-${preset}-v${policyVersion}`;
  return {
    filename: `${folder}.tar`,
    bytes: tarArchive(
      folder,
      Object.entries(files).map(([name, bytes]) => ({ name, bytes })),
    ),
  };
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
  /** provenance.json's bytes, when one was picked (read by provenanceOf). */
  provenance: Uint8Array | null;
  /** The run files picked beside the checkpoint, with where each came from. */
  run: Map<RunFileName, { bytes: Uint8Array; origin: string }>;
}

const CHECKPOINT_NAMES = new Set([...REQUIRED_CHECKPOINT_FILES, ...OPTIONAL_CHECKPOINT_FILES]);
const RUN_NAMES: ReadonlySet<string> = new Set(RUN_FILES);
const isGzip = (b: Uint8Array) => b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b;

/**
 * The checkpoint files among the picked ones; a `.tar` is unpacked and its members are matched by
 * their base name, whatever folder they are in. Throws, naming the file, on a damaged or
 * compressed archive and on a checkpoint file given twice (two folders in one tar, or a loose
 * file beside the tar that holds it): which one was meant cannot be guessed. A run file given
 * twice with the same bytes is taken once: a tar of a whole run directory holds the committed
 * save's metrics.jsonl and traces.jsonl and their copies at the top.
 */
export function checkpointFilesOf(picked: readonly PickedFile[]): CheckpointPick {
  const pick: CheckpointPick = { files: new Map(), origins: new Map(), ignored: [], provenance: null, run: new Map() };
  const take = (name: string, bytes: Uint8Array<ArrayBuffer>, origin: string) => {
    if (RUN_NAMES.has(name)) {
      const file = name as RunFileName;
      const earlier = pick.run.get(file);
      if (earlier === undefined) pick.run.set(file, { bytes, origin });
      else if (!sameBytes(earlier.bytes, bytes))
        throw new Error(`${name} is given twice with different contents (${earlier.origin} and ${origin}); pick the files of one run`);
      return;
    }
    if (name === PROVENANCE_FILE) {
      if (pick.provenance !== null)
        throw new Error(`${PROVENANCE_FILE} is given twice (${pick.origins.get(PROVENANCE_FILE)} and ${origin}); pick the files of one checkpoint`);
      pick.provenance = bytes;
      pick.origins.set(PROVENANCE_FILE, origin);
      return;
    }
    // The toy's checkpoint files, or a Hugging Face model folder's (the engine tells them apart by selfcest.json).
    if (!CHECKPOINT_NAMES.has(name) && !isModelFolderFile(name)) {
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
    // A tar by name, or by its ustar magic (a renamed download, a file saved without its extension).
    if (!lower.endsWith('.tar') && !hasUstarMagic(f.bytes)) {
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

/**
 * The provenance of the picked weights: provenance.json, else the copy inside selfcest.json's
 * `training` (an export's loose files), else none. One that cannot be read, or that belongs to
 * other weights (its policy version is not selfcest.json's step), is left out, and the note says why
 * (the caller says where the model starts instead: v0, or a run's last step).
 */
export function provenanceOf(pick: CheckpointPick): { provenance: Provenance | null; note: string | null } {
  let meta: Record<string, unknown> = {};
  try {
    const bytes = pick.files.get(CHECKPOINT_FILES.selfcest);
    if (bytes) meta = JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
  } catch {
    // The engine reports a bad selfcest.json; here it only means no embedded provenance.
  }
  let provenance: Provenance;
  try {
    if (pick.provenance !== null) provenance = decodeProvenance(pick.provenance);
    else {
      const embedded = (meta.training as Record<string, unknown> | undefined)?.provenance;
      if (embedded === undefined) return { provenance: null, note: null };
      provenance = parseProvenance(embedded);
    }
  } catch (e) {
    return { provenance: null, note: `provenance not used (${(e as Error).message})` };
  }
  if (typeof meta.step === 'number' && meta.step !== provenance.policyVersion) {
    return { provenance: null, note: `provenance not used: it is of policy v${provenance.policyVersion} but selfcest.json says step ${meta.step}` };
  }
  return { provenance, note: null };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** The ustar magic ("ustar" at byte 257 of the first header), which our writer and GNU/bsd tar write. */
function hasUstarMagic(bytes: Uint8Array): boolean {
  if (bytes.length < 512) return false;
  const magic = 'ustar';
  for (let i = 0; i < magic.length; i++) if (bytes[257 + i] !== magic.charCodeAt(i)) return false;
  return true;
}
