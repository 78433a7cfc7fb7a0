/**
 * The warm start of a Hugging Face model's data: the same demonstrations as the toy's (sft.ts draws
 * them, by the same seed and step), rendered in the text protocol (textDemos.ts). They train by the
 * one warm-start step (sft.ts `sftStepOf` over `scorerLearner`): the mean next-token NLL over the
 * tokens the model writes,
 *
 *   loss = − Σ_rows Σ_t w[t] · log p(tokens[t+1] | tokens[..t]) / Σ w,
 *
 * over what the policy trains (LoRA adapters or every weight), by AdamW at the cosine schedule.
 */
import type { TrainSequence } from '../parallel/sequences';
import type { Demonstration } from '../tasks/types';
import { textPrompts } from '../protocol/prompts';
import type { HfTokenizer } from '../tokenizer/hfTokenizer';
import { Tokenizer } from '../tokenizer/tokenizer';
import { type SftConfig, type TaskMixEntry, sftMixSequences } from './sft';
import { type TextDemoLengths, renderTextDemo, textDemoContexts, textTrainSequence } from './textDemos';

const toy = Tokenizer.builtin();

/**
 * The sequences of one warm-start step for a text model: the toy's draw (sftMixSequences) with each
 * demonstration rendered and tokenized as the text loop has it. A demonstration with a context past
 * the model's window, a root past `rootMaxTokens` or a clone past `cloneBudget` is left out whole and
 * the next problem drawn (the loop could not run it). The toy's sloppy clones apply (a clone
 * without its answer is cut at the clone budget), and so does a drawn root limit: counted in the
 * model's own tokens, and told in the prompt set's words.
 */
export function textSftSequences<O>(
  mix: readonly TaskMixEntry<O>[],
  cfg: SftConfig,
  step: number,
  tokenizer: HfTokenizer,
  lengths: TextDemoLengths,
  maxPositions: number,
): TrainSequence[] {
  const prompts = textPrompts(tokenizer.prompts);
  const contexts = (demo: Demonstration) => textDemoContexts(renderTextDemo(demo, prompts), tokenizer, lengths);
  // What the root writes in the model's own tokens: what a drawn root limit counts.
  const rootTokens = (demo: Demonstration) => {
    const root = contexts(demo)?.[0];
    return root === undefined ? Infinity : [...root.writers].filter((w) => w === 'g').length;
  };
  return sftMixSequences(
    mix,
    cfg,
    step,
    (t) => toy.encode(t),
    maxPositions,
    (demo) => contexts(demo)?.map(textTrainSequence) ?? null,
    rootTokens,
  );
}
