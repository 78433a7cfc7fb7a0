/**
 * A checkpoint on disk: one directory holding the files of src/core/io/checkpoint.ts.
 *
 * Writes go to temporary names first and are renamed into place, so a crash mid-write never
 * leaves a half-written file under a real name (each rename is atomic on one filesystem).
 */
import { mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CHECKPOINT_FILES, decodeCheckpoint, encodeCheckpoint, type Checkpoint } from '../core/io';

export async function writeCheckpointDir(dir: string, ckpt: Checkpoint): Promise<void> {
  const files = encodeCheckpoint(ckpt); // validates before anything touches the disk
  await mkdir(dir, { recursive: true });
  const tag = `.tmp-${process.pid}-${Date.now().toString(36)}`;
  const written: string[] = [];
  try {
    for (const [name, bytes] of files) {
      const tmp = join(dir, name + tag);
      written.push(tmp);
      await writeFile(tmp, bytes);
    }
    // The weights go last so a reader that sees new weights also sees their config.
    const order = [...files.keys()].sort((a, b) => Number(a === CHECKPOINT_FILES.weights) - Number(b === CHECKPOINT_FILES.weights));
    for (const name of order) await rename(join(dir, name + tag), join(dir, name));
  } catch (e) {
    await Promise.all(written.map((p) => unlink(p).catch(() => undefined)));
    throw new Error(`cannot write checkpoint to ${dir}: ${(e as Error).message}`);
  }
}

/**
 * The directory whose files are the checkpoint: a run directory (src/cli/runDir.ts) gives its
 * committed save; a run written before that layout must have weights and state of one step.
 */
async function checkpointFilesDir(dir: string): Promise<string> {
  let latest: string | null = null;
  try {
    latest = (await readFile(join(dir, 'LATEST'), 'utf8')).trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot read ${join(dir, 'LATEST')}: ${(e as Error).message}`);
  }
  if (latest !== null) {
    if (!/^save-\d+$/.test(latest)) throw new Error(`${join(dir, 'LATEST')} names ${JSON.stringify(latest)}, which is not a save of this run directory`);
    return join(dir, latest);
  }
  let stateText: string | null = null;
  try {
    stateText = await readFile(join(dir, 'state.json'), 'utf8');
  } catch {
    return dir;
  }
  const step = (() => {
    try {
      return (JSON.parse(stateText) as { step?: unknown } | null)?.step;
    } catch {
      return undefined;
    }
  })();
  try {
    const meta = JSON.parse(await readFile(join(dir, CHECKPOINT_FILES.selfcest), 'utf8')) as { step?: unknown } | null;
    if (meta?.step !== step) {
      throw new Error(
        `${dir}: ${CHECKPOINT_FILES.selfcest} says step ${JSON.stringify(meta?.step)} but state.json says ${JSON.stringify(step)}: the weights and the run state are from different saves (an interrupted save); restore model.safetensors, selfcest.json, optimizer.safetensors and state.json from one save, or start over with a new --out`,
      );
    }
  } catch (e) {
    if ((e as Error).message.startsWith(dir)) throw e;
  }
  return dir;
}

export async function readCheckpointDir(path: string): Promise<Checkpoint> {
  let isDir: boolean;
  let dir = path;
  try {
    isDir = (await stat(dir)).isDirectory();
  } catch {
    throw new Error(`checkpoint directory ${dir} does not exist`);
  }
  if (!isDir) throw new Error(`checkpoint path ${dir} is not a directory`);
  dir = await checkpointFilesDir(dir);

  const files = new Map<string, Uint8Array>();
  for (const name of Object.values(CHECKPOINT_FILES)) {
    try {
      files.set(name, new Uint8Array(await readFile(join(dir, name))));
    } catch (e) {
      // Absent files are reported by decodeCheckpoint, which knows which ones are required.
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new Error(`cannot read ${join(dir, name)}: ${(e as Error).message}`);
      }
    }
  }
  try {
    return decodeCheckpoint(files);
  } catch (e) {
    throw new Error(`${dir}: ${(e as Error).message}`);
  }
}
