/**
 * Rollout limits and sampling settings. The run settings among them take their defaults and
 * ranges from the config table (runConfigTargets: rolloutConfigOf, defaultRolloutConfig,
 * checkRolloutConfig); this file holds only the shape and the protocol's constants.
 */
import type { ProtocolLimits } from '../protocol/grammar';

export interface RolloutConfig extends ProtocolLimits {
  /** Tokens the root may generate in one episode (injected tokens do not count). */
  rootMaxTokens: number;
  /** Each clone answer is cut to this many characters when injected (reference: 256). */
  answerMaxChars: number;
  temperature: number;
  /** 0 = no top-k truncation. */
  topK: number;
  greedy: boolean;
  /** False = monolithic: spawn-grammar tokens are masked out at sampling. */
  allowSpawn: boolean;
  /**
   * A root that knows its limit: when set, the root's token limit is written in its prompt
   * (rootPrompt), and a GRPO step draws each prompt's limit from [rootLimitMin, rootMaxTokens].
   * Absent: the prompt has no limit (checkpoints trained before it).
   */
  rootLimitMin?: number;
  /**
   * With rootLimitMin: the share of GRPO prompts whose limit is drawn below the tokens of the
   * problem's monolithic chain (the teacher's), so that the chain does not fit; the others draw
   * from the whole range. 0 (or absent): every prompt draws from the whole range.
   */
  rootLimitStraddle?: number;
}

/** The limits one episode runs under: its spawn limits and the root's token limit. */
export type EpisodeLimits = Pick<RolloutConfig, 'budgets' | 'maxClonesPerRound' | 'maxRounds' | 'rootMaxTokens'>;

/** Each clone answer is cut to this many characters when injected: a constant of the token protocol, not a run setting. */
export const ANSWER_MAX_CHARS = 8;
