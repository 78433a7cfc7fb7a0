/**
 * The text protocol (src/core/protocol/textProtocol.ts) driven by the one rollout scheduler: the
 * teachers' demonstrations in the text protocol (src/core/sft/textDemos.ts) replayed as episodes.
 * A scripted decoder answers each slot with the next token its demonstrated context holds (found
 * by its tokens so far), so the scheduler, its protocol, the chat template, the tool-call parsing,
 * the clones' chats and the tool responses must rebuild the demonstration: the same root and clone
 * contexts token for token (with who wrote each), the same clones with the same objectives and
 * answers, the demonstration's answer, and no violation but the clones the teacher shows over their
 * budget. Every episode of a task runs in one scheduler, its contexts interleaved. Both tasks, both
 * teacher styles, monolithic and delegated, in both prompt sets, on folders made by
 * `init --family qwen2 --prompts reference|short`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { initHfFolder, INIT_DEFAULT_SIZES } from '../src/core/model/hfInit';
import { CLONE_FAILED, cloneChat, textProtocol } from '../src/core/protocol/textProtocol';
import { PROMPT_SETS, type PromptSetName, type TextPrompts, textPrompts } from '../src/core/protocol/prompts';
import { SPAWN_CLONE_TOOL, cloneUserMessage } from '../src/core/protocol/toolCalls';
import { Rng } from '../src/core/rng';
import type { RolloutConfig } from '../src/core/rollout/config';
import { type ContextDecoder, RolloutScheduler } from '../src/core/rollout/scheduler';
import type { EpisodeTrace } from '../src/core/rollout/trace';
import { defaultRolloutConfig } from '../src/core/runConfigTargets';
import { type TextDemoContext, renderTextDemo, textDemoContexts } from '../src/core/sft/textDemos';
import { type TaskName, withOptions } from '../src/core/tasks';
import type { Demonstration } from '../src/core/tasks/types';
import type { HfTokenizer } from '../src/core/tokenizer/hfTokenizer';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { writeHfFolder } from '../src/runtime/node/folderWriter';

let dir = '';
let tokenizer: HfTokenizer;
let prompts: TextPrompts;
const BUDGET = 48;
const WINDOW = 4096;

beforeAll(async () => {
  await initBackend('wasm');
});

/** A folder made by `init --family qwen2 --prompts <set>`: its tokenizer frames the episodes in that set. */
async function useFolder(set: PromptSetName): Promise<void> {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = await mkdtemp(join(tmpdir(), 'text-protocol-'));
  await writeHfFolder(
    dir,
    initHfFolder('qwen2', { ...INIT_DEFAULT_SIZES, layers: 1, hiddenSize: 16, heads: 2, kvHeads: 1, intermediateSize: 16, maxPositions: WINDOW }, 3, set),
  );
  tokenizer = (await loadHfTextModel(nodeFolderReader(dir), 'float32')).model.tokenizer;
  expect(tokenizer.prompts).toBe(set);
  prompts = textPrompts(set);
}

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Each slot writes the next token of the one scripted context its tokens so far begin (a prompt names its context). */
class ScriptedDecoder implements ContextDecoder {
  readonly maxPositions = WINDOW;
  private readonly held = new Map<number, number[]>();
  private next = 0;
  reads = 0;

  constructor(
    readonly vocabSize: number,
    private readonly scripts: readonly number[][],
  ) {}

  open(): number {
    this.held.set(this.next, []);
    return this.next++;
  }

  close(slot: number): void {
    this.held.delete(slot);
  }

  async feed(slots: number[], tokens: number[][]): Promise<Float32Array> {
    const out = new Float32Array(slots.length * this.vocabSize);
    slots.forEach((slot, i) => {
      const held = this.held.get(slot)!;
      held.push(...tokens[i]);
      const script = this.scripts.find((s) => s.length > held.length && held.every((t, j) => s[j] === t));
      if (script === undefined) throw new Error(`slot ${slot}: no scripted context begins with its ${held.length} tokens`);
      out[i * this.vocabSize + script[held.length]] = 50;
      this.reads++;
    });
    return out;
  }
}

/** Demonstrations of `task` (delegated where the teacher can, else monolithic; every fourth monolithic). */
function demos(task: TaskName, style: 'expert' | 'naive', n: number, seed: number, presetOptions: Record<string, unknown> = {}): Demonstration[] {
  const { task: t, opts } = withOptions(task, presetOptions);
  const limits = defaultRolloutConfig(task);
  const rng = new Rng(seed);
  return Array.from({ length: n }, (_, i) => {
    const p = t.generate(rng, opts, `${task}-${seed}-${i}`);
    return (i % 4 !== 3 && t.teacherDelegate(p, rng, limits, style)) || t.teacherMono(p, rng);
  });
}

const lengths = { rootMaxTokens: WINDOW, cloneBudget: BUDGET };

/** Every context an episode of `d` holds: the demonstration's, and a one-line answer for a clone the teacher leaves out. */
function scripts(d: Demonstration): { contexts: TextDemoContext[]; extra: number[][] } {
  const demo = renderTextDemo(d, prompts);
  const contexts = textDemoContexts(demo, tokenizer, lengths)!;
  const extra = demo.rounds
    .flat()
    .filter((c) => c.chat === null)
    .map((c) => [
      ...tokenizer.chatIds(cloneChat(prompts, cloneUserMessage({ instruction: c.objective, sharedContextKeys: c.keys }, d.problem.context ?? {})), true),
      ...tokenizer.encode(`Answer: ${c.answer}`, false),
      ...tokenizer.stopIds(),
    ]);
  return { contexts, extra };
}

describe.each(PROMPT_SETS)('the text protocol through the rollout scheduler, %s prompts', (set) => {
  beforeAll(() => useFolder(set));
  const cases: [TaskName, 'expert' | 'naive', Record<string, unknown>][] = [
    ['arithmetic', 'expert', {}],
    ['arithmetic', 'naive', {}],
    ['multihop', 'expert', {}],
    ['multihop', 'naive', { names: 2 }],
  ];
  for (const [task, style, options] of cases) {
    it(`${task} ${style} ${JSON.stringify(options)}: each episode is its demonstration`, async () => {
      const ds = demos(task, style, 16, 7 + task.length + style.length, options);
      const { task: t } = withOptions(task, options);
      // Monolithic demonstrations run as the monolithic method (no tool offered), the others delegated: one scheduler each.
      for (const mono of [false, true]) {
        const chosen = ds.filter((d) => (d.style === 'mono') === mono && renderTextDemo(d, prompts).root.tools === !mono);
        if (chosen.length === 0) continue;
        const all = chosen.map(scripts);
        const cfg: RolloutConfig = {
          ...defaultRolloutConfig(task),
          rootMaxTokens: WINDOW,
          budgets: [BUDGET],
          maxClonesPerRound: 16,
          maxRounds: 4,
          greedy: true,
          allowSpawn: !mono,
        };
        const decoder = new ScriptedDecoder(
          tokenizer.vocabSize,
          all.flatMap((s) => [...s.contexts.map((c) => c.tokens), ...s.extra]),
        );
        const scheduler = new RolloutScheduler(decoder, cfg, { policyVersion: 0, encode: () => [], protocol: textProtocol(tokenizer) });
        chosen.forEach((d, i) => scheduler.addEpisode(t, d.problem, new Rng(i)));
        const traces: EpisodeTrace[] = await scheduler.run();
        traces.forEach((trace, i) => {
          const d = chosen[i];
          const demo = renderTextDemo(d, prompts);
          const [root, ...clones] = all[i].contexts;
          expect(trace.answer).toBe(d.problem.truth);
          expect(trace.correct).toBe(true);
          expect(trace.method).toBe(mono ? 'mono' : 'delegate');
          expect(trace.contexts[0].tokens).toEqual(root.tokens);
          expect(trace.contexts[0].writers).toBe(root.writers);
          expect(trace.contexts[0].pieces?.join('')).toBe(tokenizer.decode(root.tokens));
          const spawned = demo.rounds.flat();
          expect(trace.contexts.slice(1).map((c) => c.subtask)).toEqual(spawned.map((c) => c.objective));
          expect(trace.contexts.slice(1).map((c) => c.answer ?? CLONE_FAILED)).toEqual(spawned.map((c) => c.answer));
          expect(trace.rounds).toBe(demo.rounds.length);
          spawned.forEach((c, j) => {
            if (c.chat === null) return;
            expect(trace.contexts[j + 1].tokens).toEqual(clones[c.chat].tokens);
            expect(trace.contexts[j + 1].writers).toBe(clones[c.chat].writers);
            expect(trace.contexts[j + 1].budget).toBe(BUDGET);
          });
          const over = spawned.filter((c) => c.chat !== null && demo.clones[c.chat].cut).length;
          expect(trace.violations.map((v) => v.violation)).toEqual(Array(over).fill('clone_over_budget'));
          // The generated tokens and their log-probs line up with the writers.
          for (const c of trace.contexts) expect(c.logprobs.length).toBe([...c.writers].filter((w) => w === 'g').length);
        });
      }
    }, 120_000);
  }

  it("tells a root its limit in the set's words, delegating and monolithic, where the run draws one", () => {
    const { task: t, opts } = withOptions('arithmetic', {});
    const p = t.generate(new Rng(9), opts, 'told');
    const protocol = textProtocol(tokenizer);
    const cfg: RolloutConfig = { ...defaultRolloutConfig('arithmetic'), rootMaxTokens: 37 };
    for (const allowSpawn of [true, false]) {
      const start = protocol.root(p, cfg, { allowSpawn, limitInPrompt: true });
      const chat = allowSpawn ? prompts.root('arithmetic', p, 37) : prompts.mono('arithmetic', p, 37);
      expect(start.prompt).toEqual(tokenizer.chatIds(chat, true, allowSpawn ? [SPAWN_CLONE_TOOL] : undefined));
      expect(tokenizer.decode(start.prompt)).toContain(set === 'short' ? `#37 ${p.prompt}` : 'Write at most 37 tokens.');
      const untold = protocol.root(p, cfg, { allowSpawn, limitInPrompt: false });
      expect(tokenizer.decode(untold.prompt)).not.toContain('37');
    }
  });

  it('names what breaks the protocol and goes on where the reference does', async () => {
    const { task: t, opts } = withOptions('arithmetic', {});
    const p = t.generate(new Rng(5), opts, 'bad');
    const protocol = textProtocol(tokenizer);
    const cfg: RolloutConfig = { ...defaultRolloutConfig('arithmetic'), rootMaxTokens: 400, budgets: [128], maxClonesPerRound: 2, maxRounds: 1, greedy: true };
    const start = protocol.root(p, cfg, { allowSpawn: true, limitInPrompt: false });
    const stop = tokenizer.stopIds();
    const call = (objectives: unknown) => `<tool_call>\n${JSON.stringify({ name: 'spawn_clone', arguments: { objectives } })}\n</tool_call>`;
    // Three objectives where a round allows two, one of them empty (rejected); a broken call; then a second call past the last round.
    const turn1 = [...tokenizer.encode(`${call(['a', '', 'b', 'c'])}<tool_call>{oops</tool_call>`, false), ...stop];
    const root = [...start.prompt, ...turn1];
    const clone = (obj: string, reply: string) => [
      ...tokenizer.chatIds(cloneChat(prompts, cloneUserMessage({ instruction: obj, sharedContextKeys: [] }, {})), true),
      ...tokenizer.encode(reply, false),
      ...stop,
    ];
    const cloneA = clone('a', 'Answer: 1');
    const cloneB = clone('b', `${call(['x'])}`);
    // After the tool response: a call past the last round, then the answer line.
    const scheduler1 = new RolloutScheduler(new ScriptedDecoder(tokenizer.vocabSize, [root, cloneA, cloneB]), cfg, {
      policyVersion: 0,
      encode: () => [],
      protocol,
    });
    scheduler1.addEpisode(t, p, new Rng(0));
    // The root's second turn depends on the injected tool response: run the first turn's scheduler until the root waits past it.
    await expect(scheduler1.run()).rejects.toThrow(/no scripted context begins/);
    const [partial] = scheduler1.results();
    expect(partial.contexts.map((c) => c.subtask)).toEqual([null, 'a', 'b']);
    expect(partial.contexts[1].answer).toBe('1');
    expect(partial.contexts[2].violation).toBe('clone_spawn');
    const kinds = partial.violations.map((v) => v.violation).sort();
    expect(kinds).toEqual(['clone_spawn', 'malformed_spawn', 'malformed_spawn', 'too_many_clones'].sort());
    expect(partial.contexts[0].violation).toBe('malformed_spawn');
    // The injected tool response holds the clones' answers, a failed clone as the loop says it.
    const injected = partial.contexts[0].tokens.filter((_, j) => partial.contexts[0].writers[j] === 'i');
    expect(tokenizer.decode(injected)).toContain(JSON.stringify(['1', CLONE_FAILED]));
  });
});
