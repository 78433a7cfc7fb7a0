/** Entry of a gradient worker thread in Node (see ../gradWorker.ts). */
import { parentPort } from 'node:worker_threads';
import { serveGradWorker } from '../gradient/gradWorker';
import { selectNodeBackend } from './nodeBackend';
import { nodeEndpoint } from './nodeEndpoint';

if (!parentPort) throw new Error('gradWorkerMain must run in a worker thread');
serveGradWorker(nodeEndpoint(parentPort), (pref) => selectNodeBackend(pref));
