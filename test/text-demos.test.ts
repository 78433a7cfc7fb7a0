/**
 * The teachers' demonstrations in the text protocol (src/core/sft/textDemos.ts), replayed through
 * the real text episode loop: a scripted chooser writes exactly the demonstration's assistant
 * tokens, and the episode must be the demonstration: the same root and clone contexts token for
 * token (with who wrote each), the same clones with the same objectives and answers, the
 * demonstration's answer, and no violation but the clones the teacher shows over their budget.
 * Both tasks, both teacher styles, monolithic and delegated, many seeds, on a folder made by
 * `init --family qwen2 --prompts reference` (its tokenizer and ChatML template with tools); the
 * short prompt set's rendering beside it.
 */
import * as tf from '@tensorflow/tfjs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { initHfFolder, INIT_DEFAULT_SIZES } from '../src/core/model/hfInit';
import { SHORT_CLONE_SYSTEM, textPrompts } from '../src/core/protocol/prompts';
import { Rng } from '../src/core/rng';
import { SHORT_SYSTEM_PROMPT } from '../src/core/verl/dataset';
import { runTextEpisode } from '../src/core/rollout/textEpisode';
import type { TextModel } from '../src/core/policyModel';
import type { TextLimits } from '../src/core/rollout/textLimits';
import { type TextDemonstration, renderTextDemo, textDemoContexts, textTrainSequence } from '../src/core/sft/textDemos';
import { type TaskName, withOptions } from '../src/core/tasks';
import type { Demonstration } from '../src/core/tasks/types';
import { defaultRolloutConfig } from '../src/core/runConfigTargets';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { writeHfFolder } from '../src/runtime/node/folderWriter';

const REFERENCE = textPrompts('reference');
let dir = '';
let model: TextModel;
const LIMITS: TextLimits = { rootMaxTokens: 4096, cloneBudget: 48, maxClones: 16, maxRounds: 4 };

beforeAll(async () => {
  await initBackend('wasm');
  dir = await mkdtemp(join(tmpdir(), 'text-demos-'));
  await writeHfFolder(
    dir,
    initHfFolder('qwen2', { ...INIT_DEFAULT_SIZES, layers: 1, hiddenSize: 16, heads: 2, kvHeads: 1, intermediateSize: 16, maxPositions: 4096 }, 3, 'reference'),
  );
  model = (await loadHfTextModel(nodeFolderReader(dir), 'float32')).model;
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Demonstrations of `task` (delegated where the teacher can, else monolithic; `mono` every other one). */
function demos(task: TaskName, style: 'expert' | 'naive', n: number, seed: number, presetOptions: Record<string, unknown> = {}): Demonstration[] {
  const { task: t, opts } = withOptions(task, presetOptions);
  const limits = defaultRolloutConfig(task);
  const rng = new Rng(seed);
  return Array.from({ length: n }, (_, i) => {
    const p = t.generate(rng, opts, `${task}-${seed}-${i}`);
    return (i % 4 !== 3 && t.teacherDelegate(p, rng, limits, style)) || t.teacherMono(p, rng);
  });
}

/** The tokens the model writes in an episode, in the order the loop asks for them (root turn, its clones one by one, root turn, …). */
function script(demo: TextDemonstration): number[] {
  const contexts = textDemoContexts(demo, model.tokenizer, LIMITS)!;
  const [root, ...clones] = contexts;
  const runs: number[][] = [];
  root.writers.replace(/g+/g, (m, at: number) => (runs.push(root.tokens.slice(at, at + m.length)), m));
  const out: number[] = [...runs[0]];
  demo.rounds.forEach((round, r) => {
    for (const c of round) {
      // A clone the teacher leaves out (multihop's misses) answers in one line.
      const ctx =
        c.chat !== null ? clones[c.chat] : { tokens: [...model.tokenizer.encode(`Answer: ${c.answer}`, false), ...model.tokenizer.stopIds()], writers: '' };
      out.push(...(c.chat !== null ? ctx.tokens.filter((_, i) => ctx.writers[i] === 'g') : ctx.tokens));
    }
    out.push(...runs[r + 1]);
  });
  return out;
}

async function replay(d: Demonstration) {
  const demo = renderTextDemo(d, REFERENCE);
  const tokens = script(demo);
  let at = 0;
  const episode = await runTextEpisode(
    model,
    demo.root.messages.filter((m) => m.role === 'system' || m.role === 'user'),
    LIMITS,
    {
      offerTool: demo.root.tools,
      context: d.problem.context ?? {},
      batchClones: false,
      choose: () => {
        if (at >= tokens.length) throw new Error(`the loop asked for token ${at}, past the demonstration's ${tokens.length}`);
        return tokens[at++];
      },
    },
  );
  return { demo, episode, used: at, total: tokens.length };
}

describe('text demonstrations replayed through runTextEpisode', () => {
  const cases: [TaskName, 'expert' | 'naive', Record<string, unknown>][] = [
    ['arithmetic', 'expert', {}],
    ['arithmetic', 'naive', {}],
    ['multihop', 'expert', {}],
    ['multihop', 'naive', { names: 2 }],
  ];
  for (const [task, style, options] of cases) {
    it(`${task} ${style} ${JSON.stringify(options)}: the episode is the demonstration`, async () => {
      const before = tf.memory().numTensors;
      let delegated = 0;
      let failed = 0;
      for (const d of demos(task, style, 24, 7 + task.length + style.length, options)) {
        const { demo, episode, used, total } = await replay(d);
        expect(used, 'every scripted token is read').toBe(total);
        expect(episode.answer).toBe(d.problem.truth);
        // Contexts: the root token for token; each demonstrated clone as the loop ran it.
        const [root, ...clones] = textDemoContexts(demo, model.tokenizer, LIMITS)!;
        expect(episode.contexts[0].tokens).toEqual(root.tokens);
        expect(episode.contexts[0].writers).toBe(root.writers);
        const spawned = demo.rounds.flat();
        expect(episode.contexts.slice(1).map((c) => c.objective)).toEqual(spawned.map((c) => c.objective));
        expect(episode.contexts.slice(1).map((c) => c.answer ?? 'failed: no answer within the budget')).toEqual(spawned.map((c) => c.answer));
        expect(episode.rounds).toBe(demo.rounds.length);
        spawned.forEach((c, j) => {
          if (c.chat === null) return;
          expect(episode.contexts[j + 1].tokens).toEqual(clones[c.chat].tokens);
          expect(episode.contexts[j + 1].writers).toBe(clones[c.chat].writers);
        });
        const over = spawned.filter((c) => c.chat !== null && demo.clones[c.chat].cut).length;
        failed += over;
        expect(episode.violations.map((v) => v.violation)).toEqual(Array(over).fill('clone_over_budget'));
        expect(episode.droppedToolCalls + episode.repairedToolCalls + episode.rejectedObjectives).toBe(0);
        if (d.style === 'delegate') delegated++;
        // Trained tokens: the model's own, never a prompt or a tool response.
        for (const ctx of [root, ...clones]) {
          const seq = textTrainSequence(ctx);
          expect(seq.weights.length).toBe(seq.tokens.length - 1);
          expect(seq.weights.reduce((a, b) => a + b, 0)).toBe([...ctx.writers].filter((w) => w === 'g').length);
        }
      }
      expect(delegated).toBeGreaterThan(12);
      if (task === 'arithmetic' && style === 'naive') expect(failed).toBeGreaterThan(0);
      expect(tf.memory().numTensors).toBe(before);
    }, 120_000);
  }

  it("renders an arithmetic root as a chat: the call with the clones' objectives, their answers as the tool response, the answer line", () => {
    const [d] = demos('arithmetic', 'expert', 1, 1);
    const demo = renderTextDemo(d, REFERENCE);
    expect(d.problem.prompt).toBe('57-77+1-7*7');
    expect(demo.root.messages.slice(1)).toEqual([
      { role: 'user', content: 'Calculate the value of 57-77+1-7*7.' },
      {
        role: 'assistant',
        content:
          '<tool_call>\n{"name": "spawn_clone", "arguments": {"objectives": ["Calculate the value of 57-77+1.", "Calculate the value of -7*7."]}}\n</tool_call>',
      },
      { role: 'tool', content: '["-19","-49"]' },
      { role: 'assistant', content: '-19-49=-68\nAnswer: -68' },
    ]);
    expect(demo.clones.map((c) => c.messages[2].content)).toEqual(['-20+1=-19\nAnswer: -19', '-49\nAnswer: -49']);
  });

  it('renders the same root in the short prompt set: its system prompt, the bare expression as the question and as objectives', () => {
    const [d] = demos('arithmetic', 'expert', 1, 1);
    const demo = renderTextDemo(d, textPrompts('short'));
    expect(demo.root.messages).toEqual([
      { role: 'system', content: SHORT_SYSTEM_PROMPT },
      { role: 'user', content: '57-77+1-7*7' },
      { role: 'assistant', content: '<tool_call>\n{"name": "spawn_clone", "arguments": {"objectives": ["57-77+1", "-7*7"]}}\n</tool_call>' },
      { role: 'tool', content: '["-19","-49"]' },
      { role: 'assistant', content: '-19-49=-68\nAnswer: -68' },
    ]);
    expect(demo.clones.map((c) => c.messages.slice(0, 2))).toEqual([
      [
        { role: 'system', content: SHORT_CLONE_SYSTEM },
        { role: 'user', content: '57-77+1' },
      ],
      [
        { role: 'system', content: SHORT_CLONE_SYSTEM },
        { role: 'user', content: '-7*7' },
      ],
    ]);
  });
});
