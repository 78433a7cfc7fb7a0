/** The names of the text protocol's prompt sets (prompts.ts), and the tokenizer_config.json field a folder names its set in. */
export const PROMPT_SETS = ['reference', 'short'] as const;
export type PromptSetName = (typeof PROMPT_SETS)[number];

/** The tokenizer_config.json field naming a folder's prompt set. */
export const PROMPTS_FIELD = 'selfcest_prompts';

export const isPromptSetName = (v: unknown): v is PromptSetName => typeof v === 'string' && (PROMPT_SETS as readonly string[]).includes(v);
