/** The default lengths of a text episode (a chat turn in the model's own tokens), light enough for the page's main thread. */

/**
 * Lengths of a text episode when a run gives none: the root's tokens over the episode and each
 * clone's. Real models write far more tokens than the toy protocol (a tool call alone is dozens).
 */
export const TEXT_LENGTHS = { rootMaxTokens: 256, cloneBudget: 128 } as const;

export interface TextLimits {
  /** Tokens the root may generate over the episode. */
  rootMaxTokens: number;
  /** Tokens each clone may generate. */
  cloneBudget: number;
  /** Clones one call may start (the reference's max_clones_per_call); later objectives are refused. */
  maxClones: number;
  /** Tool rounds at most. */
  maxRounds: number;
}
