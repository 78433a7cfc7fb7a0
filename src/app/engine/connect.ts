/** The real engine: a trainer worker (and its rollout workers) behind src/runtime's client. */
import { EngineClient } from '../../runtime/engine/engineClient';
import type { EngineLink } from './engine';

export function createEngine(): EngineLink {
  return new EngineClient();
}
