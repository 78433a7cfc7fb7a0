/** Web entry of a rollout worker (a module worker started by the engine worker). */
import { type WebMessageTarget, webEndpoint } from '../transport/endpoint';
import { serveRolloutWorker } from './rolloutWorker';

serveRolloutWorker(webEndpoint(self as unknown as WebMessageTarget));
