/**
 * What the page's Warm start will do, read from the applied run config through the same builder
 * the engine uses (sftConfigOf): the teacher, the learning-rate schedule (linear warm-up to the
 * peak, cosine down to a tenth of it), the steps and the tokens per step. And the question it
 * asks before it moves a policy that GRPO trained: supervised steps at a warm-start learning
 * rate (about a hundred times GRPO's) can undo what GRPO learned. Pure.
 */
import { type ProvenanceEvent, counterBreakdown, grpoHistory } from '../../core/io/provenance';
import type { RunConfig, RunConfigKey } from '../../core/runConfig';
import { sftConfigOf } from '../../core/runConfigTargets';
import type { TeacherStyle } from '../../core/tasks';

export interface WarmStartPlan {
  steps: number;
  teacher: TeacherStyle;
  peakLr: number;
  /** The lr the cosine ends at (the schedule's floor). */
  minLr: number;
  /** Linear warm-up steps: the config's, at most a tenth of the steps (each Warm start is one schedule). */
  warmup: number;
  /** The config's warm-up, when the tenth-of-the-steps cap shortened it. */
  warmupAsked: number | null;
  batchTokens: number;
  delegateFraction: number;
  task: string;
  taskOptions: Record<string, unknown>;
}

/** The plan of a Warm start of `steps` steps under `config`; null when the config cannot build one (bad task options). */
export function warmStartPlan(config: RunConfig, steps: number): WarmStartPlan | null {
  let cfg;
  try {
    cfg = sftConfigOf(config, steps);
  } catch {
    return null;
  }
  return {
    steps,
    teacher: cfg.teacher,
    peakLr: cfg.lr,
    minLr: cfg.lr * cfg.minLrFrac,
    warmup: cfg.warmup,
    warmupAsked: cfg.warmup < config.sftWarmup ? config.sftWarmup : null,
    batchTokens: cfg.batchTokens,
    delegateFraction: cfg.delegateFraction,
    task: config.task,
    taskOptions: config.taskOptions,
  };
}

/** A learning rate as the config form writes it, to 3 significant digits (0.003, 0.0003, 2e-7). */
export function lrText(v: number): string {
  return String(Number(v.toPrecision(3)));
}

/** One piece of the plan's line; `field` is the config field that sets it (the panel links there). */
export interface PlanPart {
  id: string;
  text: string;
  field: RunConfigKey | null;
}

export function planParts(p: WarmStartPlan): PlanPart[] {
  const options = Object.keys(p.taskOptions).length > 0 ? ` ${JSON.stringify(p.taskOptions)}` : '';
  const warmup = p.warmupAsked === null ? `warm-up ${p.warmup} steps` : `warm-up ${p.warmup} steps (of ${p.warmupAsked}: at most a tenth of the steps)`;
  return [
    { id: 'teacher', text: `${p.teacher} teacher`, field: 'sftTeacher' },
    { id: 'task', text: `${p.task}${options}`, field: options ? 'taskOptions' : 'task' },
    { id: 'lr', text: `lr ${lrText(p.peakLr)}`, field: 'sftLr' },
    { id: 'warmup', text: warmup, field: 'sftWarmup' },
    { id: 'cosine', text: `cosine to ${lrText(p.minLr)}`, field: null },
    { id: 'steps', text: `${p.steps} steps`, field: null },
    { id: 'tokens', text: `${p.batchTokens} tokens/step`, field: 'sftBatchTokens' },
    { id: 'delegate', text: `${Math.round(p.delegateFraction * 100)}% delegations`, field: 'sftDelegateFraction' },
  ];
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/**
 * The question before a warm start on weights with GRPO behind them (steps in their history, or
 * a loaded checkpoint whose record says GRPO trained it); null when there is none.
 */
export function warmStartQuestion(plan: WarmStartPlan, events: readonly ProvenanceEvent[], grpoLr: number): string | null {
  const history = grpoHistory(events);
  if (history.steps === 0 && history.checkpoints.length === 0) return null;
  const counters = counterBreakdown(events);
  const trained = [
    history.steps > 0 ? plural(history.steps, 'GRPO step') : null,
    history.checkpoints.length > 0 ? `the GRPO training of ${history.checkpoints.join(', ')}` : null,
  ]
    .filter((x) => x !== null)
    .join(' and ');
  const ratio = plan.peakLr / grpoLr;
  const compared = ratio >= 2 ? `, ${Math.round(ratio)}× the GRPO learning rate ${lrText(grpoLr)}` : '';
  return [
    `These weights (policy v${counters.policyVersion}) carry ${trained}.`,
    `Warm start runs ${plural(plan.steps, 'supervised step')} at a learning rate up to ${lrText(plan.peakLr)}${compared}, toward the ${plan.teacher} teacher's demonstrations: it moves a trained policy and can undo what GRPO learned.`,
    `To undo: Reset returns to the loaded checkpoint (v${counters.origin.policyVersion}) and drops every step since; Export weights (Checkpoint panel) first keeps exactly these weights to import again; Keep run (Runs panel) keeps the curves and settings, not the weights.`,
    'Warm start anyway?',
  ].join('\n\n');
}
