import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PAGE_DEFAULTS, type RunConfig } from '../../core/runConfig';
import type { EngineReplies, EngineRequest, EngineRequestKind, ModelReport } from '../../runtime/engine/messages';
import type { EngineLink, RequestOf } from '../engine/engine';
import { applyConfig, attachEngine } from './actions';
import { INITIAL_STATE, getState, setState } from './store';

/** An engine whose shipped checkpoints are those of `shipped` (by URL tail → preset); setConfig random-inits on a preset change, as the real one. */
function fakeEngine(requests: EngineRequest[], shipped: Record<string, string>): EngineLink {
  let preset = 'small';
  return {
    async request<K extends EngineRequestKind>(req: RequestOf<K>): Promise<EngineReplies[K]> {
      const r: EngineRequest = req;
      requests.push(r);
      const report = (source: string): ModelReport => ({ preset, parameters: 1, policyVersion: 0, source });
      if (r.kind === 'setConfig') {
        preset = r.config.preset;
        return report('random init') as EngineReplies[K];
      }
      if (r.kind === 'randomInit') return report('random init') as EngineReplies[K];
      if (r.kind === 'loadUrl') {
        const name = Object.keys(shipped).find((n) => r.baseUrl.endsWith(`/${n}/`));
        if (!name) throw new Error(`no checkpoint at ${r.baseUrl}`);
        return { preset: shipped[name], parameters: 1, policyVersion: 0, source: r.baseUrl } as EngineReplies[K];
      }
      throw new Error(`unexpected request ${r.kind}`);
    },
    on: () => () => undefined,
    terminate: () => undefined,
  };
}

beforeEach(() => {
  vi.stubGlobal('history', { replaceState: () => undefined });
  vi.stubGlobal('location', { pathname: '/', search: '', hash: '' });
  vi.stubGlobal('navigator', { hardwareConcurrency: 2 });
  setState({ ...INITIAL_STATE }, true);
});
afterEach(() => vi.unstubAllGlobals());

const SHIPPED = { 'warmstart-naive': 'small', warmstart: 'small', 'warmstart-tiny': 'tiny' };

describe('a preset switch', () => {
  it('to tiny (start: auto) loads the shipped tiny warm start, not the random init setConfig left', async () => {
    const requests: EngineRequest[] = [];
    attachEngine(fakeEngine(requests, SHIPPED));
    const tiny: RunConfig = { ...PAGE_DEFAULTS, preset: 'tiny', checkpoint: 'auto' };
    await applyConfig(tiny);
    expect(requests.map((r) => r.kind)).toEqual(['setConfig', 'loadUrl']);
    expect(getState().model?.source).toMatch(/checkpoints\/warmstart-tiny\/$/);
    expect(getState().modelNote).toBeNull();
  });

  it('with a checkpoint named for the other preset says why the model is a random init', async () => {
    const requests: EngineRequest[] = [];
    attachEngine(fakeEngine(requests, SHIPPED));
    setState({ config: { ...PAGE_DEFAULTS, checkpoint: 'warmstart' } });
    await applyConfig({ ...PAGE_DEFAULTS, checkpoint: 'warmstart', preset: 'tiny' });
    expect(requests.map((r) => r.kind)).toEqual(['setConfig', 'loadUrl', 'randomInit']);
    expect(getState().modelNote).toMatch(/^random init: .*it is preset small; this link asks for tiny/);
  });

  it('no preset or checkpoint change keeps the loaded model', async () => {
    const requests: EngineRequest[] = [];
    attachEngine(fakeEngine(requests, SHIPPED));
    await applyConfig({ ...PAGE_DEFAULTS, lr: PAGE_DEFAULTS.lr * 2 });
    expect(requests.map((r) => r.kind)).toEqual(['setConfig']);
  });
});
