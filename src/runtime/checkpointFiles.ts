/** Checkpoint file sets as they reach the engine: fetched from a served folder, or chosen by the user. */
import { OPTIONAL_CHECKPOINT_FILES as OPTIONAL, REQUIRED_CHECKPOINT_FILES as REQUIRED } from '../core/io/checkpoint';
import type { CheckpointFiles } from './engine/messages';

/** `baseUrl` + name, whether or not the base ends with a slash. */
export function fileUrl(baseUrl: string, name: string): string {
  return baseUrl.endsWith('/') ? `${baseUrl}${name}` : `${baseUrl}/${name}`;
}

/** The four checkpoint files and tokenizer_config.json when present; a missing required file is an error naming it. */
export async function fetchCheckpointFiles(baseUrl: string, fetchFile: (url: string) => Promise<Uint8Array | null>): Promise<Map<string, Uint8Array>> {
  if (typeof baseUrl !== 'string' || baseUrl === '') throw new Error('loadUrl: baseUrl must be a non-empty string');
  const names = [...REQUIRED, ...OPTIONAL];
  const got = await Promise.all(
    names.map(async (name) => {
      const url = fileUrl(baseUrl, name);
      try {
        return await fetchFile(url);
      } catch (e) {
        throw new Error(`loadUrl: could not fetch ${url}: ${(e as Error).message}`);
      }
    }),
  );
  const files = new Map<string, Uint8Array>();
  names.forEach((name, i) => {
    const bytes = got[i];
    if (bytes !== null) files.set(name, bytes);
    else if (REQUIRED.includes(name)) throw new Error(`loadUrl: ${fileUrl(baseUrl, name)} was not found (a checkpoint holds ${REQUIRED.join(', ')})`);
  });
  return files;
}

/** The page's record of ArrayBuffers as the byte map decodeCheckpoint reads. */
export function filesFromRecord(files: CheckpointFiles): Map<string, Uint8Array> {
  if (typeof files !== 'object' || files === null) throw new Error('loadFiles: files must be an object of name → ArrayBuffer');
  const out = new Map<string, Uint8Array>();
  for (const [name, buf] of Object.entries(files) as [string, unknown][]) {
    if (buf instanceof ArrayBuffer) out.set(name, new Uint8Array(buf));
    else if (ArrayBuffer.isView(buf)) out.set(name, new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength));
    else throw new Error(`loadFiles: ${name} must be an ArrayBuffer`);
  }
  return out;
}

/**
 * GET a file over HTTP: null on 404, and also on an HTML page, which is what a dev server or a
 * single-page-app host answers for a missing path (no checkpoint file is HTML).
 */
export async function httpFetchFile(url: string): Promise<Uint8Array | null> {
  const res = await fetch(url);
  if (res.status === 404) return null;
  if (!res.ok) throw new Error(`HTTP ${res.status} ${res.statusText}`);
  if ((res.headers.get('content-type') ?? '').startsWith('text/html')) return null;
  return new Uint8Array(await res.arrayBuffer());
}
