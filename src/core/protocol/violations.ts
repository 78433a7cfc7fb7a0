/** Every way a context can break the delegation protocol. Each is counted and shown. */
export const VIOLATIONS = [
  'clone_over_budget', // a clone used its whole budget without finishing its answer block
  'clone_no_answer', // a clone closed its context without a well-formed answer block
  'clone_spawn', // a clone wrote spawn-grammar tokens (depth is 1: clones never spawn)
  'malformed_spawn', // unclosed block, empty subtask, no or disallowed budget, unknown context key, join without spawn
  'too_many_clones', // more spawn blocks in one round than allowed
  'too_many_rounds', // a spawn after the last allowed round
  'root_over_max', // the root generated more than its maximum, or its context is full
  'root_no_answer', // the root closed its context without a well-formed answer block
  'reserved_token', // a context wrote a token only the runtime may write (<ret>, <sep>, …)
] as const;

export type Violation = (typeof VIOLATIONS)[number];

export function emptyViolationCounts(): Record<Violation, number> {
  return Object.fromEntries(VIOLATIONS.map((v) => [v, 0])) as Record<Violation, number>;
}

/** Violations that belong to clones (the rest belong to the root). */
export const CLONE_VIOLATIONS: ReadonlySet<Violation> = new Set(['clone_over_budget', 'clone_no_answer', 'clone_spawn']);
