/**
 * An engine stand-in for tests of the page's flows (not part of the app: only tests import it).
 * It holds a real TrainerModel, starting from the shipped tiny warm start (call initBackend('cpu')
 * first), answers loadFiles and exportWeights over it as src/runtime/engine/engine.ts does, and records
 * every request. A test's own engine extends `answer` with the requests it sends (step, sft,
 * reset, ...) and hands the rest to `super.answer`; anything else throws.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { decodeCheckpoint } from '../../core/io/checkpoint';
import { ZERO_COUNTERS } from '../../core/io/provenance';
import type { RunConfig } from '../../core/runConfig';
import { filesFromRecord } from '../../runtime/checkpointFiles';
import type { EngineReplies, EngineRequest, EngineRequestKind, ModelReport } from '../../runtime/engine/messages';
import { ToyModel, type TrainerModel } from '../../runtime/engine/trainerModel';
import type { EngineLink, RequestOf } from './engine';

/** The shipped tiny warm start in the repository, and the source the page names it by. */
export const WARM_START_DIR = 'public/checkpoints/warmstart-tiny';
export const WARM_START_SOURCE = 'checkpoints/warmstart-tiny/';

/** The warm start's files, name → bytes, read afresh. */
export function warmStartFiles(): Map<string, Uint8Array> {
  return new Map(readdirSync(WARM_START_DIR).map((name) => [name, new Uint8Array(readFileSync(join(WARM_START_DIR, name)))]));
}

export function warmStartModel(): TrainerModel {
  return ToyModel.fromCheckpoint(decodeCheckpoint(warmStartFiles()), WARM_START_SOURCE);
}

export class ModelEngine implements EngineLink {
  requests: EngineRequest[] = [];
  model = warmStartModel();

  /** `playground`: the page config that exported weights carry in their selfcest.json. */
  constructor(private readonly playground: RunConfig) {}

  async request<K extends EngineRequestKind>(req: RequestOf<K>): Promise<EngineReplies[K]> {
    const r: EngineRequest = req;
    this.requests.push(r);
    return (await this.answer(r, this.model)) as EngineReplies[K];
  }

  /** The reply to `r`; `m` is the model as the request found it. */
  protected async answer(r: EngineRequest, m: TrainerModel): Promise<unknown> {
    switch (r.kind) {
      case 'loadFiles':
        return this.load(r);
      case 'exportWeights': {
        const training = r.provenance === undefined ? {} : { provenance: { policyVersion: m.version, events: r.provenance } };
        const { files, counters } = await m.exportFiles({ playground: this.playground, ...training }, r.origin ? 'origin' : 'current');
        return { files: Object.fromEntries(files), counters };
      }
      default:
        throw new Error(`unexpected request ${r.kind}`);
    }
  }

  /** Replaces the model with the loaded one: at the resume's counters, over its origin when it has one. */
  protected load(r: RequestOf<'loadFiles'>): ModelReport {
    const ckpt = decodeCheckpoint(filesFromRecord(r.files));
    const source = r.resume?.source ?? 'imported';
    const next = r.resume?.origin
      ? ToyModel.resumed(decodeCheckpoint(filesFromRecord(r.resume.origin.files)), r.resume.origin.counters, ckpt, r.resume.counters, source)
      : ToyModel.fromCheckpoint(ckpt, source, r.resume?.counters ?? ZERO_COUNTERS);
    this.model.dispose();
    this.model = next;
    return next.report();
  }

  on = () => () => undefined;
  terminate = () => this.model.dispose();
}
