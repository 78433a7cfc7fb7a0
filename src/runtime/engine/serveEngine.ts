/** Puts an Engine behind an Endpoint: requests in, replies and events out (messages.ts). */
import type { Endpoint } from '../transport/endpoint';
import { Engine } from './engine';
import type { EngineHost } from './engineHost';
import type { EngineEvent, EngineRequest } from './messages';
import { type RpcServer, serveRpc } from '../transport/rpc';

export function serveEngine(endpoint: Endpoint, host: EngineHost): { engine: Engine; server: RpcServer<EngineEvent> } {
  const events: { server: RpcServer<EngineEvent> | null } = { server: null };
  const engine = new Engine(host, (e) => events.server?.emit(e));
  const server = serveRpc<EngineRequest, EngineEvent>(endpoint, (req) => engine.handle(req));
  events.server = server;
  return { engine, server };
}
