import { beforeEach, describe, expect, it } from 'vitest';
import { loadEvent, recordSteps, trainingSettings } from '../../core/io/provenance';
import { cosineLr } from '../../core/sft/sft';
import { PAGE_DEFAULTS, type RunConfig } from '../../core/runConfig';
import type { EngineReplies, EngineRequest, EngineRequestKind } from '../../runtime/engine/messages';
import type { EngineLink, RequestOf } from '../engine/engine';
import { setConfirm } from '../session/confirm';
import { attachEngine, warmStart } from './actions';
import { INITIAL_STATE, getState, setState } from './store';
import { lrText, planParts, warmStartPlan, warmStartQuestion } from './warmStartPlan';

const T0 = new Date('2026-01-01T00:00:00Z');
const steps = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => ({ step: from + i, applied: true }));
const config: RunConfig = { ...PAGE_DEFAULTS, sftLr: 3e-3, sftWarmup: 50, sftBatchTokens: 1024, sftTeacher: 'naive' };

describe('the warm start plan', () => {
  it('is the schedule the engine runs: peak lr, warm-up capped at a tenth of the steps, cosine to a tenth of the peak', () => {
    const p = warmStartPlan(config, 200)!;
    expect(p).toMatchObject({
      steps: 200,
      teacher: 'naive',
      peakLr: 3e-3,
      warmup: 20,
      warmupAsked: 50,
      batchTokens: 1024,
      delegateFraction: 0.5,
      task: 'arithmetic',
    });
    expect(p.minLr).toBeCloseTo(3e-4, 12);
    // The same numbers as the schedule itself: the peak right after the warm-up, the floor at the end.
    expect(cosineLr(p.warmup, p.steps, p.peakLr, p.warmup, 0.1)).toBeCloseTo(p.peakLr, 12);
    expect(cosineLr(p.steps, p.steps, p.peakLr, p.warmup, 0.1)).toBeCloseTo(p.minLr, 12);
    expect(warmStartPlan(config, 1000)).toMatchObject({ warmup: 50, warmupAsked: null });
  });

  it('reads as one line, each part linked to the config field that sets it', () => {
    const parts = planParts(warmStartPlan({ ...config, task: 'multihop', taskOptions: { perChunk: 4 } }, 200)!);
    expect(parts.map((p) => p.text)).toEqual([
      'naive teacher',
      'multihop {"perChunk":4}',
      'lr 0.003',
      'warm-up 20 steps (of 50: at most a tenth of the steps)',
      'cosine to 0.0003',
      '200 steps',
      '1024 tokens/step',
      '50% delegations',
    ]);
    expect(parts.map((p) => p.field)).toEqual(['sftTeacher', 'taskOptions', 'sftLr', 'sftWarmup', null, null, 'sftBatchTokens', 'sftDelegateFraction']);
    expect(planParts(warmStartPlan(PAGE_DEFAULTS, 500)!)[1]).toEqual({ id: 'task', text: 'arithmetic', field: 'task' });
    expect([lrText(3e-3), lrText(2e-5), lrText(0.1 * 3e-3), lrText(1.23456e-4)]).toEqual(['0.003', '0.00002', '0.0003', '0.000123']);
    // Options the task refuses build no plan (the form reports them).
    expect(warmStartPlan({ ...config, taskOptions: { chunks: 6 } }, 10)).toBeNull();
  });
});

describe('the question before a warm start', () => {
  const warm = [loadEvent('checkpoints/warmstart-tiny/', 'tiny', undefined, T0, 'sft')];
  const plan = warmStartPlan(config, 200)!;

  it('is not asked of weights without GRPO behind them', () => {
    expect(warmStartQuestion(plan, warm, 2e-5)).toBeNull();
    expect(warmStartQuestion(plan, recordSteps(warm, 'sft', steps(1, 30), trainingSettings('sft', config), T0), 2e-5)).toBeNull();
  });

  it('names the GRPO behind the weights, the lr against GRPO’s, and the ways back', () => {
    const trained = recordSteps(warm, 'grpo', steps(1, 12), trainingSettings('grpo', config), T0);
    const q = warmStartQuestion(plan, trained, 2e-5)!;
    expect(q).toContain('These weights (policy v12) carry 12 GRPO steps.');
    expect(q).toContain('200 supervised steps at a learning rate up to 0.003, 150× the GRPO learning rate 0.00002');
    expect(q).toContain('Reset returns to the loaded checkpoint (v0)');
    expect(q).toContain('Export weights (Checkpoint panel)');
    expect(q).toContain('Keep run (Runs panel)');
    // A shipped GRPO checkpoint, untouched here, is asked about too.
    const shipped = [loadEvent('checkpoints/selfcest-arith/', 'small', undefined, T0, 'grpo')];
    expect(warmStartQuestion(plan, shipped, 2e-5)).toContain('carry the GRPO training of checkpoints/selfcest-arith/.');
  });
});

describe('Warm start', () => {
  /** An engine that records requests and answers sft; other requests fail the test. */
  function sftEngine(requests: EngineRequest[]): EngineLink {
    return {
      async request<K extends EngineRequestKind>(req: RequestOf<K>): Promise<EngineReplies[K]> {
        const r: EngineRequest = req;
        requests.push(r);
        if (r.kind !== 'sft') throw new Error(`unexpected request ${r.kind}`);
        const reply: EngineReplies['sft'] = { steps: r.steps, loss: 1 };
        return reply as EngineReplies[K];
      },
      on: () => () => undefined,
      terminate: () => undefined,
    };
  }

  beforeEach(() => setState({ ...INITIAL_STATE, config, engineState: 'idle', model: { preset: 'tiny', parameters: 1, policyVersion: 12, source: 'x' } }, true));

  it('on a GRPO-trained model asks first, and a no sends nothing', async () => {
    const requests: EngineRequest[] = [];
    attachEngine(sftEngine(requests));
    setState({ provenance: recordSteps([loadEvent('x', 'tiny', undefined, T0)], 'grpo', steps(1, 12), trainingSettings('grpo', config), T0) });
    const asked: string[] = [];
    setConfirm((m) => (asked.push(m), false));
    await warmStart(200);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain('12 GRPO steps');
    expect(requests).toEqual([]);
    expect(getState()).toMatchObject({ engineState: 'idle', warmStart: null });
    setConfirm(() => true);
    await warmStart(200);
    expect(requests).toEqual([{ kind: 'sft', steps: 200 }]);
  });

  it('on a warm-started model goes ahead without a question', async () => {
    const requests: EngineRequest[] = [];
    attachEngine(sftEngine(requests));
    setState({ provenance: [loadEvent('checkpoints/warmstart-tiny/', 'tiny', undefined, T0, 'sft')] });
    setConfirm(() => {
      throw new Error('asked');
    });
    await warmStart(5);
    expect(requests).toEqual([{ kind: 'sft', steps: 5 }]);
    setConfirm(() => true);
  });
});
