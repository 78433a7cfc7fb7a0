/**
 * Test helper: one of this project's episodes as verl's tool agent loop would log it — a root
 * sample whose response holds hermes-style `<tool_call>` spawn_clone calls and the
 * `<tool_response>` the loop injected, and one sample per clone (request_id, parent_request_id,
 * clone_label `turn<round>`, response_mask over its response tokens). Used to check the
 * read-back converter and the exported reward against the project's own traces.
 */
import type { EpisodeTrace } from '../src/core/rollout/trace';

export interface VerlSample {
  request_id: string;
  parent_request_id: string | null;
  prompt: string;
  response: string;
  response_mask: number[];
  clone_label?: string;
  budget?: number;
  step?: number;
  data_source?: string;
  ground_truth?: string;
  reward?: number;
  score?: number;
  reward_extra_info?: Record<string, number>;
}

const ones = (n: number) => Array.from({ length: n }, () => 1);
const zeros = (n: number) => Array.from({ length: n }, () => 0);

export function verlSamplesOf(trace: EpisodeTrace & { step?: number }, id: string, parts = false): VerlSample[] {
  const root = trace.contexts[0];
  const clones = trace.contexts.filter((c) => c.role === 'clone');
  const calls = Array.from({ length: trace.rounds }, (_, r) => {
    const round = clones.filter((c) => c.round === r);
    const call = JSON.stringify({ name: 'spawn_clone', arguments: { objectives: round.map((c) => c.subtask ?? '') } });
    const answers = JSON.stringify(round.map((c) => (c.answer === null ? 'failed' : `Answer: ${c.answer}`)));
    return `<tool_call>${call}</tool_call><tool_response>${answers}</tool_response>`;
  }).join('');
  const injected = root.writers.split('').filter((w) => w === 'i').length;
  const rootSample: VerlSample = {
    request_id: id,
    parent_request_id: null,
    prompt: trace.prompt,
    response: calls + (trace.answer === null ? '' : `\nAnswer: ${trace.answer}`),
    response_mask: [...ones(root.generatedTokens), ...zeros(injected)],
    data_source: trace.task,
    ground_truth: trace.truth,
    ...(trace.step !== undefined ? { step: trace.step } : {}),
    ...(trace.reward ? { reward: trace.reward.reward, score: trace.reward.score } : {}),
    // Half the episodes as a run with selfcest_reward.py logs them: the parts in reward_extra_info.
    ...(trace.reward && parts
      ? {
          reward_extra_info: {
            answer_score: trace.reward.score,
            root_penalty: trace.reward.rootPenalty,
            clone_penalty: trace.reward.clonePenalty,
            call_penalty: trace.reward.callPenalty,
            budget_penalty: trace.reward.budgetPenalty ?? 0,
            token_penalty: trace.reward.tokenPenalty ?? 0,
          },
        }
      : {}),
  };
  return [
    rootSample,
    ...clones.map((c) => ({
      request_id: `${id}.${c.id}`,
      parent_request_id: id,
      clone_label: `turn${c.round}_clone${clones.filter((d) => d.round === c.round).indexOf(c)}`,
      prompt: c.subtask ?? '',
      response: c.answer === null ? '(no answer)' : `Answer: ${c.answer}`,
      response_mask: ones(c.generatedTokens),
      ...(c.budget !== null ? { budget: c.budget } : {}),
    })),
  ];
}
