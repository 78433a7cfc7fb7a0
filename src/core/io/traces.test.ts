import { describe, expect, it } from 'vitest';
import { scoredTrace } from '../rollout/trace';
import { sampleTrace } from '../rollout/traceFixture';
import { parseTracesJsonl, tracesToJsonl } from './traces';

const trace = sampleTrace();

describe('traces JSONL', () => {
  it('round-trips', () => {
    expect(parseTracesJsonl(tracesToJsonl([trace, trace]))).toEqual([trace, trace]);
  });

  it('names the line and field of a malformed trace', () => {
    const bad = (patch: object) => tracesToJsonl([trace, { ...trace, ...patch }]);
    expect(() => parseTracesJsonl('{"a":')).toThrow(/line 1: not valid JSON/);
    expect(() => parseTracesJsonl(bad({ schema: 'other/2' }))).toThrow(/line 2: schema is "other\/2"/);
    expect(() => parseTracesJsonl(bad({ method: 'x' }))).toThrow(/line 2: method must be/);
    expect(() => parseTracesJsonl(bad({ violations: [{ violation: 'nope' }] }))).toThrow(/unknown violation "nope"/);
    const ctx = { ...trace.contexts[0], writers: 'ppp' };
    expect(() => parseTracesJsonl(bad({ contexts: [ctx] }))).toThrow(/contexts\[0\].writers has 3 letters for 8 tokens/);
    const lp = { ...trace.contexts[0], logprobs: [] };
    expect(() => parseTracesJsonl(bad({ contexts: [lp] }))).toThrow(/logprobs must hold one number per generated token/);
  });

  it('writes a scored episode with its reward last and each credit after its context (docs/FORMATS.md)', () => {
    const reward = { reward: 0.9, score: 1, rootPenalty: 0.1, clonePenalty: 0, callPenalty: 0, budgetPenalty: 0 };
    const credit = { advantage: 0.5, weight: 1, gated: false, reward: 0.9 };
    const rollout = trace;
    const line = tracesToJsonl([{ step: 4, ...scoredTrace({ trace: rollout, reward, credits: [credit] }) }]);
    expect(line).toBe(
      '{"step":4,"schema":"selfcest-episode/1","policyVersion":2,"task":"arithmetic","problemId":"p","prompt":"1+2","truth":"3","method":"delegate","answer":"3","correct":true,"rounds":0,' +
        '"contexts":[{"id":0,"role":"root","parent":null,"round":null,"subtask":null,"budget":null,"tokens":[2,22,62,23,4,10,24,1],"text":"<root>1+2<sep><ans>3<eos>","writers":"pppppggg","logprobs":[-0.1,-0.2,-0.3],"generatedTokens":3,"answer":"3","violation":null,"violationDetail":null,' +
        '"credit":{"advantage":0.5,"weight":1,"gated":false,"reward":0.9}}],' +
        '"events":[],"violations":[],"tokens":{"root":3,"clonesTotal":0,"longestClonePerRound":[],"criticalPath":3,"total":3},' +
        '"reward":{"reward":0.9,"score":1,"rootPenalty":0.1,"clonePenalty":0,"callPenalty":0,"budgetPenalty":0}}\n',
    );
    expect(rollout.reward).toBeUndefined();
    expect(() => scoredTrace({ trace: rollout, reward, credits: [] })).toThrow(/0 credits for 1 contexts/);
  });
});
