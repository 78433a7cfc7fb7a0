/**
 * The anatomy of one GRPO step, for the page's slow-motion view (GAN Lab style): after a real
 * step of the run, what each stage made of each prompt's group.
 *
 *   rollouts (the step's scored traces) → rewards with their terms (RewardBreakdown) → the
 *   group baseline and advantages (groupBaseline, as computeAdvantages) → clone credit and gates
 *   (each context's ContextCredit) → the update's effect: the log-prob of every generated token
 *   under the behaviour policy (recorded at rollout) and under the updated weights.
 *
 * Nothing here decides anything the step did not: the credits are the step's own, the baseline
 * is recomputed by the same function, and "after" is one forward of the updated weights at the
 * loss temperature. The step is not redone and nothing is trained here.
 */
import type { Scorer } from '../policyModel';
import { type EpisodeTrace, scoredTrace } from '../rollout/trace';
import { groupBaseline } from './advantage';
import { actionLogprobs } from './ppoLoss';
import { type GrpoConfig, type ScoredEpisode, type StepMetrics, episodeSequences } from './grpoStep';

export interface AnatomyGroup {
  problemId: string;
  prompt: string;
  truth: string;
  /** Indices into StepAnatomy.traces, in rollout order. */
  episodes: number[];
  mean: number;
  /** Sample standard deviation (N − 1), as the advantages use it. */
  std: number;
  /** All rewards equal: the group carries no signal and is skipped. */
  zeroVariance: boolean;
  /** Some context of the group had loss weight > 0 (false: zero variance, or dropped by dynamic sampling). */
  trained: boolean;
}

export interface StepAnatomy {
  /** The step's number (1-based, as its metrics row). */
  step: number;
  policyVersionBefore: number;
  policyVersionAfter: number;
  metrics: StepMetrics;
  /** The settings that shaped the stages. */
  settings: {
    group: number;
    batch: number;
    miniBatch: number | null;
    innerEpochs: number;
    lr: number;
    stdNormalize: boolean;
    credit: GrpoConfig['advantage']['credit'];
    gating: boolean;
    gateMode: GrpoConfig['advantage']['gateMode'];
    gatedKl: boolean;
    ratioClamp: number;
    /** ε of A = (R − mean) / (std + ε). */
    eps: number;
    clipLow: number;
    clipHigh: number;
    beta: number;
    temperature: number;
  };
  /** The step's episodes as trace records (scoredTrace: reward and each context's credit). */
  traces: EpisodeTrace[];
  groups: AnatomyGroup[];
  /** after[i][j][k]: log-prob of the k-th generated token of trace i's context j under the updated weights (before: contexts[j].logprobs[k]). */
  after: number[][][];
}

/** The anatomy of a step that has just run; `scorer` reads the weights its updates produced (any model: the toy's or a Hugging Face decoder's). */
export async function stepAnatomy(
  scorer: Scorer,
  cfg: GrpoConfig,
  result: { metrics: StepMetrics; episodes: ScoredEpisode[] },
  policyVersionBefore: number,
  policyVersionAfter: number,
): Promise<StepAnatomy> {
  const { episodes } = result;
  const seqs = episodes.flatMap((e) => episodeSequences(e.trace, e.credits));
  const lps = await actionLogprobs(scorer, seqs, cfg.loss.temperature, cfg.microTokens);
  let s = 0;
  const after = episodes.map((e) =>
    e.trace.contexts.map(() => {
      const seq = seqs[s];
      const lp = lps[s++];
      return seq.actions.flatMap((a, t) => (a ? [lp[t]] : []));
    }),
  );
  const byProblem = new Map<string, number[]>();
  episodes.forEach((e, i) => {
    const members = byProblem.get(e.problem.id) ?? [];
    members.push(i);
    byProblem.set(e.problem.id, members);
  });
  const groups: AnatomyGroup[] = [...byProblem.entries()].map(([problemId, members]) => {
    const { mean, std, zeroVariance } = groupBaseline(members.map((i) => episodes[i].reward.reward));
    const p = episodes[members[0]].problem;
    return {
      problemId,
      prompt: p.prompt,
      truth: p.truth,
      episodes: members,
      mean,
      std,
      zeroVariance,
      trained: members.some((i) => episodes[i].credits.some((c) => c.weight > 0)),
    };
  });
  const { advantage: a, loss } = cfg;
  return {
    step: result.metrics.step,
    policyVersionBefore,
    policyVersionAfter,
    metrics: result.metrics,
    settings: {
      group: cfg.group,
      batch: cfg.batch,
      miniBatch: cfg.miniBatch,
      innerEpochs: cfg.innerEpochs,
      lr: cfg.lr,
      stdNormalize: a.stdNormalize,
      credit: a.credit,
      gating: a.gating,
      gateMode: a.gateMode,
      gatedKl: a.gatedKl,
      ratioClamp: a.ratioClamp,
      eps: a.eps,
      clipLow: loss.clipLow,
      clipHigh: loss.clipHigh,
      beta: loss.beta,
      temperature: loss.temperature,
    },
    traces: episodes.map(scoredTrace),
    groups,
    after,
  };
}
