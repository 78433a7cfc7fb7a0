/** Entry of a rollout worker thread in Node (see ../rolloutWorker.ts). */
import { parentPort } from 'node:worker_threads';
import { serveRolloutWorker } from '../rollout/rolloutWorker';
import { nodeEndpoint } from './nodeEndpoint';
import { selectNodeBackend } from './nodeBackend';

if (!parentPort) throw new Error('rolloutWorkerMain must run in a worker thread');
serveRolloutWorker(nodeEndpoint(parentPort), { select: selectNodeBackend });
