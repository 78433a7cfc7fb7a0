/**
 * The teachers' demonstrations in the text protocol (src/core/sft/textDemos.ts): rendered as chats
 * in both prompt sets, and tokenized into contexts whose trained tokens are the model's own. Both
 * tasks, both teacher styles, monolithic and delegated, many seeds, on a folder made by
 * `init --family qwen2 --prompts reference`. That each demonstration is the episode the rollout
 * scheduler runs when a model writes its tokens is test/text-protocol.test.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { initHfFolder, INIT_DEFAULT_SIZES } from '../src/core/model/hfInit';
import { SHORT_CLONE_SYSTEM, textPrompts } from '../src/core/protocol/prompts';
import { Rng } from '../src/core/rng';
import { SHORT_SYSTEM_PROMPT } from '../src/core/verl/dataset';
import type { TextModel } from '../src/core/policyModel';
import type { TextLimits } from '../src/core/rollout/textLimits';
import { renderTextDemo, textDemoContexts, textTrainSequence } from '../src/core/sft/textDemos';
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

describe('text demonstrations (their replay through the rollout scheduler: test/text-protocol.test.ts)', () => {
  const cases: [TaskName, 'expert' | 'naive', Record<string, unknown>][] = [
    ['arithmetic', 'expert', {}],
    ['arithmetic', 'naive', {}],
    ['multihop', 'expert', {}],
    ['multihop', 'naive', { names: 2 }],
  ];
  for (const [task, style, options] of cases) {
    it(`${task} ${style} ${JSON.stringify(options)}: each context trains the model's own tokens, never a prompt or a tool response`, () => {
      let delegated = 0;
      for (const d of demos(task, style, 24, 7 + task.length + style.length, options)) {
        const demo = renderTextDemo(d, REFERENCE);
        const contexts = textDemoContexts(demo, model.tokenizer, LIMITS);
        expect(contexts).not.toBeNull();
        // One context for the root and each clone the teacher shows.
        expect(contexts).toHaveLength(1 + demo.clones.length);
        for (const ctx of contexts ?? []) {
          const seq = textTrainSequence(ctx);
          expect(seq.weights.length).toBe(seq.tokens.length - 1);
          expect(seq.weights.reduce((a, b) => a + b, 0)).toBe([...ctx.writers].filter((w) => w === 'g').length);
        }
        if (d.style === 'delegate') delegated++;
      }
      expect(delegated).toBeGreaterThan(12);
    });
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
