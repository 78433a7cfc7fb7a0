/** Web entry of the engine (a module worker started by EngineClient). */
import { type WebMessageTarget, webEndpoint } from '../transport/endpoint';
import { serveEngine } from './serveEngine';
import { webHost } from './webHost';

serveEngine(webEndpoint(self as unknown as WebMessageTarget), webHost);
