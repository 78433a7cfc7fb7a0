/**
 * A model on the Hugging Face Hub (or a mirror of it) as a FolderReader: each file fetched from
 * `<endpoint>/<owner>/<name>/resolve/<revision>/<file>`, the Hub's own download URL, so a local
 * mirror that serves the same paths (HF_ENDPOINT, as huggingface_hub reads it) works the same.
 * A file the repository does not have (404) is null, as in a folder; every other failure names
 * the URL.
 */
import { type FolderReader, HfFolderError } from './hfFolder';

export const HUB_ENDPOINT = 'https://huggingface.co';

/** "owner/name", as the Hub names a model repository. */
const HUB_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

export function isHubId(value: string): boolean {
  return HUB_ID.test(value) && !value.includes('..');
}

export interface HubOptions {
  endpoint?: string;
  revision?: string;
  /** The fetch to use (default the global one). */
  fetch?: (url: string) => Promise<Response>;
}

export function hubFolderReader(id: string, opts: HubOptions = {}): FolderReader {
  if (!isHubId(id)) throw new HfFolderError(`${JSON.stringify(id)} is not a Hub model id (owner/name)`);
  const endpoint = (opts.endpoint ?? HUB_ENDPOINT).replace(/\/+$/, '');
  const revision = encodeURIComponent(opts.revision ?? 'main');
  const get = opts.fetch ?? ((url: string) => fetch(url));
  return async (name) => {
    const url = `${endpoint}/${id}/resolve/${revision}/${name.split('/').map(encodeURIComponent).join('/')}`;
    let r: Response;
    try {
      r = await get(url);
    } catch (e) {
      throw new HfFolderError(`${url}: ${(e as Error).message} (is the Hub reachable from here?)`);
    }
    if (r.status === 404) return null;
    if (!r.ok) {
      const why = r.status === 401 || r.status === 403 ? ': no such model on the Hub, or a gated or private one (no token is sent)' : '';
      throw new HfFolderError(`${url}: HTTP ${r.status}${why}`);
    }
    return new Uint8Array(await r.arrayBuffer());
  };
}
