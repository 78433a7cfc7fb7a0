/**
 * The one fixed vocabulary shared by every task and checkpoint.
 *
 * Ids never change once a checkpoint exists: new protocol tokens take one of the
 * reserved slots instead of shifting the table. Special tokens are single ids whose
 * spelling is `<name>`; every other token is exactly one character.
 */

export const SPECIAL_TOKENS = [
  '<pad>', // 0: padding, never generated
  '<eos>', // 1: ends an answer block, closes a context
  '<root>', // 2: first token of a root prompt
  '<clone>', // 3: first token of a clone prompt
  '<sep>', // 4: ends a prompt; generation starts after it
  '<spawn>', // 5: opens a spawn block (subtask text follows)
  '<join>', // 6: root pauses until its clones finish
  '<ret>', // 7: runtime-injected: one clone's answer follows
  '<fail>', // 8: runtime-injected: the clone failed (no answer)
  '<resume>', // 9: runtime-injected: end of the join, the root continues
  '<ans>', // 10: opens an answer block (answer text, then <eos>)
  '<ctx>', // 11: context-key reference expanded by the runtime (long-context tasks)
  '<b8>', // 12..16: budget buckets; one closes a spawn block
  '<b16>',
  '<b32>',
  '<b64>',
  '<b128>',
  '<unused0>', // 17..19: reserved so later protocol versions keep ids stable
  '<unused1>',
  '<unused2>',
  '<unk>', // 20: stands for a character outside the vocabulary (HF tokenizer's unk_token)
] as const;

/** Plain characters, one token each, after the special tokens. */
export const CHAR_TOKENS: readonly string[] = [...'0123456789', ...'abcdefghijklmnopqrstuvwxyz', ..." +-*()=?.,:#'_>\n"];

export const VOCAB: readonly string[] = [...SPECIAL_TOKENS, ...CHAR_TOKENS];
export const VOCAB_SIZE = VOCAB.length;

const ID_OF = new Map<string, number>(VOCAB.map((t, i) => [t, i]));

/** Id of a special token or a single character; throws on anything else (a programming error). */
export function tokenId(piece: string): number {
  const id = ID_OF.get(piece);
  if (id === undefined) throw new Error(`token ${JSON.stringify(piece)} is not in the vocabulary`);
  return id;
}

export const T = {
  pad: tokenId('<pad>'),
  eos: tokenId('<eos>'),
  root: tokenId('<root>'),
  clone: tokenId('<clone>'),
  sep: tokenId('<sep>'),
  spawn: tokenId('<spawn>'),
  join: tokenId('<join>'),
  ret: tokenId('<ret>'),
  fail: tokenId('<fail>'),
  resume: tokenId('<resume>'),
  ans: tokenId('<ans>'),
  ctx: tokenId('<ctx>'),
} as const;

/** Budget buckets in tokens, and the token that names each. */
export const BUDGET_BUCKETS = [8, 16, 32, 64, 128] as const;
export const BUDGET_TOKEN_IDS: readonly number[] = BUDGET_BUCKETS.map((b) => tokenId(`<b${b}>`));

/** Budget named by a token id, or undefined when the id is not a budget token. */
export function budgetOfToken(id: number): number | undefined {
  const i = BUDGET_TOKEN_IDS.indexOf(id);
  return i < 0 ? undefined : BUDGET_BUCKETS[i];
}

export function budgetToken(budget: number): number {
  const i = (BUDGET_BUCKETS as readonly number[]).indexOf(budget);
  if (i < 0) throw new Error(`budget ${budget} is not a bucket (allowed: ${BUDGET_BUCKETS.join(', ')})`);
  return BUDGET_TOKEN_IDS[i];
}
