import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../core/io/checkpoint';
import { filesFromRecord } from '../../runtime/checkpointFiles';
import type { EngineReplies, EngineRequest, EngineRequestKind } from '../../runtime/engine/messages';
import type { EngineLink, RequestOf } from '../engine/engine';
import { tarArchive } from '../files/tar';
import { attachEngine, importFiles, pause } from './actions';
import { handleEvent } from './events';
import { INITIAL_STATE, canStartWork, engineStateText, getState, setState } from './store';

const SHIPPED = 'public/checkpoints/warmstart-tiny';
const shipped = readdirSync(SHIPPED).map((name) => ({ name, bytes: new Uint8Array(readFileSync(join(SHIPPED, name))) }));

/** An engine that validates loadFiles as the real one does (decodeCheckpoint) and names its files as the source. */
function fakeEngine(requests: EngineRequest[]): EngineLink {
  return {
    async request<K extends EngineRequestKind>(req: RequestOf<K>): Promise<EngineReplies[K]> {
      const r: EngineRequest = req;
      requests.push(r);
      if (r.kind !== 'loadFiles') throw new Error(`unexpected request ${r.kind}`);
      const files = filesFromRecord(r.files);
      decodeCheckpoint(files);
      const report: EngineReplies['loadFiles'] = { preset: 'tiny', parameters: 1, policyVersion: 0, source: [...files.keys()].join(', ') };
      return report as EngineReplies[K];
    },
    on: () => () => undefined,
    terminate: () => undefined,
  };
}

beforeEach(() => setState({ ...INITIAL_STATE }, true));

describe('import', () => {
  it('loads the exported .tar picked alone; files the import does not use are reported as ignored, not loaded', async () => {
    const requests: EngineRequest[] = [];
    attachEngine(fakeEngine(requests));
    const extras = [{ name: 'train.log', bytes: new TextEncoder().encode('step 1\n') }];
    const tar = tarArchive('selfcest-tiny-v3', [...shipped, ...extras], 0);
    await importFiles([new File([tar], 'selfcest-tiny-v3.tar')]);
    const s = getState();
    expect(s.importError).toBeNull();
    expect(s.model?.source.split(', ').sort()).toEqual(['config.json', 'model.safetensors', 'selfcest.json', 'tokenizer.json', 'tokenizer_config.json']);
    expect(s.importNote).toMatch(/^loaded selfcest-tiny-v3\.tar: selfcest-tiny-v3\/\S+/);
    expect(s.importNote).toMatch(/; ignored \(not part of a checkpoint\): selfcest-tiny-v3\.tar: selfcest-tiny-v3\/train\.log$/);
    expect(requests).toHaveLength(1);
  });

  it('a damaged .tar is reported with what is wrong and never reaches the engine', async () => {
    const requests: EngineRequest[] = [];
    attachEngine(fakeEngine(requests));
    const tar = tarArchive('ckpt', shipped, 0);
    tar[3] ^= 0x01; // inside the first header's name: a bad checksum
    await importFiles([new File([tar], 'ckpt.tar')]);
    expect(getState().importError).toMatch(/^ckpt\.tar: tar: bad header checksum for entry 1 at byte 0/);
    expect(getState().model).toBeNull();
    expect(requests).toEqual([]);
  });
});

describe('policy version in the status bar', () => {
  it('follows every GRPO step of a run, not only the status changes', () => {
    handleEvent({ kind: 'status', state: 'training', policyVersion: 4 });
    expect(getState()).toMatchObject({ engineState: 'training', policyVersion: 4 });
    for (const v of [5, 6, 7]) {
      handleEvent({ kind: 'policyVersion', policyVersion: v });
      expect(getState()).toMatchObject({ engineState: 'training', policyVersion: v });
    }
    handleEvent({ kind: 'status', state: 'paused', policyVersion: 7 });
    expect(getState()).toMatchObject({ engineState: 'paused', policyVersion: 7 });
  });
});

describe('pause', () => {
  /** An engine whose pause reply waits until `finish` (a long step finishing); events are fed to handleEvent by hand. */
  function slowPauseEngine(requests: EngineRequest[]): { engine: EngineLink; finish: (policyVersion: number) => void } {
    let finish: (policyVersion: number) => void = () => undefined;
    const engine: EngineLink = {
      async request<K extends EngineRequestKind>(req: RequestOf<K>): Promise<EngineReplies[K]> {
        const r: EngineRequest = req;
        requests.push(r);
        if (r.kind !== 'pause') throw new Error(`unexpected request ${r.kind}`);
        const policyVersion = await new Promise<number>((resolve) => (finish = resolve));
        const reply: EngineReplies['pause'] = { policyVersion };
        return reply as EngineReplies[K];
      },
      on: () => () => undefined,
      terminate: () => undefined,
    };
    return { engine, finish: (v) => finish(v) };
  }

  it('shows pausing at once and keeps Train and Step disabled until the engine reports paused', async () => {
    const requests: EngineRequest[] = [];
    const { engine, finish } = slowPauseEngine(requests);
    attachEngine(engine);
    setState({ model: { preset: 'tiny', parameters: 1, policyVersion: 2, source: 'test' } });
    handleEvent({ kind: 'status', state: 'paused', policyVersion: 2 });
    expect(canStartWork(getState())).toBe(true);
    handleEvent({ kind: 'status', state: 'training', policyVersion: 2 });
    expect(canStartWork(getState())).toBe(false);

    const paused = pause();
    // Before the engine has said anything: the page already shows the pause.
    expect(getState()).toMatchObject({ engineState: 'pausing', finishing: null });
    expect(engineStateText(getState().engineState, getState().finishing)).toBe('pausing…');
    expect(canStartWork(getState())).toBe(false);
    expect(requests.map((r) => r.kind)).toEqual(['pause']);

    // A 'training' sent before the engine saw the pause does not undo it; its policy version is kept.
    handleEvent({ kind: 'status', state: 'training', policyVersion: 3 });
    expect(getState()).toMatchObject({ engineState: 'pausing', policyVersion: 3 });
    handleEvent({ kind: 'status', state: 'pausing', finishing: 'step 4', policyVersion: 3 });
    expect(engineStateText(getState().engineState, getState().finishing)).toBe('pausing… (finishing step 4)');
    // Steps finishing meanwhile still move the policy version; the buttons stay disabled.
    handleEvent({ kind: 'policyVersion', policyVersion: 4 });
    expect(getState()).toMatchObject({ engineState: 'pausing', policyVersion: 4 });
    expect(canStartWork(getState())).toBe(false);

    handleEvent({ kind: 'status', state: 'paused', policyVersion: 4 });
    expect(getState()).toMatchObject({ engineState: 'paused', finishing: null });
    expect(canStartWork(getState())).toBe(true);
    finish(4);
    await paused;
    expect(getState()).toMatchObject({ engineState: 'paused', policyVersion: 4, pending: null, error: null });
  });

  it('a warm start being paused shows pausing as well', () => {
    setState({ model: { preset: 'tiny', parameters: 1, policyVersion: 0, source: 'test' } });
    handleEvent({ kind: 'status', state: 'sft', policyVersion: 0 });
    attachEngine(slowPauseEngine([]).engine);
    void pause();
    handleEvent({ kind: 'status', state: 'sft', policyVersion: 0 });
    expect(getState().engineState).toBe('pausing');
    handleEvent({ kind: 'status', state: 'pausing', finishing: 'the current warm-start step', policyVersion: 0 });
    expect(engineStateText(getState().engineState, getState().finishing)).toBe('pausing… (finishing the current warm-start step)');
    expect(canStartWork(getState())).toBe(false);
  });
});
