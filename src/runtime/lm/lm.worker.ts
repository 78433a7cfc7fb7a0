/** Web entry of the language-model worker (a module worker started by LmClient): an LmSession behind the rpc transport. */
import { selectBackend } from '../selectBackend';
import { type WebMessageTarget, webEndpoint } from '../transport/endpoint';
import { type RpcServer, reply, serveRpc } from '../transport/rpc';
import type { LmEvent, LmRequest } from './lmMessages';
import { LmSession } from './lmSession';

const events: { server: RpcServer<LmEvent> | null } = { server: null };
const session = new LmSession((what, done, total) => events.server?.emit({ kind: 'progress', what, done, total }));

events.server = serveRpc<LmRequest, LmEvent>(webEndpoint(self as unknown as WebMessageTarget), async (req) => {
  switch (req.kind) {
    case 'init': {
      const r = await selectBackend(req.backend, req.wasmPaths === undefined ? {} : { wasmPaths: req.wasmPaths });
      return reply({ backend: r.backend });
    }
    case 'load':
      return reply(await session.load(req.files, req.storage));
    case 'loadHub':
      return reply(await session.loadHub(req.id, req.endpoint, req.storage));
    case 'rollout':
      return reply(await session.rollout(req.config, req.seed, req.n, req.temperature, req.limits));
    case 'trainStep':
      return reply(await session.trainStep(req.config, req.lora, req.limits));
    case 'frontier':
      return reply(await session.frontier(req.config, req.methods, req.rootLimits, req.n, req.limits));
    case 'stepperStart':
      return reply(await session.stepperStart(req.config, req.seed, req.temperature, req.limits));
    case 'stepperAdvance':
      return reply(await session.stepperAdvance(req.until));
    case 'exportAdapter': {
      const out = await session.exportAdapter();
      return reply(out, Object.values(out.files));
    }
    case 'resetAdapters':
      await session.resetAdapters();
      return reply(null);
  }
});
