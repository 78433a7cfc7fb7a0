/**
 * Which kept rollouts the table shows: a filter over the episodes (outcome, gating, violation
 * class, delegation), the count line that says what is shown of what is kept, and each
 * episode's marks (gated contexts apart from ungated violations). Pure; RolloutTable renders.
 */
import { VIOLATIONS, type Violation } from '../../core/protocol/violations';
import type { EpisodeTrace } from '../../core/rollout/trace';

export const BASIC_FILTERS = ['all', 'correct', 'wrong', 'gated', 'violation', 'delegating'] as const;
export type RolloutFilter = (typeof BASIC_FILTERS)[number] | `violation:${Violation}`;

export const FILTER_HELP: Record<(typeof BASIC_FILTERS)[number], string> = {
  all: 'every kept rollout',
  correct: 'the root answered exactly',
  wrong: 'the root answered wrong, or not at all',
  gated: 'at least one clone gated (no answer and over the gate length: r_clone = 0, no policy-gradient term)',
  violation: 'at least one protocol violation (gated or not)',
  delegating: 'the root spawned at least one clone',
};

export function isRolloutFilter(v: string): v is RolloutFilter {
  return (
    (BASIC_FILTERS as readonly string[]).includes(v) || (v.startsWith('violation:') && (VIOLATIONS as readonly string[]).includes(v.slice('violation:'.length)))
  );
}

export function matches(trace: EpisodeTrace, filter: RolloutFilter): boolean {
  switch (filter) {
    case 'all':
      return true;
    case 'correct':
      return trace.correct;
    case 'wrong':
      return !trace.correct;
    case 'gated':
      return trace.contexts.some((c) => c.credit?.gated === true);
    case 'violation':
      return trace.violations.length > 0;
    case 'delegating':
      return trace.contexts.some((c) => c.role === 'clone');
    default: {
      const v = filter.slice('violation:'.length);
      return trace.violations.some((x) => x.violation === v);
    }
  }
}

/** The episodes that pass, in their order, and at most `limit` of them to show. */
export function filterRollouts<T extends { trace: EpisodeTrace }>(rows: readonly T[], filter: RolloutFilter, limit: number): { matching: number; shown: T[] } {
  const pass = rows.filter((r) => matches(r.trace, filter));
  return { matching: pass.length, shown: pass.slice(0, limit) };
}

/** The violation classes that occur in the kept rollouts, in the table's order (for the filter's options). */
export function violationClassesOf(rows: readonly { trace: EpisodeTrace }[]): Violation[] {
  const seen = new Set(rows.flatMap((r) => r.trace.violations.map((v) => v.violation)));
  return VIOLATIONS.filter((v) => seen.has(v));
}

/** "60 shown of 143 wrong · 200 kept, newest first" (what is shown, what matches, what is kept). */
export function countLine(shown: number, matching: number, kept: number, filter: RolloutFilter): string {
  if (kept === 0) return 'none yet: train or step';
  const what = filter === 'violation' ? ' with a violation' : filter.startsWith('violation:') ? ` with ${filter.slice('violation:'.length)}` : ` ${filter}`;
  const of = filter === 'all' ? (shown === kept ? `all ${kept}` : `${shown} of ${kept}`) : `${shown} of ${matching}${what}`;
  return `showing ${of}${filter === 'all' ? '' : ` · ${kept} kept`}, newest first`;
}

export interface ViolationMark {
  violation: Violation;
  context: number;
  detail: string;
  /** The context was gated: it carries no policy-gradient term (r_clone = 0). */
  gated: boolean;
}

/** Each violation of the episode with whether its context was gated, plus gated contexts without one. */
export function episodeMarks(trace: EpisodeTrace): { violations: ViolationMark[]; gatedWithoutViolation: number[] } {
  const gated = new Set(trace.contexts.filter((c) => c.credit?.gated === true).map((c) => c.id));
  const violations = trace.violations.map((v) => ({ ...v, gated: gated.has(v.context) }));
  const withViolation = new Set(trace.violations.map((v) => v.context));
  return { violations, gatedWithoutViolation: [...gated].filter((id) => !withViolation.has(id)) };
}

export interface MarkBadge {
  kind: 'gated' | 'violation';
  /** "gated", or the violation class. */
  text: string;
  count: number;
  /** One line per context: "#3 clone_no_answer: no answer block". */
  details: string[];
}

/**
 * The table's badges: one "gated" badge for all gated contexts (whatever their violation), one
 * per class of ungated violation, each with its count, so that a row stays one or two badges wide.
 */
export function markBadges(trace: EpisodeTrace): MarkBadge[] {
  const { violations, gatedWithoutViolation } = episodeMarks(trace);
  const gatedDetails = [
    ...violations.filter((v) => v.gated).map((v) => `#${v.context} ${v.violation}: ${v.detail}`),
    ...gatedWithoutViolation.map((id) => `#${id}`),
  ];
  const gatedContexts = new Set([...violations.filter((v) => v.gated).map((v) => v.context), ...gatedWithoutViolation]);
  const out: MarkBadge[] = [];
  for (const cls of VIOLATIONS) {
    const of = violations.filter((v) => !v.gated && v.violation === cls);
    if (of.length > 0) out.push({ kind: 'violation', text: cls, count: of.length, details: of.map((v) => `#${v.context} ${v.violation}: ${v.detail}`) });
  }
  if (gatedContexts.size > 0) out.push({ kind: 'gated', text: 'gated', count: gatedContexts.size, details: gatedDetails });
  return out;
}
