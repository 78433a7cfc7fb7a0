/**
 * `window.selfcest` in the browser console: read-only looks at the engine and the store, for
 * researchers poking at a run (and for the e2e tests, which compare logits with the CLI).
 */
import { logits } from '../state/actions';
import { getState, type PlaygroundState } from '../state/store';

export interface ConsoleApi {
  logits: typeof logits;
  state: () => PlaygroundState;
}

declare global {
  interface Window {
    selfcest?: ConsoleApi;
  }
}

export function installConsoleApi(): void {
  window.selfcest = { logits, state: getState };
}
