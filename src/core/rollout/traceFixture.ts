/** One small, valid episode trace (a monolithic `1+2` = 3) for tests of what stores and moves traces. */
import type { EpisodeTrace } from './trace';

export function sampleTrace(overrides: Partial<EpisodeTrace> = {}): EpisodeTrace {
  return {
    schema: 'selfcest-episode/1',
    policyVersion: 2,
    task: 'arithmetic',
    problemId: 'p',
    prompt: '1+2',
    truth: '3',
    method: 'delegate',
    answer: '3',
    correct: true,
    rounds: 0,
    contexts: [
      {
        id: 0,
        role: 'root',
        parent: null,
        round: null,
        subtask: null,
        budget: null,
        tokens: [2, 22, 62, 23, 4, 10, 24, 1],
        text: '<root>1+2<sep><ans>3<eos>',
        writers: 'pppppggg',
        logprobs: [-0.1, -0.2, -0.3],
        generatedTokens: 3,
        answer: '3',
        violation: null,
        violationDetail: null,
      },
    ],
    events: [],
    violations: [],
    tokens: { root: 3, clonesTotal: 0, longestClonePerRound: [], criticalPath: 3, total: 3 },
    ...overrides,
  };
}

/**
 * `tok.encode`, remembered per text: the HF encoder is the slow part of a test's many rollouts,
 * and their texts repeat. Each call returns a fresh copy.
 */
export function cachedEncode(tok: { encode(text: string): number[] }): (text: string) => number[] {
  const encoded = new Map<string, number[]>();
  return (text) => {
    let ids = encoded.get(text);
    if (ids === undefined) encoded.set(text, (ids = tok.encode(text)));
    return ids.slice();
  };
}
