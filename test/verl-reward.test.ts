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
 * Only committed files are read (git ls-files). Skipped, with a message, without python3. The
 * generated and hand-built episodes are in verlRewardEpisodes.ts.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { rewardPythonSource, type VerlRewardConfig, withRewardConfig } from '../src/cli/verl/rewardFile';
import { parseTracesJsonl } from '../src/core/io/traces';
import { type AdvantageConfig, isGated } from '../src/core/rl/advantage';
import { type RewardBreakdown, type RewardConfig, episodeReward } from '../src/core/rl/reward';
import { checkRewardConfig } from '../src/core/runConfigTargets';
import type { ContextTrace, EpisodeTrace } from '../src/core/rollout/trace';
import { TASKS, isTaskName, type Problem, type Task } from '../src/core/tasks';
import { BUDGET_BUCKETS } from '../src/core/tokenizer/vocab';
import { generatedTraces, handTrace, handTraces, textOf } from './verlRewardEpisodes';
import { defaultGrpoConfig } from '../src/core/runConfigTargets';
import { rewardAt } from '../src/core/rl/grpoStep';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();
const TABLE_REWARD = rewardAt(TABLE_GRPO, 0);

/** tool_agent_loop.py's final-answer markers when the config names none (_load_clone_runtime_config). */
const VERL_LOOP_DEFAULT_MARKERS = ['</think>', 'Final Answer:', 'final answer:', 'Answer:', 'Result:', 'OUTPUT:'];

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
  const config = (
    JSON.parse(readFileSync(join(ROOT, file), 'utf8')) as {
      config: { reward?: Partial<RewardConfig>; advantage?: Partial<AdvantageConfig>; rollout?: { budgets?: number[] } };
    }
  ).config;
  // Fields an older run did not record (budgetRate, tokenRate) were off then, as the table has them at a first step.
  const r = checkRewardConfig(config.reward ?? {}, TABLE_REWARD);
  // Only RewardConfig's fields (older runs also carry a since-removed cloneFormatPenalty).
  const reward: RewardConfig = {
    rootTau: r.rootTau,
    rootRho: r.rootRho,
    rootPmax: r.rootPmax,
    cloneTau: r.cloneTau,
    cloneRho: r.cloneRho,
    clonePmax: r.clonePmax,
    callRate: r.callRate,
    callFree: r.callFree,
    budgetRate: r.budgetRate,
    tokenRate: r.tokenRate,
    partialCredit: r.partialCredit,
  };
  return {
    name: dir,
    reward,
    advantage: { ...TABLE_GRPO.advantage, ...config.advantage },
    cloneMaxTokens: Math.max(...(config.rollout?.budgets ?? BUDGET_BUCKETS)),
  };
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
/** What a context wrote: its subword pieces for a real model's trace, else the toy tokens as text. */
const generatedText = (c: ContextTrace) =>
  c.pieces !== undefined ? c.pieces.filter((_, i) => c.writers[i] === 'g').join('') : textOf(c.tokens.filter((_, i) => c.writers[i] === 'g'));

/**
 * The trace as verl's tool agent loop hands it over (_assign_rewards): the root's masked text
 * (root_answer is derived from it in the harness, as the loop derives it), its outputs with
 * response ids, masks and extra fields, clone texts by request_id. `variant` varies what the loop
 * may send: the ground truth as a string, a one-element list or an int; clone texts with
 * `Answer:` or in playground tokens; the config's markers or the loop's default ones.
 */
function cloneCase(id: string, module: string, t: EpisodeTrace, s: Settings, variant: number, kinds: string[]): Case {
  const [root, ...clones] = t.contexts;
  const truth =
    variant % 4 === 1 ? [t.truth] : variant % 4 === 2 && /^-?\d{1,15}$/.test(t.truth) && String(Number(t.truth)) === t.truth ? Number(t.truth) : t.truth;
  const playgroundTexts = variant % 2 === 1;
  let budgetFallbacks = 0;
  const rootId = `${t.problemId}/${t.policyVersion}/root`;
  // What the root wrote, masked as the loop masks it (tool responses left out): its spawn calls and its answer line.
  const rootText = `${'<tool_call>{"name": "spawn_clone", "arguments": {"objectives": ["…"]}}</tool_call>\n'.repeat(t.rounds)}Answer: ${t.answer ?? ''}`;
  const args = {
    // The harness derives root_answer from this as the loop does (_strip_thinking).
    loop_text: rootText,
    markers: variant % 5 === 4 ? VERL_LOOP_DEFAULT_MARKERS : ['Answer:'],
    root_output: {
      response_ids: [...root.tokens.filter((_, i) => root.writers[i] !== 'p')],
      response_mask: [...root.writers].filter((w) => w !== 'p').map((w) => (w === 'g' ? 1 : 0)),
      prompt_ids: root.tokens.filter((_, i) => root.writers[i] === 'p'),
      extra_fields: {
        request_id: rootId,
        parent_request_id: null,
        actor_role: 'root',
        clone_depth: 0,
        reward_model: { ground_truth: truth, style: 'rule' },
        data_source: `selfcest/${t.task}`,
        extra_info: { problem_id: t.problemId },
      },
    },
    clone_rollouts: clones.map((c) => {
      // Without a budget field the file takes cloneMaxTokens: drop it where they agree.
      const fallback = c.budget === s.cloneMaxTokens && variant % 2 === 0;
      if (fallback) budgetFallbacks++;
      return {
        response_ids: c.tokens.filter((_, i) => c.writers[i] === 'g'),
        response_mask: Array<number>(c.generatedTokens).fill(1),
        extra_fields: {
          request_id: requestId(t, c),
          parent_request_id: rootId,
          actor_role: 'clone',
          clone_depth: 1,
          clone_label: `turn${c.round}_clone${c.id}`,
          ...(fallback ? {} : { budget: c.budget }),
          violation: c.violation,
        },
      };
    }),
    root_text: rootText,
    clone_texts: Object.fromEntries(
      clones.map((c) => [requestId(t, c), playgroundTexts ? generatedText(c) : c.answer === null ? `clone ${c.id} stopped` : `thinking\nAnswer: ${c.answer}`]),
    ),
  };
  const more = [
    args.markers.length > 1 ? "the loop's default markers" : 'markers [Answer:]',
    playgroundTexts ? 'clone texts in playground tokens' : 'clone texts with Answer:',
  ];
  if (budgetFallbacks > 0) more.push('clone budget from cloneMaxTokens');
  if (typeof truth !== 'string') more.push(Array.isArray(truth) ? 'ground truth as [string]' : 'ground truth as int');
  return { id, module, fn: 'clone_accuracy_reward', args, expected: tsReward(t, s), kinds, inputs: more };
}

/** A trace without clones through compute_score: `Answer:` with the token count given, or (the toy's) the root's playground text. */
function scoreCases(id: string, module: string, t: EpisodeTrace, s: Settings, kinds: string[]): Case[] {
  const expected = tsReward(t, s);
  const root = t.contexts[0];
  const cases: Case[] = [
    {
      id: `${id}/answer`,
      module,
      fn: 'compute_score',
      kinds,
      inputs: ['Answer: with response_tokens'],
      expected,
      args: {
        data_source: `selfcest/${t.task}`,
        solution_str: t.answer === null ? '' : `Answer: ${t.answer}`,
        ground_truth: t.truth,
        extra_info: { response_tokens: root.generatedTokens },
      },
    },
    {
      id: `${id}/text`,
      module,
      fn: 'compute_score',
      kinds,
      inputs: ['playground text, tokens counted'],
      expected,
      args: { data_source: `selfcest/${t.task}`, solution_str: generatedText(root), ground_truth: t.truth, extra_info: null },
    },
  ];
  // The file counts a playground text's tokens itself; a real model's text is counted by its tokenizer, which the loop passes as response_tokens.
  return root.pieces !== undefined ? cases.slice(0, 1) : cases;
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
  if ((breakdown.tokenPenalty ?? 0) > 0) k.push('token penalty');
  if (t.contexts.some((c) => c.role === 'clone' && c.answer !== null && c.generatedTokens === c.budget)) k.push('clone answered on its last budget token');
  return k;
}

// ---------------------------------------------------------------------------------------------

const GENERATED_SETTINGS: Settings[] = [
  { name: 'defaults', reward: TABLE_REWARD, advantage: TABLE_GRPO.advantage, cloneMaxTokens: 128 },
  {
    name: 'protocol gate, budget cost, no partial credit',
    reward: {
      ...TABLE_REWARD,
      rootTau: 40,
      rootRho: 30,
      cloneTau: 8,
      cloneRho: 16,
      callRate: 0.15,
      callFree: 0,
      budgetRate: 0.004,
      tokenRate: 0.003,
      partialCredit: false,
    },
    advantage: { ...TABLE_GRPO.advantage, gateMode: 'protocol' },
    cloneMaxTokens: 16,
  },
  {
    name: 'gating off, steep penalties',
    reward: {
      ...TABLE_REWARD,
      rootTau: 20,
      rootRho: 10,
      rootPmax: 0.5,
      cloneTau: 4,
      cloneRho: 7,
      clonePmax: 0.35,
      callRate: 0.3,
      callFree: 0.1,
      budgetRate: 0.01,
    },
    advantage: { ...TABLE_GRPO.advantage, gating: false },
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
    expect(src).toContain('    "cloneMaxTokens": 16,\n    "formatMaxTokens": 192,\n    "answers": "exact",\n    "logParts": True,\n}\n# --- end CONFIG ---');
    expect(src.match(/^CONFIG = \{/gm)).toHaveLength(1);
    const file = join(tmp, 'config_probe.py');
    writeFileSync(file, src);
    const probe = spawnSync(
      PYTHON!,
      [
        '-c',
        'import importlib.util, json, sys\ns = importlib.util.spec_from_file_location("p", sys.argv[1]); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); print(json.dumps(m.CONFIG))',
        file,
      ],
      { encoding: 'utf8' },
    );
    expect(probe.stderr).toBe('');
    expect(JSON.parse(probe.stdout)).toEqual({
      recipe: 'playground',
      task: 'multihop',
      ...GENERATED_SETTINGS[1].reward,
      gating: true,
      gateMode: 'protocol',
      cloneMaxTokens: 16,
      formatMaxTokens: 192,
      answers: 'exact',
      logParts: true,
    });
    expect(() => withRewardConfig('CONFIG = {}\n', verlConfig('arithmetic', GENERATED_SETTINGS[0]))).toThrow(/CONFIG block between the lines/);
    expect(() => rewardPythonSource({ ...verlConfig('arithmetic', GENERATED_SETTINGS[0]), gateMode: 'strict' as 'protocol' })).toThrow(/gateMode/);
    expect(() => rewardPythonSource({ ...verlConfig('arithmetic', GENERATED_SETTINGS[0]), cloneMaxTokens: 0 })).toThrow(/cloneMaxTokens/);
    expect(() => rewardPythonSource({ ...verlConfig('countdown', GENERATED_SETTINGS[0]) })).toThrow(/task must be one of/);
    expect(() => rewardPythonSource({ ...verlConfig('arithmetic', GENERATED_SETTINGS[0]), reward: { ...TABLE_REWARD, rootRho: 0 } })).toThrow(/rootRho/);
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
        ['reward', breakdown.reward],
        ['score', breakdown.reward],
        ['answer_score', breakdown.score],
        ['root_penalty', breakdown.rootPenalty],
        ['clone_penalty', breakdown.clonePenalty],
        ['call_penalty', breakdown.callPenalty],
        ['budget_penalty', breakdown.budgetPenalty],
        ['token_penalty', breakdown.tokenPenalty ?? 0],
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
    const table = (m: Map<string, number>) =>
      [...m]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => `  ${k}: ${v}`)
        .join('\n');
    console.log(
      `verl reward: ${cases.length} calls agree with TypeScript, largest difference ${worst}\n` +
        `episodes checked (trace × config), by kind:\n${table(episodes)}\ncalls, by how the inputs were written:\n${table(checks)}`,
    );
    for (const kind of [
      'committed',
      'generated',
      'hand-built',
      'rounds > 1',
      'gated clones',
      'partial credit',
      'negative answer',
      'no answer',
      'answer -0',
      'task multihop',
      'no clones',
      'budget penalty',
      'clone answered on its last budget token',
    ]) {
      expect(episodes.get(kind) ?? 0, kind).toBeGreaterThan(0);
    }
    for (const input of ['clone budget from cloneMaxTokens', 'clone texts in playground tokens', 'ground truth as int', "the loop's default markers"]) {
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
