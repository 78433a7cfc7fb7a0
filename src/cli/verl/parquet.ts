/**
 * Rows of src/core/verl/dataset.ts as a parquet file (hyparquet-writer), readable by pyarrow,
 * pandas, `datasets` and arrow-rs.
 *
 * The schema is given explicitly from the rows' VerlField description: strings are UTF8 byte
 * arrays, lists the three-level LIST layout (`<name>` LIST → repeated `list` → `element`) that
 * pyarrow writes and every reader maps to Arrow's List, structs plain groups. Every field is
 * OPTIONAL, as pyarrow writes them, though no value is null. Each value is checked against its
 * type before anything is encoded (a wrong one is named by its path), int64 turned into BigInt.
 *
 * Files are written under a temporary name and renamed into place (see checkpointDir.ts).
 */
import { rename, unlink, writeFile } from 'node:fs/promises';
import { type KeyValue, type SchemaElement, parquetWriteBuffer } from 'hyparquet-writer';
import type { VerlField, VerlType, VerlValue } from '../../core/verl/dataset';

/** The parquet schema elements of one field and its children, depth first. */
function fieldElements(f: VerlField): SchemaElement[] {
  const t = f.type;
  if (t === 'string') return [{ name: f.name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' }];
  if (t === 'int64') return [{ name: f.name, type: 'INT64', repetition_type: 'OPTIONAL' }];
  if (t === 'double') return [{ name: f.name, type: 'DOUBLE', repetition_type: 'OPTIONAL' }];
  if ('list' in t) {
    return [
      { name: f.name, repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      ...fieldElements({ name: 'element', type: t.list }),
    ];
  }
  return [{ name: f.name, repetition_type: 'OPTIONAL', num_children: t.struct.length }, ...t.struct.flatMap(fieldElements)];
}

/** The flattened parquet schema of `columns`, root first. */
export function parquetSchema(columns: readonly VerlField[]): SchemaElement[] {
  return [{ name: 'root', num_children: columns.length }, ...columns.flatMap(fieldElements)];
}

/** What hyparquet-writer takes for a value: the value with int64 as BigInt. Throws naming `path`. */
type WriterValue = string | number | bigint | WriterValue[] | { [field: string]: WriterValue };

function writerValue(type: VerlType, v: VerlValue | undefined, path: string): WriterValue {
  const fail = (want: string): never => {
    throw new Error(`parquet: ${path} must be ${want} (got ${v === undefined ? 'nothing' : JSON.stringify(v)})`);
  };
  if (type === 'string') return typeof v === 'string' ? v : fail('a string');
  if (type === 'int64') return typeof v === 'number' && Number.isSafeInteger(v) ? BigInt(v) : fail('an integer (int64)');
  if (type === 'double') return typeof v === 'number' ? v : fail('a number (double)');
  if ('list' in type) {
    if (!Array.isArray(v)) return fail('a list');
    return (v as readonly VerlValue[]).map((x, i) => writerValue(type.list, x, `${path}[${i}]`));
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail('a struct');
  const obj = v as { readonly [field: string]: VerlValue };
  const known = new Set(type.struct.map((f) => f.name));
  const unknown = Object.keys(obj).filter((k) => !known.has(k));
  if (unknown.length > 0) throw new Error(`parquet: ${path} has field ${unknown.join(', ')}, which its schema does not (${[...known].join(', ')})`);
  return Object.fromEntries(type.struct.map((f) => [f.name, writerValue(f.type, Object.hasOwn(obj, f.name) ? obj[f.name] : undefined, `${path}.${f.name}`)]));
}

/**
 * The bytes of a parquet file holding `rows` under `columns`. Refuses zero rows: a file without
 * a row group is not read back by every reader (arrow-rs fails on its nested lists), and a
 * dataset with no rows is a mistake upstream.
 */
export function encodeParquet(columns: readonly VerlField[], rows: readonly Readonly<Record<string, VerlValue>>[], kvMetadata: KeyValue[] = []): Uint8Array {
  if (rows.length === 0) throw new Error('parquet: no rows to write (a dataset file needs at least one)');
  const names = new Set(columns.map((c) => c.name));
  rows.forEach((r, i) => {
    const unknown = Object.keys(r).filter((k) => !names.has(k));
    if (unknown.length > 0) throw new Error(`parquet: row ${i} has column ${unknown.join(', ')}, which the schema does not`);
  });
  const columnData = columns.map((c) => ({
    name: c.name,
    data: rows.map((r, i) => writerValue(c.type, Object.hasOwn(r, c.name) ? r[c.name] : undefined, `row ${i}: ${c.name}`)),
  }));
  return new Uint8Array(parquetWriteBuffer({ schema: parquetSchema(columns), columnData, kvMetadata, createdBy: 'selfcest-playground' }));
}

/**
 * Writes every file under a temporary name, then renames them all into place, so that an
 * interrupted write leaves the previous files (or none) under the real names, never a torn one.
 */
export async function writeFilesAtomically(files: readonly { path: string; bytes: Uint8Array }[]): Promise<void> {
  const tag = `.tmp-${process.pid}-${Date.now().toString(36)}`;
  const written: string[] = [];
  try {
    for (const f of files) {
      written.push(f.path + tag);
      await writeFile(f.path + tag, f.bytes);
    }
    for (const f of files) await rename(f.path + tag, f.path);
  } catch (e) {
    await Promise.all(written.map((p) => unlink(p).catch(() => undefined)));
    throw new Error(`cannot write ${files.map((f) => f.path).join(', ')}: ${(e as Error).message}`);
  }
}
