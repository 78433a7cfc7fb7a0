/**
 * The episodes verl-reward.test.ts checks besides the committed runs' traces: episodes the
 * project's rollout scheduler produces now, steered by a planned decoder (several rounds, gated
 * clones, negative and malformed answers, multihop), and hand-built traces for the corners.
 */
import { cachedEncode } from '../src/core/rollout/traceFixture';
import { parseTracesJsonl, tracesToJsonl } from '../src/core/io/traces';
import { defaultRolloutConfig } from '../src/core/runConfigTargets';
import { type ContextDecoder, RolloutScheduler } from '../src/core/rollout/scheduler';
import { type ContextTrace, type EpisodeTrace, TRACE_SCHEMA, countTokens } from '../src/core/rollout/trace';
import { Rng } from '../src/core/rng';
import { TASKS, isTaskName, type Problem, type Task } from '../src/core/tasks';
import { Tokenizer } from '../src/core/tokenizer/tokenizer';
import { T, VOCAB, VOCAB_SIZE, budgetToken, tokenId } from '../src/core/tokenizer/vocab';

// ---------------------------------------------------------------------------------------------
// Episodes from the rollout scheduler, steered by a planned decoder

const tok = Tokenizer.builtin();
const encode = cachedEncode(tok);
const ids = (text: string) => [...text].map((c) => tokenId(c));
export const textOf = (tokens: readonly number[]) => tokens.map((t) => VOCAB[t]).join('');
const COT_IDS = [...'0123456789+-*=()'].map((c) => tokenId(c));
const chars = (rng: Rng, n: number) => Array.from({ length: n }, () => rng.pick(COT_IDS));

/** Each context writes its plan, one token per step (greedy on a logit spike); past it, `<eos>`. */
class PlannedDecoder implements ContextDecoder {
  readonly vocabSize = VOCAB_SIZE;
  readonly maxPositions = 256;
  private readonly slots = new Map<number, { plan: number[] | null; at: number }>();
  private next = 0;

  constructor(private readonly plan: (prompt: number[]) => number[]) {}

  open(): number {
    this.slots.set(this.next, { plan: null, at: 0 });
    return this.next++;
  }

  close(slot: number): void {
    this.slots.delete(slot);
  }

  async feed(slots: number[], tokens: number[][]): Promise<Float32Array> {
    const out = new Float32Array(slots.length * VOCAB_SIZE);
    slots.forEach((slot, r) => {
      const s = this.slots.get(slot)!;
      s.plan ??= this.plan(tokens[r]);
      out[r * VOCAB_SIZE + (s.at < s.plan.length ? s.plan[s.at++] : T.eos)] = 50;
    });
    return out;
  }
}

/** The end of a root's plan: an answer block with the truth, a near miss, a negative or malformed answer, or no answer at all. */
function rootAnswer(rng: Rng, truth: string, task: string): number[] {
  const t = Number(truth);
  const style = rng.int(0, 19);
  if (style === 0) return [T.eos]; // root_no_answer
  if (style === 1) return [T.ans, T.eos]; // empty answer block
  if (style === 2) return chars(rng, 260); // runs past its maximum
  const text =
    style < 9
      ? truth
      : style < 12
        ? String(t + rng.pick([-1, 1]) * rng.int(1, 30))
        : style < 14
          ? String(-Math.abs(t) - rng.int(0, 9))
          : style === 14
            ? '-0'
            : style === 15
              ? `0${truth}`
              : style === 16
                ? task === 'multihop'
                  ? 'none'
                  : '9'.repeat(rng.int(12, 40))
                : style === 17
                  ? 'x-1'
                  : String(rng.int(0, 999));
  return [T.ans, ...ids(text), T.eos];
}

/** Plans for roots (rounds of spawn blocks, then an answer) and clones (answers, or none until the budget ends). */
function planner(task: string, allowSpawn: boolean, rng: Rng, problems: Map<string, Problem>): (prompt: number[]) => number[] {
  return (prompt) => {
    if (prompt[0] === T.clone) {
      const style = rng.int(0, 19);
      const answer = () => [T.ans, ...ids(rng.pick(['7', '-12', '0', '42', 'none', String(rng.int(0, 500))])), T.eos];
      if (style < 9) return [...chars(rng, rng.int(0, 4)), ...answer()];
      if (style < 13) return chars(rng, 300); // no answer: runs to its budget
      if (style < 15) return [...chars(rng, rng.pick([5, 13, 29])), ...answer()]; // answers on its budget's last token, or runs past it
      if (style < 17) return [...chars(rng, rng.int(10, 40)), ...answer()];
      if (style === 17) return [T.eos]; // clone_no_answer before its budget
      if (style === 18) return [T.spawn]; // clone_spawn
      return [T.ans, T.ans];
    }
    const problem = problems.get(textOf(prompt.slice(1, -1)))!;
    const keys = problem.prompt.match(/\bk\d+\b/g) ?? [];
    const question = / ([a-z]+)\?$/.exec(problem.prompt)?.[1] ?? 'ab';
    const out: number[] = [];
    for (let r = allowSpawn ? rng.pick([0, 0, 1, 1, 1, 2, 2, 3, 3, 4]) : 0; r > 0; r--) {
      for (let k = rng.pick([1, 1, 1, 2, 2, 3, 4, 4, 5]); k > 0; k--) {
        const subtask =
          task === 'multihop'
            ? [T.ctx, ...ids(`${rng.pick(keys)} ${question}?`)]
            : ids(problem.prompt.slice(0, rng.int(1, Math.min(9, problem.prompt.length))));
        out.push(T.spawn, ...subtask, budgetToken(rng.pick([8, 8, 16, 16, 32, 64, 128])));
      }
      out.push(T.join, ...chars(rng, rng.int(0, 3)));
    }
    return [...out, ...chars(rng, rng.bool(0.3) ? rng.int(40, 110) : rng.int(0, 12)), ...rootAnswer(rng, problem.truth, task)];
  };
}

export async function generatedTraces(): Promise<EpisodeTrace[]> {
  const out: EpisodeTrace[] = [];
  const plans: [string, boolean, number][] = [
    ['arithmetic', true, 200],
    ['arithmetic', false, 40],
    ['multihop', true, 80],
    ['multihop', false, 20],
  ];
  for (const [name, allowSpawn, n] of plans) {
    if (!isTaskName(name)) throw new Error(name);
    const task = TASKS[name] as Task<unknown>;
    const rng = new Rng(name.length * 1000 + n);
    const problems = new Map<string, Problem>();
    const cfg = defaultRolloutConfig(task.name, { rootMaxTokens: 224, greedy: true, allowSpawn });
    const scheduler = new RolloutScheduler(new PlannedDecoder(planner(name, allowSpawn, rng.fork(), problems)), cfg, { policyVersion: 0, encode });
    for (let i = 0; i < n; i++) {
      const p = task.generate(rng, task.defaultOptions, `verl-${name}-${allowSpawn ? 'd' : 'm'}-${i}`);
      problems.set(allowSpawn ? p.prompt : (p.monoPrompt ?? p.prompt), p);
      scheduler.addEpisode(task, p, rng.fork());
    }
    out.push(...(await scheduler.run()));
  }
  // The generated traces are what the traces reader accepts.
  return parseTracesJsonl(tracesToJsonl(out));
}

// ---------------------------------------------------------------------------------------------
// Hand-built corners

interface HandClone {
  round: number;
  budget: number;
  generated: number;
  answer: string | null;
}

export function handTrace(
  id: string,
  task: string,
  truth: string,
  answer: string | null,
  rootGenerated: number,
  rounds: number,
  clones: HandClone[],
): EpisodeTrace {
  const one = tokenId('1');
  // The root's generated text: filler that is no number, then its answer block.
  const block = answer === null ? [] : [T.ans, ...ids(answer), T.eos];
  const generated = [...Array<number>(Math.max(0, rootGenerated - block.length)).fill(tokenId('=')), ...block];
  const root: ContextTrace = {
    id: 0,
    role: 'root',
    parent: null,
    round: null,
    subtask: null,
    budget: null,
    tokens: [T.root, one, T.sep, ...generated, ...Array<number>(2 * rounds).fill(T.ret)],
    text: '',
    writers: 'ppp' + 'g'.repeat(generated.length) + 'i'.repeat(2 * rounds),
    logprobs: Array<number>(generated.length).fill(-1),
    generatedTokens: generated.length,
    answer,
    violation: answer === null ? 'root_no_answer' : null,
    violationDetail: null,
  };
  const contexts = [
    root,
    ...clones.map((c, i): ContextTrace => ({
      id: i + 1,
      role: 'clone',
      parent: 0,
      round: c.round,
      subtask: '1',
      budget: c.budget,
      tokens: [T.clone, one, T.sep, ...Array<number>(c.generated).fill(one)],
      text: '',
      writers: 'ppp' + 'g'.repeat(c.generated),
      logprobs: Array<number>(c.generated).fill(-1),
      generatedTokens: c.generated,
      answer: c.answer,
      violation: c.answer === null ? (c.generated >= c.budget ? 'clone_over_budget' : 'clone_no_answer') : null,
      violationDetail: null,
    })),
  ].map((c) => ({ ...c, text: textOf(c.tokens) }));
  const problem: Problem = { task, id, prompt: '1', truth, meta: {} };
  return {
    schema: TRACE_SCHEMA,
    policyVersion: 0,
    task,
    problemId: id,
    prompt: '1',
    truth,
    method: 'delegate',
    answer,
    correct: TASKS[task as 'arithmetic'].verify(problem, answer).correct,
    rounds,
    contexts,
    events: [],
    violations: [],
    tokens: countTokens(contexts),
  };
}

export function handTraces(): EpisodeTrace[] {
  const c = (round: number, budget: number, generated: number, answer: string | null): HandClone => ({ round, budget, generated, answer });
  return [
    handTrace('h-neg0', 'arithmetic', '-12', '-0', 20, 1, [c(0, 16, 16, null), c(0, 16, 15, null), c(0, 8, 8, '3')]),
    handTrace('h-neg0-zero', 'arithmetic', '0', '-0', 70, 0, []),
    handTrace('h-zero', 'arithmetic', '0', '0', 65, 0, []),
    handTrace('h-inf', 'arithmetic', '5', '9'.repeat(310), 30, 0, []),
    handTrace('h-neginf', 'arithmetic', '-5', '-' + '9'.repeat(310), 30, 0, []),
    handTrace('h-1e40', 'arithmetic', '5', '9'.repeat(40), 30, 0, []),
    handTrace('h-lead0', 'arithmetic', '7', '007', 10, 0, []),
    handTrace('h-none', 'arithmetic', '7', null, 224, 2, [c(0, 128, 128, null), c(1, 64, 40, '3')]),
    handTrace('h-neg-near', 'arithmetic', '-2', '-3', 64, 3, [c(0, 32, 33 - 1, '1'), c(1, 64, 64, null), c(2, 128, 100, '-7'), c(2, 8, 1, null)]),
    handTrace('h-mh-ok', 'multihop', '42', '42', 90, 2, [c(0, 8, 3, 'none'), c(0, 8, 8, null), c(1, 16, 4, '42')]),
    handTrace('h-mh-near', 'multihop', '42', '41', 90, 2, [c(0, 8, 3, 'qx'), c(1, 16, 16, null)]),
    handTrace('h-mh-none', 'multihop', '42', 'none', 20, 1, [c(0, 8, 3, 'none')]),
    // Past its budget (verl may let a clone run past the budget it was asked for): no negative unused budget.
    handTrace('h-past-budget', 'arithmetic', '9', '9', 12, 1, [c(0, 16, 20, '9'), c(0, 8, 2, '9')]),
    handTrace('h-mh-lead0', 'multihop', '7', '07', 20, 0, []),
    handTrace('h-mh-neg', 'multihop', '7', '-7', 20, 0, []),
    handTrace('h-mh-noans', 'multihop', '7', null, 5, 0, []),
  ];
}
