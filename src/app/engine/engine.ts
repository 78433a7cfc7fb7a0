/**
 * The page's link to the engine (EngineLink; the engine itself is src/runtime/engine/engine.ts): the typed request/event contract of src/runtime/engine/messages.ts.
 * The store's actions are the only callers of `request`; events flow into the store.
 */
import type { EngineEvent, EngineReplies, EngineRequest, EngineRequestKind } from '../../runtime/engine/messages';

export type RequestOf<K extends EngineRequestKind> = Extract<EngineRequest, { kind: K }>;

export interface EngineLink {
  request<K extends EngineRequestKind>(req: RequestOf<K>): Promise<EngineReplies[K]>;
  on(listener: (event: EngineEvent) => void): () => void;
  terminate(): void;
}
