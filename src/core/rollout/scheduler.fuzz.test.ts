/**
 * Model output never throws (CONVENTIONS): the real scheduler on every task of the registry,
 * driven by a decoder that writes adversarial token streams — random protocol tokens, spawn
 * blocks naming `<ctx>constructor` or `<ctx>__proto__`, empty keys, the largest budgets, clones
 * that spawn, answers such as `__proto__`, missing joins, outputs past every limit. Every
 * episode must end with a trace whose violations are named classes, and its verdict and reward
 * must come out without throwing and be finite.
 *
 * Streams are planned per context from a seeded Rng, so a failure names the run seed that
 * reproduces it. Many episodes share one scheduler run, as in training.
 */
import { cachedEncode } from './traceFixture';
import { describe, expect, it } from 'vitest';
import { majorityVote } from '../eval/stats';
import { parseTracesJsonl, tracesToJsonl } from '../io/traces';
import { VIOLATIONS } from '../protocol/violations';
import { episodeReward } from '../rl/reward';
import { Rng } from '../rng';
import { TASKS } from '../tasks';
import { multihop } from '../tasks/multihop';
import { arithmetic } from '../tasks/arithmetic';
import type { Problem, Task } from '../tasks/types';
import { Tokenizer } from '../tokenizer/tokenizer';
import { BUDGET_BUCKETS, CHAR_TOKENS, T, VOCAB, VOCAB_SIZE, budgetToken, tokenId } from '../tokenizer/vocab';
import type { RolloutConfig } from './config';
import { checkRolloutConfig, defaultRolloutConfig } from '../runConfigTargets';
import { type ContextDecoder, RolloutScheduler } from './scheduler';
import type { EpisodeTrace } from './trace';
import { defaultGrpoConfig } from '../runConfigTargets';
import { rewardAt } from '../rl/grpoStep';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();
const TABLE_REWARD = rewardAt(TABLE_GRPO, 0);

const tok = Tokenizer.builtin();
const encode = cachedEncode(tok);

/** Any task of the registry: each generates with its own default options. */
type SomeTask = Task<unknown>;
type Role = 'root' | 'clone';
/** The tokens a context will write, one per decode step; past its end the context writes noise. */
type Planner = (role: Role, rng: Rng, prompt: readonly number[]) => number[];

/**
 * Writes each context's planned tokens as a logit spike (plus uniform noise when `noisy`, so
 * sampled runs stray from the plan). Checks what a real decoder would refuse: feeding a slot
 * that is not open, an empty feed, a context longer than the model holds, a double close.
 */
class FuzzDecoder implements ContextDecoder {
  readonly vocabSize = VOCAB_SIZE;
  private readonly slots = new Map<number, { rng: Rng; plan: number[] | null; at: number; length: number }>();
  private nextSlot = 0;

  constructor(
    readonly maxPositions: number,
    private readonly rng: Rng,
    private readonly planner: Planner,
    private readonly noisy: boolean,
  ) {}

  get openSlots(): number {
    return this.slots.size;
  }

  open(): number {
    this.slots.set(this.nextSlot, { rng: this.rng.fork(), plan: null, at: 0, length: 0 });
    return this.nextSlot++;
  }

  close(slot: number): void {
    if (!this.slots.delete(slot)) throw new Error(`fuzz decoder: close of slot ${slot}, which is not open`);
  }

  async feed(slots: number[], tokens: number[][]): Promise<Float32Array> {
    const V = this.vocabSize;
    const out = new Float32Array(slots.length * V);
    slots.forEach((slot, r) => {
      const s = this.slots.get(slot);
      if (s === undefined) throw new Error(`fuzz decoder: feed of slot ${slot}, which is not open`);
      if (tokens[r].length === 0) throw new Error(`fuzz decoder: empty feed for slot ${slot}`);
      s.plan ??= this.planner(tokens[r][0] === T.root ? 'root' : 'clone', s.rng, tokens[r]);
      s.length += tokens[r].length;
      if (s.length > this.maxPositions) throw new Error(`fuzz decoder: slot ${slot} holds ${s.length} tokens (max ${this.maxPositions})`);
      const next = s.at < s.plan.length ? s.plan[s.at++] : s.rng.int(0, V - 1);
      if (this.noisy) for (let i = 0; i < V; i++) out[r * V + i] = 4 * s.rng.next();
      out[r * V + next] += 8;
    });
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// Adversarial streams

const ids = (text: string) => [...text].map((c) => tokenId(c));
const textOf = (tokens: readonly number[]) => tokens.map((t) => VOCAB[t]).join('');
/**
 * What a root may name after `<ctx>`: task keys, keys out of range, and names every plain
 * object has. Only `constructor` and `__proto__` can be spelled exactly (the vocabulary is
 * lowercase); the rest appear as the model could write them.
 */
const KEYS = [
  'constructor',
  '__proto__',
  'tostring',
  'valueof',
  'hasownproperty',
  'isprototypeof',
  'prototype',
  '__definegetter__',
  'k0',
  'k1',
  'k2',
  'k3',
  'k6',
  'k16',
  'k99',
  'k1_',
  '_',
  '0',
];
const ANSWERS = [
  '__proto__',
  'constructor',
  'tostring',
  'valueof',
  'none',
  '0',
  '-0',
  '7',
  '-12',
  '007',
  '1e9',
  'nan',
  'infinity',
  ' ',
  '-',
  '=',
  '9'.repeat(40),
  '9'.repeat(310),
  '-' + '9'.repeat(310),
];
const CHAR_IDS = CHAR_TOKENS.map((c) => tokenId(c));
const BUDGETS = BUDGET_BUCKETS.map(budgetToken);

const noise = (rng: Rng, n: number) => Array.from({ length: n }, () => rng.int(0, VOCAB_SIZE - 1));
const chars = (rng: Rng, n: number) => Array.from({ length: n }, () => rng.pick(CHAR_IDS));

function subtask(rng: Rng): number[] {
  const out: number[] = [];
  for (let parts = rng.int(0, 3); parts > 0; parts--) {
    if (rng.bool(0.6)) out.push(T.ctx, ...(rng.bool(0.85) ? ids(rng.pick(KEYS)) : chars(rng, rng.int(0, 3))));
    out.push(...(rng.bool(0.5) ? ids(` ${rng.pick(['ab', 'qx', 'zz'])}?`) : chars(rng, rng.int(0, 4))));
  }
  return out;
}

function spawnBlock(rng: Rng): number[] {
  const close = rng.bool(0.85) ? (rng.bool(0.3) ? budgetToken(128) : rng.pick(BUDGETS)) : rng.int(0, VOCAB_SIZE - 1);
  return [T.spawn, ...subtask(rng), ...(rng.bool(0.95) ? [close] : [])];
}

function answerBlock(rng: Rng): number[] {
  const text = rng.bool(0.7) ? ids(rng.pick(ANSWERS)) : chars(rng, rng.int(0, 6));
  return [T.ans, ...text, ...(rng.bool(0.9) ? [T.eos] : noise(rng, 1))];
}

/** Hostile: pure noise, an output that never ends, or delegation full of broken parts. */
function hostile(role: Role, rng: Rng): number[] {
  const style = rng.int(0, 9);
  if (style === 0) return noise(rng, rng.int(0, 40));
  if (style === 1) return chars(rng, rng.int(100, 400));
  const out: number[] = [];
  // Clones spawn too, sometimes: depth is 1, so that must be a clone_spawn.
  const rounds = role === 'root' ? rng.pick([0, 0, 1, 1, 2, 3, 5, 11]) : rng.bool(0.15) ? 1 : 0;
  for (let r = 0; r < rounds; r++) {
    out.push(...chars(rng, rng.int(0, 6)));
    const blocks = rng.pick([0, 1, 1, 2, 3, 6, 17, 31]);
    for (let b = 0; b < blocks; b++) out.push(...spawnBlock(rng));
    // A missing join: the answer, the end or plain text while blocks wait.
    out.push(rng.bool(0.85) ? T.join : rng.pick([T.ans, T.eos, T.spawn, ...CHAR_IDS]));
    out.push(...chars(rng, rng.int(0, 4)));
  }
  out.push(...chars(rng, rng.int(0, 20)), ...answerBlock(rng));
  // Scattered protocol tokens anywhere: <ret>, <sep>, <pad>, a second <ans> …
  if (rng.bool(0.3)) for (let k = rng.int(1, 3); k > 0; k--) out.splice(rng.int(0, out.length), 0, rng.int(0, VOCAB_SIZE - 1));
  return out;
}

/**
 * Tidy: delegation that gets past the parser (the keys the prompt names, small budgets, a join),
 * so that clones run, answer `__proto__` and the root resumes for more rounds; now and then one
 * key is a name every object has.
 */
function tidy(role: Role, rng: Rng, prompt: readonly number[]): number[] {
  const short = () => ids(rng.pick(['__proto__', 'constructor', 'none', '7', '-12', '42']));
  if (role === 'clone') return [...chars(rng, rng.int(0, 4)), T.ans, ...short(), T.eos];
  const keys = textOf(prompt).match(/\bk\d+\b/g) ?? [];
  const out: number[] = [];
  for (let r = rng.int(0, 3); r > 0; r--) {
    for (let b = rng.int(1, 4); b > 0; b--) {
      const key = rng.bool(0.1) ? rng.pick(KEYS) : keys.length > 0 ? rng.pick(keys) : null;
      const task = key === null ? chars(rng, rng.int(1, 5)) : [T.ctx, ...ids(`${key} ab?`)];
      out.push(T.spawn, ...task, budgetToken(rng.pick([8, 16, 16, 32])));
    }
    out.push(T.join, ...chars(rng, rng.int(0, 3)));
  }
  return [...out, T.ans, ...short(), T.eos];
}

const adversarial: Planner = (role, rng, prompt) => (rng.bool(0.4) ? tidy(role, rng, prompt) : hostile(role, rng));

// ---------------------------------------------------------------------------------------------
// Runs and checks

function fuzzConfig(task: SomeTask, rng: Rng): RolloutConfig {
  const base = defaultRolloutConfig(task.name);
  const greedy = rng.bool(0.5);
  return checkRolloutConfig({
    ...base,
    maxClonesPerRound: rng.bool(0.5) ? base.maxClonesPerRound : rng.int(1, 30),
    maxRounds: rng.bool(0.5) ? base.maxRounds : rng.int(0, 10),
    budgets: rng.bool(0.7) ? [...BUDGET_BUCKETS] : rng.shuffle([...BUDGET_BUCKETS]).slice(0, rng.int(1, 4)),
    rootMaxTokens: rng.pick([8, 64, base.rootMaxTokens, 400]),
    answerMaxChars: rng.int(1, 16),
    greedy,
    temperature: greedy ? 1 : rng.pick([0.5, 1, 2]),
    topK: rng.pick([0, 0, 3, 20]),
    allowSpawn: rng.bool(0.85),
  });
}

const NAMED: ReadonlySet<string> = new Set(VIOLATIONS);

/** Everything wrong with one finished episode (empty when it is well classified). */
function checkEpisode(t: EpisodeTrace, task: SomeTask, problem: Problem, cfg: RolloutConfig, maxPositions: number): string[] {
  const bad: string[] = [];
  const [root, ...clones] = t.contexts;
  for (const v of t.violations) {
    if (!NAMED.has(v.violation)) bad.push(`unnamed violation ${JSON.stringify(v.violation)}`);
    if (typeof v.detail !== 'string' || v.detail === '') bad.push(`violation ${v.violation} without a detail`);
    if (t.contexts[v.context]?.violation !== v.violation) bad.push(`violation ${v.violation} not on context ${v.context}`);
  }
  for (const c of t.contexts) {
    if (c.violation !== null && !NAMED.has(c.violation)) bad.push(`context ${c.id}: unnamed violation ${JSON.stringify(c.violation)}`);
    if ((c.answer === null) === (c.violation === null)) bad.push(`context ${c.id} ended with answer ${c.answer} and violation ${c.violation}`);
    if (t.violations.filter((v) => v.context === c.id).length !== (c.violation === null ? 0 : 1)) bad.push(`context ${c.id}: violations listed wrongly`);
    if (c.writers.length !== c.tokens.length || c.logprobs.length !== c.generatedTokens) bad.push(`context ${c.id}: token bookkeeping`);
    if (!c.logprobs.every((lp) => Number.isFinite(lp) && lp <= 0)) bad.push(`context ${c.id}: logprob not finite or > 0`);
    // A prompt that does not fit is recorded whole (root_over_max before any decoding).
    if (c.tokens.length > maxPositions && c.generatedTokens > 0) bad.push(`context ${c.id}: ${c.tokens.length} tokens (max ${maxPositions})`);
  }
  if (t.answer !== root.answer) bad.push('episode answer differs from the root answer');
  if (root.generatedTokens > cfg.rootMaxTokens) bad.push(`root generated ${root.generatedTokens} (max ${cfg.rootMaxTokens})`);
  if (!cfg.allowSpawn && clones.length > 0) bad.push('a monolithic root spawned');
  if (t.rounds > cfg.maxRounds) bad.push(`${t.rounds} rounds (max ${cfg.maxRounds})`);
  for (const c of clones) {
    if (c.budget === null || !cfg.budgets.includes(c.budget) || c.generatedTokens > c.budget)
      bad.push(`clone ${c.id}: budget ${c.budget}, generated ${c.generatedTokens}`);
    if (clones.filter((d) => d.round === c.round).length > cfg.maxClonesPerRound) bad.push(`round ${c.round}: too many clones`);
  }
  const verdict = task.verify(problem, t.answer);
  if (t.correct !== (verdict.correct && t.answer !== null)) bad.push('trace.correct disagrees with the verdict');
  const r = episodeReward(t, verdict, TABLE_REWARD);
  if (![r.reward, r.score, r.rootPenalty, r.clonePenalty, r.callPenalty].every(Number.isFinite)) bad.push(`reward not finite: ${JSON.stringify(r)}`);
  // The verifier meets clone answers too (partial-credit paths, self-consistency votes).
  for (const c of clones) {
    const v = task.verify(problem, c.answer);
    if (!Number.isFinite(episodeReward({ ...t, correct: v.correct }, v, TABLE_REWARD).reward)) bad.push(`reward of clone answer ${c.answer} not finite`);
  }
  return bad;
}

const RUNS_PER_TASK = 100;
const EPISODES_PER_RUN = 500;
const PROBLEMS_PER_RUN = 25;

describe('rollout scheduler under adversarial model output (fuzz)', () => {
  const tasks: [string, SomeTask][] = Object.entries(TASKS);
  for (const [name, task] of tasks) {
    it(`${name}: ${RUNS_PER_TASK * EPISODES_PER_RUN} episodes end classified, with finite rewards`, async () => {
      const failures: string[] = [];
      const seen = new Map<string, number>();
      const count = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1);
      let episodes = 0;
      for (let run = 0; run < RUNS_PER_TASK; run++) {
        const seed = 1000 * run + 17;
        const rng = Rng.stream(seed, `fuzz-${name}`);
        const cfg = fuzzConfig(task, rng);
        const maxPositions = rng.pick([64, 128, 256, 256, 512, 1024]);
        const decoder = new FuzzDecoder(maxPositions, rng.fork(), adversarial, !cfg.greedy);
        const problems = Array.from({ length: PROBLEMS_PER_RUN }, (_, i) => task.generate(rng, task.defaultOptions, `fuzz-${seed}-${i}`));
        const s = new RolloutScheduler(decoder, cfg, { policyVersion: run, encode });
        for (let e = 0; e < EPISODES_PER_RUN; e++) s.addEpisode(task, problems[e % PROBLEMS_PER_RUN], rng.fork());
        let traces: EpisodeTrace[];
        try {
          traces = await s.run();
        } catch (err) {
          failures.push(`run seed ${seed}: the scheduler threw ${(err as Error).stack ?? String(err)}`);
          continue;
        }
        if (traces.length !== EPISODES_PER_RUN) failures.push(`run seed ${seed}: ${traces.length} traces`);
        if (decoder.openSlots !== 0) failures.push(`run seed ${seed}: ${decoder.openSlots} decoder slots left open`);
        traces.forEach((t, e) => {
          episodes++;
          const problem = problems[e % PROBLEMS_PER_RUN];
          for (const b of checkEpisode(t, task, problem, cfg, maxPositions))
            failures.push(`run seed ${seed}, episode ${e}: ${b}\n  ${t.contexts.map((c) => c.text).join('\n  ')}`);
          for (const v of t.violations) count(v.violation);
          for (const v of t.violations) if (/"(constructor|__proto__)"/.test(v.detail)) count(`key ${v.detail}`);
          if (t.answer === '__proto__') count('root answer __proto__');
          if (t.answer !== null && /^-?9{310}$/.test(t.answer)) count('answer past the float range');
          if (t.events.some((ev) => ev.kind === 'join' && ev.answers.includes('__proto__'))) count('joined __proto__');
          if (t.rounds >= 2) count('two rounds');
        });
        // Self-consistency votes over the run's answers to one problem, and what it records.
        for (let p = 0; p < PROBLEMS_PER_RUN; p++) {
          const answers = traces.filter((_, e) => e % PROBLEMS_PER_RUN === p).map((t) => t.answer);
          const vote = majorityVote(answers);
          if (vote !== null && !answers.includes(vote)) failures.push(`run seed ${seed}: majority vote ${vote} is no sample's answer`);
          task.verify(problems[p], vote);
        }
        expect(parseTracesJsonl(tracesToJsonl(traces.slice(0, 8)))).toEqual(traces.slice(0, 8));
        if (failures.length > 20) break;
      }
      expect(failures.slice(0, 5)).toEqual([]);
      expect(episodes).toBe(RUNS_PER_TASK * EPISODES_PER_RUN);
      // The streams reach what they are meant to: every class, the prototype keys, hostile answers.
      expect([...VIOLATIONS].filter((v) => !seen.has(v))).toEqual([]);
      expect(seen.get('key unknown context key "constructor"')).toBeGreaterThan(0);
      expect(seen.get('key unknown context key "__proto__"')).toBeGreaterThan(0);
      expect(seen.get('root answer __proto__')).toBeGreaterThan(0);
      expect(seen.get('joined __proto__')).toBeGreaterThan(0);
      expect(seen.get('two rounds')).toBeGreaterThan(0);
      expect(seen.get('answer past the float range')).toBeGreaterThan(0);
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Regressions: context keys every plain object has; a join on the root's last token

/** Replays one fixed text per role. */
const scripted =
  (root: string, clone: string): Planner =>
  (role) =>
    encode(role === 'root' ? root : clone);

async function runOne(task: SomeTask, problem: Problem, root: string, clone: string, over: Partial<RolloutConfig> = {}): Promise<EpisodeTrace> {
  const cfg = defaultRolloutConfig(task.name, { answerMaxChars: 16, greedy: true, ...over });
  const s = new RolloutScheduler(new FuzzDecoder(512, new Rng(0), scripted(root, clone), false), cfg, { policyVersion: 0, encode });
  s.addEpisode(task, problem, new Rng(1));
  const [t] = await s.run();
  return t;
}

describe('multihop spawns naming keys every object has', () => {
  const problem = multihop.generate(new Rng(4), multihop.defaultOptions, 'proto');
  const question = / ([a-z]+)\?$/.exec(problem.prompt)![1];

  for (const key of ['constructor', '__proto__']) {
    it(`<ctx>${key} is an unknown key: malformed_spawn, not a crash`, async () => {
      // Alone, and after a block with a real key: the round is refused either way, as for k99.
      for (const spawns of [`<spawn><ctx>${key} ${question}?<b8>`, `<spawn><ctx>k1 ${question}?<b8><spawn><ctx>${key} ${question}?<b8>`]) {
        const t = await runOne(multihop, problem, `${spawns}<join><ans>7<eos>`, '<ans>none<eos>');
        expect(t.violations).toEqual([{ violation: 'malformed_spawn', context: 0, detail: `unknown context key ${JSON.stringify(key)}` }]);
        expect(t.contexts).toHaveLength(1);
        expect(t.answer).toBeNull();
        expect(t.correct).toBe(false);
        expect(episodeReward(t, multihop.verify(problem, t.answer), TABLE_REWARD).reward).toBe(0);
      }
    });
  }

  it('a clone and a root answering __proto__ are ordinary (wrong) answers', async () => {
    const t = await runOne(multihop, problem, `<spawn><ctx>k1 ${question}?<b16><join><ans>__proto__<eos>`, '<ans>__proto__<eos>');
    expect(t.violations).toEqual([]);
    expect(t.events[1]).toMatchObject({ kind: 'join', answers: ['__proto__'] });
    expect(t.contexts[0].text).toContain('<ret>__proto__<resume>');
    expect(t.answer).toBe('__proto__');
    expect(t.correct).toBe(false);
  });
});

describe('the root limit on a join', () => {
  it("a join on the root's last allowed token ends it as root_over_max before any clone starts", async () => {
    const problem = { task: 'arithmetic', id: 'j', prompt: '1+2', truth: '3', meta: {} };
    const root = '<spawn>1+2<b8><join>=3<ans>3<eos>'; // the join is the 6th generated token
    const atLimit = await runOne(arithmetic, problem, root, '<ans>3<eos>', { rootMaxTokens: 6 });
    expect(atLimit.violations).toEqual([{ violation: 'root_over_max', context: 0, detail: 'root generated 6 tokens (max 6)' }]);
    expect(atLimit.contexts).toHaveLength(1);
    expect(atLimit.contexts[0].generatedTokens).toBe(6);
    // With room for the whole root the same stream delegates and answers.
    const roomy = await runOne(arithmetic, problem, root, '<ans>3<eos>', { rootMaxTokens: 11 });
    expect(roomy.violations).toEqual([]);
    expect(roomy.correct).toBe(true);
  });
});
