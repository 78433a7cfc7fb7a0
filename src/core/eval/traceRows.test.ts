import { describe, expect, it } from 'vitest';
import { parseVerlRecords, verlRecordsToTraces } from '../verl/readback';
import { rowsFromTraces } from './traceRows';

const rec = (id: string, step: number, response: string, mask: number[], extra: object = {}) => ({
  request_id: id,
  parent_request_id: null,
  step,
  prompt: 'q',
  response,
  response_mask: mask,
  ground_truth: '4',
  ...extra,
});

describe('rows from traces', () => {
  it('gives per-step episode means by the trainer definitions, NaN where traces cannot tell', () => {
    const lines = [
      rec('a', 0, 'Answer: 4', [1, 1, 1, 1], { reward: 1 }),
      rec('b', 0, 'Answer: 5', [1, 1], { reward: 0.2 }),
      { request_id: 'b1', parent_request_id: 'b', clone_label: 'turn0', prompt: '2+2', response: 'Answer: 4', response_mask: [1, 1, 1] },
      rec('c', 3, 'no', [1], { reward: -0.1 }),
    ];
    const traces = verlRecordsToTraces(parseVerlRecords(lines.map((l) => JSON.stringify(l)).join('\n')));
    const rows = rowsFromTraces(traces);
    expect(rows.map((r) => r.step)).toEqual([1, 4]); // counted from 0 in the source: shifted by one
    const [r0, r3] = rows;
    expect(r0.meanReward).toBeCloseTo(0.6, 12);
    expect(r0.accuracy).toBe(0.5);
    expect(r0.meanRootTokens).toBe(3); // (4 + 2) / 2
    expect(r0.meanCloneTokens).toBe(1.5); // 3 clone tokens over 2 episodes
    expect(r0.meanTotalTokens).toBe(4.5);
    expect(r0.clonesPerEpisode).toBe(0.5);
    expect(r0.delegationRate).toBe(0.5);
    expect(r0.gateRate).toBeNaN(); // no credit in a converted trace
    expect(r0.loss).toBeNaN();
    expect(r3.violations.root_no_answer).toBe(1);
    expect(r3.meanReward).toBe(-0.1);
  });

  it('refuses a step whose episodes carry no reward', () => {
    const traces = verlRecordsToTraces(parseVerlRecords(JSON.stringify(rec('a', 2, 'Answer: 4', [1]))));
    expect(() => rowsFromTraces(traces)).toThrow('traces of step 2 carry no reward');
  });
});
