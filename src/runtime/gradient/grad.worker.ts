/** Web entry of a gradient worker (a module worker started by the engine worker). */
import { type WebMessageTarget, webEndpoint } from '../transport/endpoint';
import { serveGradWorker } from './gradWorker';
import { selectBackend } from '../selectBackend';

serveGradWorker(webEndpoint(self as unknown as WebMessageTarget), (pref, wasmPaths) => selectBackend(pref, wasmPaths === undefined ? {} : { wasmPaths }));
