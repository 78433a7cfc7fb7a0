import { describe, expect, it } from 'vitest';
import { parseTracesJsonl, tracesToJsonl } from '../io/traces';
import { answerOf, parseVerlFiles, parseVerlRecords, responseSpans, stepFileOrder, verlRecordsToTraces } from './readback';

const jsonl = (rows: object[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';

// A root that spawns twice (turn0: two clones, turn1: one), as verl's tool agent loop logs it.
const rootResponse =
  'Split it.<tool_call>{"name":"spawn_clone","arguments":{"objectives":["57+77","7*7"]}}</tool_call>' +
  '<tool_response>["Answer: 134","Answer: 49"]</tool_response>' +
  'Now the rest.<tool_call>{"name":"spawn_clone","arguments":{"objectives":["134+49"]}}</tool_call>' +
  '<tool_response>["Answer: 183"]</tool_response>So\nAnswer: 183';
const records = [
  {
    request_id: 'r1',
    parent_request_id: null,
    step: 7,
    data_source: 'selfcest_arithmetic',
    prompt: 'Calculate the value of 57+77+7*7.',
    response: rootResponse,
    response_mask: [1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1],
    reward_model: { ground_truth: '183' },
    reward: 0.93,
    score: 1,
  },
  { request_id: 'c1', parent_request_id: 'r1', clone_label: 'turn0', prompt: '57+77', response: '=134\nAnswer: 134', response_mask: [1, 1, 1, 1] },
  { request_id: 'c2', parent_request_id: 'r1', clone_label: 'turn0', prompt: '7*7', response: 'I think 49', response_mask: [1, 1, 1, 1, 1, 1] },
  { request_id: 'c3', parent_request_id: 'r1', clone_label: 'turn2', prompt: '134+49', response: 'Answer: 183', response_mask: [1, 1] },
  {
    request_id: 'r2',
    parent_request_id: null,
    step: 7,
    data_source: 'selfcest_arithmetic',
    prompt: 'Calculate the value of 2+2.',
    response: 'Answer: 5',
    response_mask: [1, 1, 1],
    ground_truth: '4',
    reward: 0.02,
  },
];

describe('verl rollout records → traces', () => {
  it('takes the answer after the last marker and splits responses into generated and injected text', () => {
    expect(answerOf('x Answer: 1\nAnswer: 42 <|im_end|>\nmore')).toBe('42');
    expect(answerOf('no marker')).toBeNull();
    expect(answerOf('Answer:   ')).toBeNull();
    expect(responseSpans('a<tool_response>b</tool_response>c')).toEqual([
      { writer: 'g', text: 'a' },
      { writer: 'i', text: '<tool_response>b</tool_response>' },
      { writer: 'g', text: 'c' },
    ]);
  });

  it('builds one text-only episode per root, its clones by turn, tokens from the response masks', () => {
    const [t1, t2] = verlRecordsToTraces(parseVerlRecords(jsonl(records)));
    expect(t1.step).toBe(7);
    expect(t1.task).toBe('arithmetic'); // the export's data_source, less its prefix
    expect(t1.answer).toBe('183');
    expect(t1.correct).toBe(true);
    expect(t1.rounds).toBe(2); // turn0 and turn2, renumbered 0 and 1
    expect(t1.contexts.map((c) => [c.id, c.role, c.round, c.answer, c.generatedTokens, c.violation])).toEqual([
      [0, 'root', null, '183', 8, null],
      [1, 'clone', 0, '134', 4, null],
      [2, 'clone', 0, null, 6, 'clone_no_answer'],
      [3, 'clone', 1, '183', 2, null],
    ]);
    // Root 8 generated; clones 4 + 6 + 2; longest per round 6 and 2.
    expect(t1.tokens).toEqual({ root: 8, clonesTotal: 12, longestClonePerRound: [6, 2], criticalPath: 16, total: 20 });
    expect(t1.sourceReward).toEqual({ reward: 0.93, score: 1 });
    expect(t1.violations).toEqual([{ violation: 'clone_no_answer', context: 2, detail: 'the clone\'s response has no "Answer:" line' }]);
    expect(t1.contexts[0].spans!.map((s) => s.writer).join('')).toBe('pgigig');
    expect(t1.contexts[0].text).toBe('Calculate the value of 57+77+7*7.' + rootResponse);
    expect(t1.events.map((e) => [e.kind, e.round, e.kind === 'spawn' ? e.clones : e.answers])).toEqual([
      ['spawn', 0, [1, 2]],
      ['join', 0, ['134', null]],
      ['spawn', 1, [3]],
      ['join', 1, ['183']],
    ]);
    expect(t2.correct).toBe(false);
    expect(t2.sourceReward).toEqual({ reward: 0.02, score: null });
    expect(t2.rounds).toBe(0);
  });

  it('writes traces the project reader takes back unchanged (text-only contexts)', () => {
    const traces = verlRecordsToTraces(parseVerlRecords(jsonl(records)));
    const back = parseTracesJsonl(tracesToJsonl(traces));
    expect(back).toEqual(traces);
    expect(back[0].contexts[1].tokens).toEqual([]);
  });

  it('refuses bad records, naming the line and what is wrong', () => {
    const bad =
      (patch: object, i = 1) =>
      () =>
        verlRecordsToTraces(parseVerlRecords(jsonl(records.map((r, k) => (k === i ? { ...r, ...patch } : r)))));
    expect(bad({ response_mask: [1, 2] })).toThrow('verl rollouts: line 2: response_mask must be an array of 0 and 1');
    expect(bad({ parent_request_id: 'zz' })).toThrow('line 2: parent_request_id "zz" names no record in the file');
    expect(bad({ parent_request_id: 'c2' })).toThrow('clones of clones are not part of the protocol');
    expect(bad({ request_id: 'r1' })).toThrow('request_id "r1" is given twice');
    expect(bad({ step: -1 }, 0)).toThrow('line 1: step must be an integer ≥ 0');
    expect(() => parseVerlRecords('{"request_id":')).toThrow('line 1: not valid JSON');
    expect(bad({ response: undefined })).toThrow('line 2: output (or response, or text) is missing');
    expect(bad({ response_mask: undefined })).toThrow('line 2: response_mask_tokens (or a response_mask array) is missing');
    expect(bad({ response_mask: undefined, response_mask_tokens: 1.5 })).toThrow('line 2: response_mask_tokens must be an integer ≥ 0');
    expect(() =>
      parseVerlFiles([
        { name: '1.jsonl', text: jsonl(records.slice(0, 1)) },
        { name: '2.jsonl', text: '{"request_id": 3}\n' },
      ]),
    ).toThrow('verl rollouts: 2.jsonl: line 1: request_id must be a string');
  });

  it("reads selfcest_dump.py's rows: verl's names, token counts, objectives, a clone named by the root as its own round, parts as logged", () => {
    const dump = [
      {
        input: 'Calculate 5+6+7.',
        output: 'x<tool_call>{"name":"spawn_clone","arguments":{"objectives":[{"objective":"5+6","name":"left"}]}}</tool_call>',
        gts: '18',
        score: 0.7,
        step: 3,
        request_id: 'R',
        actor_role: 'root',
        data_source: 'selfcest_arithmetic',
        response_mask_tokens: 30,
        reward_extra_info: { answer_score: 1, root_penalty: 0.1, reward: 0.8, correct: true },
      },
      {
        input: 'system\n…5+6',
        output: '5+6=11\nAnswer: 11',
        gts: '18',
        score: 0.7,
        step: 3,
        request_id: 'C1',
        parent_request_id: 'R',
        clone_label: 'left',
        clone_objective: '5+6',
        actor_role: 'clone',
        response_mask_tokens: 7,
      },
      {
        input: 'system\n…+7',
        output: 'hmm',
        gts: '18',
        score: 0,
        step: 3,
        request_id: 'C2',
        parent_request_id: 'R',
        clone_label: 'turn0_clone1',
        clone_objective: 'add 7',
        actor_role: 'clone',
        response_mask_tokens: 3,
      },
    ];
    const [t] = verlRecordsToTraces(parseVerlFiles([{ name: '3.jsonl', text: jsonl(dump) }]));
    expect(t.step).toBe(3);
    expect(t.truth).toBe('18');
    // The spawn call was cut off by the length limit: its objective is not the root's answer.
    expect(t.answer).toBeNull();
    expect(t.contexts.map((c) => [c.role, c.round, c.subtask, c.generatedTokens, c.answer])).toEqual([
      ['root', null, null, 30, null],
      ['clone', 0, 'add 7', 3, null],
      ['clone', 1, '5+6', 7, '11'],
    ]);
    // Not every part was logged: the ones that were, none invented.
    expect(t.reward).toBeUndefined();
    expect(t.sourceReward).toEqual({ reward: 0.7, score: 1, parts: { score: 1, rootPenalty: 0.1 } });
    expect(parseTracesJsonl(tracesToJsonl([t]))).toEqual([t]);
    expect(stepFileOrder('10.jsonl', '9.jsonl')).toBeGreaterThan(0);
    expect(['b.jsonl', '10.jsonl', '2.jsonl', 'a.jsonl'].sort(stepFileOrder)).toEqual(['2.jsonl', '10.jsonl', 'a.jsonl', 'b.jsonl']);
  });

  it('the traces reader checks a text-only context: spans must spell the text, no token ids beside them', () => {
    const [t] = verlRecordsToTraces(parseVerlRecords(jsonl(records.slice(0, 1))));
    const line = (patch: object) => tracesToJsonl([{ ...t, contexts: [{ ...t.contexts[0], ...patch }] }]);
    expect(() => parseTracesJsonl(line({ text: 'other' }))).toThrow('contexts[0].spans do not spell its text');
    expect(() => parseTracesJsonl(line({ tokens: [1, 2] }))).toThrow('contexts[0].tokens must be absent or empty in a text-only context');
    expect(() => parseTracesJsonl(line({ spans: [{ writer: 'x', text: t.contexts[0].text }] }))).toThrow('contexts[0].spans[0] must be {writer');
    expect(() => parseTracesJsonl(line({ generatedTokens: -1 }))).toThrow('generatedTokens must be an integer ≥ 0');
    expect(() => parseTracesJsonl(tracesToJsonl([{ ...t, sourceReward: { reward: 'high' } }]))).toThrow('sourceReward must be');
    expect(() => parseTracesJsonl(tracesToJsonl([{ ...t, sourceReward: { reward: 1, score: null, parts: { bonus: 1 } } }]))).toThrow(
      'sourceReward.parts must map parts of the reward',
    );
    // Without tokens, writers and logprobs at all (another tool's writer may leave them out).
    const bare = JSON.parse(line({}));
    for (const c of bare.contexts) for (const k of ['tokens', 'writers', 'logprobs']) delete c[k];
    expect(parseTracesJsonl(JSON.stringify(bare))[0].contexts[0].tokens).toEqual([]);
  });
});
