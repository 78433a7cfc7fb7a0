/** Rollout limits and sampling settings, with validation that names the field. */
import { type ProtocolLimits, validateProtocolLimits } from '../protocol/grammar';
import { BUDGET_BUCKETS } from '../tokenizer/vocab';

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

export const ROLLOUT_DEFAULTS: RolloutConfig = {
  maxClonesPerRound: 4,
  maxRounds: 3,
  budgets: [...BUDGET_BUCKETS],
  rootMaxTokens: 224,
  answerMaxChars: 8,
  temperature: 1,
  topK: 0,
  greedy: false,
  allowSpawn: true,
};

export function validateRolloutConfig(partial: Partial<RolloutConfig>): RolloutConfig {
  const c = { ...ROLLOUT_DEFAULTS, ...partial };
  validateProtocolLimits(c);
  const intIn = (field: 'rootMaxTokens' | 'answerMaxChars' | 'topK', lo: number, hi: number) => {
    const v = c[field];
    if (!Number.isInteger(v) || v < lo || v > hi) throw new Error(`${field} must be an integer in [${lo}, ${hi}] (got ${v})`);
  };
  intIn('rootMaxTokens', 1, 8192);
  intIn('answerMaxChars', 1, 256);
  intIn('topK', 0, 1 << 20);
  if (c.rootLimitMin !== undefined && !(Number.isInteger(c.rootLimitMin) && c.rootLimitMin >= 1 && c.rootLimitMin <= c.rootMaxTokens)) {
    throw new Error(`rootLimitMin must be an integer in [1, rootMaxTokens = ${c.rootMaxTokens}] (got ${c.rootLimitMin})`);
  }
  if (c.rootLimitStraddle !== undefined && !(c.rootLimitStraddle >= 0 && c.rootLimitStraddle <= 1)) {
    throw new Error(`rootLimitStraddle must be in [0, 1] (got ${c.rootLimitStraddle})`);
  }
  if (!c.greedy && !(c.temperature > 0 && c.temperature <= 10)) {
    throw new Error(`temperature must be in (0, 10] (got ${c.temperature})`);
  }
  return c;
}
