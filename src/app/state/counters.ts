/**
 * The three counters the page names, each under its own label: GRPO steps, warm-start steps and
 * the policy version, which counts weight updates (one per GRPO step, one per warm-start step
 * whose update was applied). All count from the model's origin, as its provenance records them
 * (core/io/provenance.ts), so the status bar and the curves' x axes read the same numbers. Pure.
 */
import type { CounterBreakdown } from '../../core/io/provenance';

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/**
 * The policy version's tooltip: what it counts and how this one adds up. `shown` is the engine's
 * version; it runs ahead of the recorded steps only while a step's metrics are on their way.
 */
export function policyVersionTitle(b: CounterBreakdown, shown: number = b.policyVersion): string {
  const skipped = b.sftSkipped > 0 ? ` (${plural(b.sftSkipped, 'warm-start step')} skipped: no update)` : '';
  const sum = `v${b.policyVersion} = v${b.origin.policyVersion} at load + ${plural(b.grpoVersions, 'GRPO step')} + ${plural(b.sftVersions, 'applied warm-start step')}${skipped}`;
  const behind = shown !== b.policyVersion ? `\nthe engine is at v${shown}; the rows of its latest steps are on their way` : '';
  return `policy version: one per weight update, i.e. per GRPO step and per warm-start step that was applied.\n${sum}${behind}`;
}

/** The step counters' tooltip: from where they count. */
export function stepsTitle(kind: 'grpo' | 'sft', b: CounterBreakdown): string {
  const at = kind === 'grpo' ? b.origin.grpoSteps : b.origin.sftSteps;
  const what = kind === 'grpo' ? 'GRPO steps (the x axis of the GRPO curves)' : 'warm-start steps (the x axis of the warm-start curve)';
  return `${what} of these weights, counted from their origin${at > 0 ? ` (${at} already at load)` : ''}`;
}
