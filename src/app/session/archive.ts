/**
 * Saved sessions in a key-value store (IndexedDB in the page: idbStore.ts; any KeyValueStore in
 * tests). A save never changes what a reload would restore until it is complete:
 *
 *   files-<id>     a checkpoint's files: the weights of one save, or a model's origin (written once)
 *   session-<id>   the record (session.ts) naming its two file sets
 *   current        the pointer: which record a reload restores
 *   kept           records that could not be restored, kept for the user to inspect or delete
 *
 * A save writes its weights and record together (one transaction where the store has them),
 * then flips `current`, then deletes what no pointer names any more. A reload in the middle of a
 * save finds `current` still naming the previous complete save; the next save clears the debris.
 */
import { SessionError, type FileSet, type SavedSession, fromRecord, toRecord } from './session';

/**
 * What the archive needs of a store. `setMany` is atomic where the store can be (IndexedDB: one
 * transaction), and may take the byte arrays of the file sets it is given (the worker store moves
 * them): a caller does not use them after the call, whatever its outcome.
 */
export interface KeyValueStore {
  get(key: string): Promise<unknown>;
  setMany(entries: [string, unknown][]): Promise<void>;
  set(key: string, value: unknown): Promise<void>;
  delMany(keys: string[]): Promise<void>;
  keys(): Promise<string[]>;
}

const CURRENT = 'current';
const KEPT = 'kept';

interface Pointer {
  record: string;
  weightsKey: string;
  originKey: string;
  savedAt: string;
  step: number;
  policyVersion: number;
}

function isPointer(v: unknown): v is Pointer {
  const p = v as Partial<Pointer> | null;
  return typeof p === 'object' && p !== null && typeof p.record === 'string' && typeof p.weightsKey === 'string' && typeof p.originKey === 'string';
}

/** A session that could not be restored: the keys it is stored under, and why. */
export interface KeptSession {
  keys: string[];
  savedAt: string | null;
  message: string;
}

export type LoadResult = { kind: 'none' } | { kind: 'ok'; session: SavedSession } | { kind: 'unreadable'; savedAt: string | null; message: string };

export class SessionArchive {
  /** Origins known to be stored (their files are written once, not with every save). */
  private readonly storedOrigins = new Set<string>();
  private seq = 0;

  constructor(
    private readonly kv: KeyValueStore,
    private readonly newId: () => string = () => `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
  ) {}

  /**
   * Saves a session. `session.origin.files` may be empty when that origin is already stored (a
   * restored session's, or one this archive wrote).
   */
  async save(session: SavedSession): Promise<void> {
    const id = `${this.newId()}-${this.seq++}`;
    const pointer: Pointer = {
      record: `session-${id}`,
      weightsKey: `files-${id}`,
      originKey: `files-origin-${session.origin.id}`,
      savedAt: session.savedAt,
      step: session.counters.grpoSteps,
      policyVersion: session.counters.policyVersion,
    };
    const entries: [string, unknown][] = [];
    if (!this.storedOrigins.has(session.origin.id)) {
      if (Object.keys(session.origin.files).length === 0) throw new Error(`save: the origin ${session.origin.id} is not stored and no files were given`);
      entries.push([pointer.originKey, session.origin.files]);
    }
    entries.push([pointer.weightsKey, session.weights], [pointer.record, toRecord(session)]);
    await this.kv.setMany(entries);
    this.storedOrigins.add(session.origin.id);
    await this.kv.set(CURRENT, pointer);
    await this.collect();
  }

  /** Whether this origin's files are stored (a save may then leave them out). */
  hasOrigin(id: string): boolean {
    return this.storedOrigins.has(id);
  }

  /** The session `current` names; a damaged one is reported (and left where it is: see keepCurrent). */
  async load(): Promise<LoadResult> {
    const pointer = await this.kv.get(CURRENT);
    if (pointer === undefined) return { kind: 'none' };
    const savedAt = typeof (pointer as Partial<Pointer> | null)?.savedAt === 'string' ? (pointer as Pointer).savedAt : null;
    try {
      if (!isPointer(pointer)) throw new SessionError('the pointer to the current save is damaged');
      const [raw, weights, origin] = await Promise.all([this.kv.get(pointer.record), this.kv.get(pointer.weightsKey), this.kv.get(pointer.originKey)]);
      if (raw === undefined) throw new SessionError(`its record ${pointer.record} is missing`);
      const session = fromRecord(raw, weights, origin);
      this.storedOrigins.add(session.origin.id);
      return { kind: 'ok', session };
    } catch (e) {
      const message = e instanceof SessionError ? e.message : `saved session: could not be read (${(e as Error).message})`;
      return { kind: 'unreadable', savedAt, message };
    }
  }

  /**
   * The current session could not be restored: it stays in the store, listed under `kept` with
   * the reason, and is no longer `current`, so later saves do not delete it. A damaged pointer
   * keeps every record and file set there is (which of them it meant cannot be known).
   */
  async keepCurrent(message: string): Promise<void> {
    const pointer = await this.kv.get(CURRENT);
    if (pointer === undefined) return;
    const keys = isPointer(pointer)
      ? [pointer.record, pointer.weightsKey, pointer.originKey]
      : (await this.kv.keys()).filter((k) => k.startsWith('session-') || k.startsWith('files-'));
    const savedAt = typeof (pointer as Partial<Pointer> | null)?.savedAt === 'string' ? (pointer as Pointer).savedAt : null;
    await this.kv.set(KEPT, [...(await this.kept()), { keys, savedAt, message }]);
    await this.kv.delMany([CURRENT]);
  }

  async kept(): Promise<KeptSession[]> {
    const v = await this.kv.get(KEPT);
    return Array.isArray(v) ? (v as KeptSession[]) : [];
  }

  /** Deletes the kept sessions (the user asked to). */
  async deleteKept(): Promise<void> {
    await this.kv.delMany([KEPT]);
    await this.collect();
  }

  /** Start fresh: no current session any more (kept ones stay). */
  async clear(): Promise<void> {
    await this.kv.delMany([CURRENT]);
    await this.collect();
  }

  /** Deletes every record and file set that neither `current` nor a kept session names. */
  private async collect(): Promise<void> {
    const live = new Set<string>([CURRENT, KEPT]);
    const pointer = await this.kv.get(CURRENT);
    if (isPointer(pointer)) [pointer.record, pointer.weightsKey, pointer.originKey].forEach((k) => live.add(k));
    for (const k of await this.kept()) k.keys.forEach((key) => live.add(key));
    const dead = (await this.kv.keys()).filter((k) => !live.has(k));
    if (dead.length > 0) await this.kv.delMany(dead);
    for (const id of [...this.storedOrigins]) if (!live.has(`files-origin-${id}`)) this.storedOrigins.delete(id);
  }
}

/** A session's file sets as the engine's loadFiles takes them: ArrayBuffers of their own (they are transferred). */
export function fileBuffers(files: FileSet): Record<string, ArrayBuffer> {
  const out: Record<string, ArrayBuffer> = {};
  for (const [name, bytes] of Object.entries(files)) out[name] = bytes.slice().buffer;
  return out;
}
