/**
 * The verl reward file (src/cli/verl/selfcest_reward.py) gives the project's reward.
 *
 * Episodes: the traces committed under runs/ (each under its run's reward and gating config),
 * episodes the project's rollout scheduler produces now (a planned decoder steers it into
 * several rounds, gated clones, negative and malformed answers, multihop; each under three
 * configs), and hand-built traces for the corners (`-0`, answers past the largest double, no
 * answer, a clone without answer at its budget). For each: the TypeScript reward (episodeReward
 * with the task's verify) and r_clone (R, or 0 when isGated); the trace turned into verl's
 * inputs; test/python/verl_reward_check.py calls the exported file (rewardPythonSource, per
 * config) and every reward, part and clone reward must equal the TypeScript one within 1e-9.
 *
 * Only committed files are read (git ls-files). Skipped, with a message, without python3.
 */
import { cachedEncode } from '../src/core/rollout/traceFixture';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { rewardPythonSource, type VerlRewardConfig, withRewardConfig } from '../src/cli/verl/rewardFile';
import { parseTracesJsonl, tracesToJsonl } from '../src/core/io/traces';
import { ADVANTAGE_DEFAULTS, type AdvantageConfig, isGated } from '../src/core/rl/advantage';
import { REWARD_DEFAULTS, type RewardBreakdown, type RewardConfig, episodeReward, validateRewardConfig } from '../src/core/rl/reward';
import { ROLLOUT_DEFAULTS, validateRolloutConfig } from '../src/core/rollout/config';
import { type ContextDecoder, RolloutScheduler } from '../src/core/rollout/scheduler';
import { type ContextTrace, type EpisodeTrace, TRACE_SCHEMA, countTokens } from '../src/core/rollout/trace';
import { Rng } from '../src/core/rng';
import { TASKS, isTaskName, type Problem, type Task } from '../src/core/tasks';
import { Tokenizer } from '../src/core/tokenizer/tokenizer';
import { BUDGET_BUCKETS, T, VOCAB, VOCAB_SIZE, budgetToken, tokenId } from '../src/core/tokenizer/vocab';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const HARNESS = fileURLToPath(new URL('./python/verl_reward_check.py', import.meta.url));
const PYTHON = ['/usr/bin/python3', 'python3'].find((p) => spawnSync(p, ['--version']).status === 0);
const TOLERANCE = 1e-9;

/** What one check needs besides the trace: the reward, the gate, and the fallback clone budget. */
interface Settings {
  name: string;
  reward: RewardConfig;
  advantage: AdvantageConfig;
  cloneMaxTokens: number;
}

const verlConfig = (task: string, s: Settings): VerlRewardConfig => ({
  task,
  reward: s.reward,
  gating: s.advantage.gating,
  gateMode: s.advantage.gateMode,
  cloneMaxTokens: s.cloneMaxTokens,
});

// ---------------------------------------------------------------------------------------------
// The committed traces and their runs' configs

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' });

function runSettings(dir: string): Settings {
  const tracked = git('ls-files', '--', `${dir}/run.json`, `${dir}/state.json`).split('\n').filter(Boolean);
  const file = [`${dir}/run.json`, `${dir}/state.json`].find((f) => tracked.includes(f));
  if (file === undefined) throw new Error(`${dir}: no committed run.json or state.json to read the run's config from`);
  const config = (JSON.parse(readFileSync(join(ROOT, file), 'utf8')) as { config: { reward?: Partial<RewardConfig>; advantage?: Partial<AdvantageConfig>; rollout?: { budgets?: number[] } } }).config;
  const r = validateRewardConfig(config.reward ?? {});
  // Only RewardConfig's fields (older runs also carry a since-removed cloneFormatPenalty).
  const reward: RewardConfig = {
    rootTau: r.rootTau, rootRho: r.rootRho, rootPmax: r.rootPmax, cloneTau: r.cloneTau, cloneRho: r.cloneRho, clonePmax: r.clonePmax,
    callRate: r.callRate, callFree: r.callFree, budgetRate: r.budgetRate, partialCredit: r.partialCredit,
  };
  return { name: dir, reward, advantage: { ...ADVANTAGE_DEFAULTS, ...config.advantage }, cloneMaxTokens: Math.max(...(config.rollout?.budgets ?? BUDGET_BUCKETS)) };
}

function committedRuns(): { dir: string; settings: Settings; traces: EpisodeTrace[] }[] {
  return git('ls-files', '--', 'runs/**/traces.sample.jsonl')
    .split('\n')
    .filter(Boolean)
    .map((file) => {
      const dir = dirname(file);
      return { dir, settings: runSettings(dir), traces: parseTracesJsonl(readFileSync(join(ROOT, file), 'utf8')) };
    });
}

// ---------------------------------------------------------------------------------------------
// Episodes from the rollout scheduler, steered by a planned decoder

const tok = Tokenizer.builtin();
const encode = cachedEncode(tok);
const ids = (text: string) => [...text].map((c) => tokenId(c));
const textOf = (tokens: readonly number[]) => tokens.map((t) => VOCAB[t]).join('');
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
    style < 9 ? truth
    : style < 12 ? String(t + rng.pick([-1, 1]) * rng.int(1, 30))
    : style < 14 ? String(-Math.abs(t) - rng.int(0, 9))
    : style === 14 ? '-0'
    : style === 15 ? `0${truth}`
    : style === 16 ? (task === 'multihop' ? 'none' : '9'.repeat(rng.int(12, 40)))
    : style === 17 ? 'x-1'
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
        const subtask = task === 'multihop' ? [T.ctx, ...ids(`${rng.pick(keys)} ${question}?`)] : ids(problem.prompt.slice(0, rng.int(1, Math.min(9, problem.prompt.length))));
        out.push(T.spawn, ...subtask, budgetToken(rng.pick([8, 8, 16, 16, 32, 64, 128])));
      }
      out.push(T.join, ...chars(rng, rng.int(0, 3)));
    }
    return [...out, ...chars(rng, rng.bool(0.3) ? rng.int(40, 110) : rng.int(0, 12)), ...rootAnswer(rng, problem.truth, task)];
  };
}

async function generatedTraces(): Promise<EpisodeTrace[]> {
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
    const cfg = validateRolloutConfig({ ...ROLLOUT_DEFAULTS, ...task.rolloutDefaults, greedy: true, allowSpawn });
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

function handTrace(id: string, task: string, truth: string, answer: string | null, rootGenerated: number, rounds: number, clones: HandClone[]): EpisodeTrace {
  const one = tokenId('1');
  // The root's generated text: filler that is no number, then its answer block.
  const block = answer === null ? [] : [T.ans, ...ids(answer), T.eos];
  const generated = [...Array<number>(Math.max(0, rootGenerated - block.length)).fill(tokenId('=')), ...block];
  const root: ContextTrace = {
    id: 0, role: 'root', parent: null, round: null, subtask: null, budget: null,
    tokens: [T.root, one, T.sep, ...generated, ...Array<number>(2 * rounds).fill(T.ret)],
    text: '', writers: 'ppp' + 'g'.repeat(generated.length) + 'i'.repeat(2 * rounds),
    logprobs: Array<number>(generated.length).fill(-1), generatedTokens: generated.length, answer, violation: answer === null ? 'root_no_answer' : null, violationDetail: null,
  };
  const contexts = [root, ...clones.map((c, i): ContextTrace => ({
    id: i + 1, role: 'clone', parent: 0, round: c.round, subtask: '1', budget: c.budget,
    tokens: [T.clone, one, T.sep, ...Array<number>(c.generated).fill(one)], text: '', writers: 'ppp' + 'g'.repeat(c.generated),
    logprobs: Array<number>(c.generated).fill(-1), generatedTokens: c.generated, answer: c.answer,
    violation: c.answer === null ? (c.generated >= c.budget ? 'clone_over_budget' : 'clone_no_answer') : null, violationDetail: null,
  }))].map((c) => ({ ...c, text: textOf(c.tokens) }));
  const problem: Problem = { task, id, prompt: '1', truth, meta: {} };
  return {
    schema: TRACE_SCHEMA, policyVersion: 0, task, problemId: id, prompt: '1', truth, method: 'delegate', answer,
    correct: TASKS[task as 'arithmetic'].verify(problem, answer).correct, rounds, contexts, events: [], violations: [], tokens: countTokens(contexts),
  };
}

function handTraces(): EpisodeTrace[] {
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

// ---------------------------------------------------------------------------------------------
// verl's inputs for a trace, and the TypeScript reward

interface Case {
  id: string;
  module: string;
  fn: 'clone_accuracy_reward' | 'compute_score';
  args: Record<string, unknown>;
  expected: { breakdown: RewardBreakdown; clones: Record<string, number> };
  /** What the episode exercises (traceKinds), for messages. */
  kinds: string[];
  /** How its verl inputs were written (the variants of cloneCase and scoreCases). */
  inputs: string[];
}

const problemOf = (t: EpisodeTrace): Problem => ({ task: t.task, id: t.problemId, prompt: t.prompt, truth: t.truth, meta: {} });

function tsReward(t: EpisodeTrace, s: Settings): { breakdown: RewardBreakdown; clones: Record<string, number> } {
  if (!isTaskName(t.task)) throw new Error(`unknown task ${t.task}`);
  const verdict = (TASKS[t.task] as Task<unknown>).verify(problemOf(t), t.answer);
  expect(verdict.correct, `${t.problemId}: the trace's correct is its verdict's`).toBe(t.correct);
  const breakdown = episodeReward(t, verdict, s.reward);
  const clones: Record<string, number> = {};
  for (const c of t.contexts.slice(1)) clones[requestId(t, c)] = isGated(c, s.advantage) ? 0 : breakdown.reward;
  return { breakdown, clones };
}

const requestId = (t: EpisodeTrace, c: ContextTrace) => `${t.problemId}/${t.policyVersion}/c${c.id}`;
const generatedText = (c: ContextTrace) => textOf(c.tokens.filter((_, i) => c.writers[i] === 'g'));

/**
 * The trace as verl hands it over. `variant` varies what verl may send: the ground truth as a
 * string, a one-element list or an int; clone texts with `Answer:` or in playground tokens;
 * root_text given or not (calls then counted from the clones' rounds).
 */
function cloneCase(id: string, module: string, t: EpisodeTrace, s: Settings, variant: number, kinds: string[]): Case {
  const [root, ...clones] = t.contexts;
  const cloneRounds = new Set(clones.map((c) => c.round)).size;
  const noRootText = variant % 3 === 0 && cloneRounds === t.rounds;
  const truth = variant % 4 === 1 ? [t.truth] : variant % 4 === 2 && /^-?\d{1,15}$/.test(t.truth) && String(Number(t.truth)) === t.truth ? Number(t.truth) : t.truth;
  const playgroundTexts = variant % 2 === 1;
  let budgetFallbacks = 0;
  const args = {
    root_answer: t.answer === null ? null : `Answer: ${t.answer}`,
    root_output: {
      response_mask: [...root.writers].filter((w) => w !== 'p').map((w) => (w === 'g' ? 1 : 0)),
      prompt_ids: root.tokens.filter((_, i) => root.writers[i] === 'p'),
      extra_fields: { reward_model: { ground_truth: truth, style: 'rule' }, data_source: `selfcest/${t.task}`, extra_info: { problem_id: t.problemId } },
    },
    clone_rollouts: clones.map((c) => {
      // Without a budget field the file takes cloneMaxTokens: drop it where they agree.
      const fallback = c.budget === s.cloneMaxTokens && variant % 2 === 0;
      if (fallback) budgetFallbacks++;
      return {
        response_mask: Array<number>(c.generatedTokens).fill(1),
        extra_fields: { request_id: requestId(t, c), clone_label: `turn${c.round}`, ...(fallback ? {} : { budget: c.budget }), violation: c.violation },
      };
    }),
    root_text: noRootText ? null : `${'<tool_call>{"name": "spawn"}</tool_call>\n'.repeat(t.rounds)}Answer: ${t.answer ?? ''}`,
    clone_texts: Object.fromEntries(
      clones.map((c) => [requestId(t, c), playgroundTexts ? generatedText(c) : c.answer === null ? `clone ${c.id} stopped` : `thinking\nAnswer: ${c.answer}`]),
    ),
  };
  const more = [noRootText ? 'calls from clone rounds' : 'calls from root_text', playgroundTexts ? 'clone texts in playground tokens' : 'clone texts with Answer:'];
  if (budgetFallbacks > 0) more.push('clone budget from cloneMaxTokens');
  if (typeof truth !== 'string') more.push(Array.isArray(truth) ? 'ground truth as [string]' : 'ground truth as int');
  return { id, module, fn: 'clone_accuracy_reward', args, expected: tsReward(t, s), kinds, inputs: more };
}

/** A trace without clones through compute_score: `Answer:` with the token count given, or the root's playground text. */
function scoreCases(id: string, module: string, t: EpisodeTrace, s: Settings, kinds: string[]): Case[] {
  const expected = tsReward(t, s);
  const root = t.contexts[0];
  return [
    { id: `${id}/answer`, module, fn: 'compute_score', kinds, inputs: ['Answer: with response_tokens'], expected,
      args: { data_source: `selfcest/${t.task}`, solution_str: t.answer === null ? '' : `Answer: ${t.answer}`, ground_truth: t.truth, extra_info: { response_tokens: root.generatedTokens } } },
    { id: `${id}/text`, module, fn: 'compute_score', kinds, inputs: ['playground text, tokens counted'], expected,
      args: { data_source: `selfcest/${t.task}`, solution_str: generatedText(root), ground_truth: t.truth, extra_info: null } },
  ];
}

/** The kinds of episode a trace exercises under `s`, for the count the test prints. */
function traceKinds(source: string, t: EpisodeTrace, s: Settings): string[] {
  const { breakdown } = tsReward(t, s);
  const k = [source, `task ${t.task}`];
  if (t.contexts.length === 1) k.push('no clones');
  if (t.rounds > 1) k.push('rounds > 1');
  if (t.contexts.some((c) => c.role === 'clone' && isGated(c, s.advantage))) k.push('gated clones');
  if (breakdown.score > 0 && breakdown.score < 1) k.push('partial credit');
  if (t.answer === null) k.push('no answer');
  else if (t.answer.startsWith('-')) k.push('negative answer');
  if (t.answer === '-0') k.push('answer -0');
  if (t.correct) k.push('correct');
  if (breakdown.rootPenalty > 0) k.push('root penalty');
  if (breakdown.clonePenalty > 0) k.push('clone penalty');
  if (breakdown.callPenalty > 0) k.push('call penalty');
  if (breakdown.budgetPenalty > 0) k.push('budget penalty');
  if (t.contexts.some((c) => c.role === 'clone' && c.answer !== null && c.generatedTokens === c.budget)) k.push('clone answered on its last budget token');
  return k;
}

// ---------------------------------------------------------------------------------------------

const GENERATED_SETTINGS: Settings[] = [
  { name: 'defaults', reward: REWARD_DEFAULTS, advantage: ADVANTAGE_DEFAULTS, cloneMaxTokens: 128 },
  {
    name: 'protocol gate, budget cost, no partial credit',
    reward: { ...REWARD_DEFAULTS, rootTau: 40, rootRho: 30, cloneTau: 8, cloneRho: 16, callRate: 0.15, callFree: 0, budgetRate: 0.004, partialCredit: false },
    advantage: { ...ADVANTAGE_DEFAULTS, gateMode: 'protocol' },
    cloneMaxTokens: 16,
  },
  {
    name: 'gating off, steep penalties',
    reward: { ...REWARD_DEFAULTS, rootTau: 20, rootRho: 10, rootPmax: 0.5, cloneTau: 4, cloneRho: 7, clonePmax: 0.35, callRate: 0.3, callFree: 0.1, budgetRate: 0.01 },
    advantage: { ...ADVANTAGE_DEFAULTS, gating: false },
    cloneMaxTokens: 8,
  },
];

const tmp = mkdtempSync(join(tmpdir(), 'verl-reward-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Writes the reward file for (task, settings) once; returns its module name. */
const modules = new Map<string, string>();
function moduleFor(task: string, s: Settings): string {
  const cfg = verlConfig(task, s);
  const key = JSON.stringify(cfg);
  let name = modules.get(key);
  if (name === undefined) {
    name = `m${modules.size}`;
    writeFileSync(join(tmp, `${name}.py`), rewardPythonSource(cfg));
    modules.set(key, name);
  }
  return name;
}

function runHarness(cases: Case[]): Record<string, Record<string, unknown>> {
  const file = join(tmp, 'cases.json');
  const moduleFiles = Object.fromEntries([...modules.values()].map((m) => [m, join(tmp, `${m}.py`)]));
  writeFileSync(file, JSON.stringify({ modules: moduleFiles, cases: cases.map(({ id, module, fn, args }) => ({ id, module, fn, args })) }));
  const run = spawnSync(PYTHON!, [HARNESS, file], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  if (run.status !== 0) throw new Error(`verl_reward_check.py failed (${run.status}): ${run.stderr}`);
  return (JSON.parse(run.stdout) as { results: Record<string, Record<string, unknown>> }).results;
}

if (PYTHON === undefined) console.warn('test/verl-reward.test.ts: skipped, no python3 (/usr/bin/python3 or python3 on PATH) to run the verl reward file');

describe.skipIf(PYTHON === undefined)('verl reward file (selfcest_reward.py)', () => {
  it('writes the run config into the CONFIG block and refuses a source without one', () => {
    const src = rewardPythonSource(verlConfig('multihop', GENERATED_SETTINGS[1]));
    expect(src).toContain('    "task": "multihop",\n');
    expect(src).toContain('    "budgetRate": 0.004,\n');
    expect(src).toContain('    "partialCredit": False,\n');
    expect(src).toContain('    "gateMode": "protocol",\n');
    expect(src).toContain('    "cloneMaxTokens": 16,\n}\n# --- end CONFIG ---');
    expect(src.match(/^CONFIG = \{/gm)).toHaveLength(1);
    const file = join(tmp, 'config_probe.py');
    writeFileSync(file, src);
    const probe = spawnSync(PYTHON!, ['-c', 'import importlib.util, json, sys\ns = importlib.util.spec_from_file_location("p", sys.argv[1]); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); print(json.dumps(m.CONFIG))', file], { encoding: 'utf8' });
    expect(probe.stderr).toBe('');
    expect(JSON.parse(probe.stdout)).toEqual({ task: 'multihop', ...GENERATED_SETTINGS[1].reward, gating: true, gateMode: 'protocol', cloneMaxTokens: 16 });
    expect(() => withRewardConfig('CONFIG = {}\n', verlConfig('arithmetic', GENERATED_SETTINGS[0]))).toThrow(/CONFIG block between the lines/);
    expect(() => rewardPythonSource({ ...verlConfig('arithmetic', GENERATED_SETTINGS[0]), gateMode: 'strict' as 'protocol' })).toThrow(/gateMode/);
    expect(() => rewardPythonSource({ ...verlConfig('arithmetic', GENERATED_SETTINGS[0]), cloneMaxTokens: 0 })).toThrow(/cloneMaxTokens/);
    expect(() => rewardPythonSource({ ...verlConfig('countdown', GENERATED_SETTINGS[0]) })).toThrow(/task must be one of/);
    expect(() => rewardPythonSource({ ...verlConfig('arithmetic', GENERATED_SETTINGS[0]), reward: { ...REWARD_DEFAULTS, rootRho: 0 } })).toThrow(/rootRho/);
  });

  it('gives the TypeScript reward and clone rewards on committed, generated and hand-built traces', async () => {
    const cases: Case[] = [];
    const episodes = new Map<string, number>();
    const add = (source: string, t: EpisodeTrace, s: Settings, n: number) => {
      const module = moduleFor(t.task, s);
      const kinds = traceKinds(source, t, s);
      for (const k of kinds) episodes.set(k, (episodes.get(k) ?? 0) + 1);
      const id = `${source}/${s.name}/${n}`;
      cases.push(cloneCase(id, module, t, s, n, kinds));
      if (t.contexts.length === 1) cases.push(...scoreCases(id, module, t, s, kinds));
    };
    const runs = committedRuns();
    expect(runs.length).toBeGreaterThan(0);
    let n = 0;
    for (const run of runs) for (const t of run.traces) add('committed', t, run.settings, n++);
    for (const t of await generatedTraces()) for (const s of GENERATED_SETTINGS) add('generated', t, s, n++);
    for (const t of handTraces()) for (const s of GENERATED_SETTINGS) add('hand-built', t, s, n++);

    const results = runHarness(cases);
    const checks = new Map<string, number>();
    let worst = 0;
    for (const c of cases) {
      const py = results[c.id];
      const { breakdown, clones } = c.expected;
      const parts: [string, number][] = [
        ['reward', breakdown.reward], ['score', breakdown.reward], ['answer_score', breakdown.score], ['root_penalty', breakdown.rootPenalty],
        ['clone_penalty', breakdown.clonePenalty], ['call_penalty', breakdown.callPenalty], ['budget_penalty', breakdown.budgetPenalty],
      ];
      if (c.fn === 'clone_accuracy_reward') {
        const pyClones = py.clone_rewards as Record<string, number>;
        expect(Object.keys(pyClones).sort(), c.id).toEqual(Object.keys(clones).sort());
        for (const [rid, r] of Object.entries(clones)) parts.push([`clone_rewards[${rid}]`, r]);
        for (const [rid, r] of Object.entries(pyClones)) (py as Record<string, number>)[`clone_rewards[${rid}]`] = r;
      }
      for (const [field, want] of parts) {
        const got = (py as Record<string, number>)[field];
        const diff = Math.abs(got - want);
        worst = Math.max(worst, diff);
        if (!(diff <= TOLERANCE)) expect.fail(`${c.id} (${c.kinds.join(', ')}): ${field} is ${got} in Python, ${want} in TypeScript`);
      }
      for (const k of [c.fn, ...c.inputs.map((i) => `${c.fn}: ${i}`)]) checks.set(k, (checks.get(k) ?? 0) + 1);
    }
    const table = (m: Map<string, number>) => [...m].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `  ${k}: ${v}`).join('\n');
    console.log(
      `verl reward: ${cases.length} calls agree with TypeScript, largest difference ${worst}\n` +
        `episodes checked (trace × config), by kind:\n${table(episodes)}\ncalls, by how the inputs were written:\n${table(checks)}`,
    );
    for (const kind of ['committed', 'generated', 'hand-built', 'rounds > 1', 'gated clones', 'partial credit', 'negative answer', 'no answer', 'answer -0', 'task multihop', 'no clones', 'budget penalty', 'clone answered on its last budget token']) {
      expect(episodes.get(kind) ?? 0, kind).toBeGreaterThan(0);
    }
    for (const input of ['clone budget from cloneMaxTokens', 'calls from clone rounds', 'clone texts in playground tokens', 'ground truth as int']) {
      expect(checks.get(`clone_accuracy_reward: ${input}`) ?? 0, input).toBeGreaterThan(0);
    }
    expect(checks.get('compute_score: playground text, tokens counted') ?? 0).toBeGreaterThan(0);
  });

  it('strips the answer as verl text is stripped (a playground answer with edge spaces is the one text that scores differently)', () => {
    const t = handTrace('h-space', 'arithmetic', '7', ' 7', 10, 0, []);
    const s = GENERATED_SETTINGS[0];
    const module = moduleFor('arithmetic', s);
    const c = cloneCase('space', module, t, s, 1, []);
    expect(c.expected.breakdown.score).toBe(0); // the playground: ' 7' is not the integer text 7
    expect(runHarness([c]).space.answer_score).toBe(1); // verl: 'Answer:  7' → '7'
  });
});
