import { describe, expect, it } from 'vitest';
import { countTokens, TRACE_SCHEMA, type ContextTrace, type EpisodeTrace } from '../../core/rollout/trace';
import { clonePrompt } from '../../core/protocol/grammar';
import { Tokenizer } from '../../core/tokenizer/tokenizer';
import { VOCAB } from '../../core/tokenizer/vocab';
import {
  BADGE_FONT,
  HEAD_FONT,
  MAX_NODE_W,
  NODE_H,
  NODE_W,
  PAD_L,
  PAD_R,
  badgeWidth,
  chunkRead,
  fitText,
  layoutTree,
  nodeLabels,
  taskLine,
  textWidth,
} from './treeLayout';

function ctx(id: number, role: 'root' | 'clone', extra: Partial<ContextTrace> = {}): ContextTrace {
  return {
    id,
    role,
    parent: role === 'root' ? null : 0,
    round: role === 'root' ? null : 0,
    subtask: role === 'root' ? null : '1+1',
    budget: role === 'root' ? null : 8,
    tokens: [],
    text: '',
    writers: '',
    logprobs: [],
    generatedTokens: 4,
    answer: '2',
    violation: null,
    violationDetail: null,
    ...extra,
  };
}

function episode(contexts: ContextTrace[], correct = true): EpisodeTrace {
  return {
    schema: TRACE_SCHEMA,
    policyVersion: 3,
    task: 'arithmetic',
    problemId: 'p',
    prompt: '1+1+2',
    truth: '4',
    method: 'delegate',
    answer: '4',
    correct,
    rounds: 2,
    contexts,
    events: [],
    violations: [],
    tokens: countTokens(contexts),
  };
}

describe('layoutTree', () => {
  it('puts the root left and its clones in a column to the right, by round', () => {
    const trace = episode([
      ctx(0, 'root'),
      ctx(3, 'clone', { round: 1 }),
      ctx(1, 'clone', { violation: 'clone_over_budget', answer: null }),
      ctx(2, 'clone', { credit: { advantage: 0, weight: 0, gated: true, reward: 0 } }),
    ]);
    const { nodes, links, width, height, nodeW } = layoutTree(trace);
    const root = nodes.find((n) => n.ctx.role === 'root')!;
    const clones = nodes.filter((n) => n.ctx.role === 'clone');
    expect(root.x).toBe(0);
    expect(new Set(clones.map((n) => n.x)).size).toBe(1);
    expect(clones[0].x).toBeGreaterThanOrEqual(NODE_W);
    // Top to bottom: round 0 (ids 1, 2), then round 1 (id 3); the root sits at their middle.
    expect([...clones].sort((a, b) => a.y - b.y).map((n) => n.ctx.id)).toEqual([1, 2, 3]);
    const ys = clones.map((n) => n.y);
    expect(root.y).toBeCloseTo((Math.min(...ys) + Math.max(...ys)) / 2);
    expect(Math.min(...nodes.map((n) => n.y))).toBe(0);
    expect(links).toHaveLength(3);
    expect(width).toBe(clones[0].x + nodeW);
    expect(height).toBe(Math.max(...ys) + NODE_H);
    expect(Object.fromEntries(nodes.map((n) => [n.ctx.id, n.outcome]))).toEqual({ 0: 'correct', 1: 'violation', 2: 'gated', 3: 'answered' });
  });

  it('tells a gated clone from an ungated violating one', () => {
    const gate = { advantage: 0, weight: 1, gated: true, reward: 0 };
    const trace = episode([
      ctx(0, 'root'),
      ctx(1, 'clone', { violation: 'clone_no_answer', answer: null, credit: gate }),
      ctx(2, 'clone', { violation: 'clone_no_answer', answer: null, credit: { ...gate, gated: false, reward: 0.5 } }),
    ]);
    const byId = Object.fromEntries(layoutTree(trace).nodes.map((n) => [n.ctx.id, n]));
    expect(byId[1].outcome).toBe('gated');
    expect(byId[2].outcome).toBe('violation');
    expect(nodeLabels(byId[1].ctx, 'gated').badge).toBe('gated');
    expect(nodeLabels(byId[2].ctx, 'violation').badge).toBe('clone_no_answer');
  });

  it('sizes the boxes so that head and badge do not overlap, and cuts what cannot fit', () => {
    const trace = episode([ctx(0, 'root'), ctx(12, 'clone', { round: 1, budget: 128, violation: 'clone_over_budget', answer: null })]);
    const { nodes, nodeW } = layoutTree(trace);
    expect(nodeW).toBeGreaterThan(NODE_W);
    expect(nodeW).toBeLessThanOrEqual(MAX_NODE_W);
    for (const n of nodes) {
      const { head, badge } = nodeLabels(n.ctx, n.outcome);
      // Head from the left pad, badge ending at the right pad, at least 8 px apart.
      expect(PAD_L + textWidth(head, HEAD_FONT, 'sans-bold') + 8).toBeLessThanOrEqual(nodeW - PAD_R - badgeWidth(badge));
    }
    // Clones that all answered keep the narrow box; the clone column starts past it.
    const plain = layoutTree(episode([ctx(0, 'root'), ctx(1, 'clone'), ctx(2, 'clone')]));
    expect(plain.nodeW).toBe(NODE_W);
    expect(plain.nodes[1].x).toBeGreaterThanOrEqual(NODE_W);
    // A label wider than its room is cut with an ellipsis and then fits.
    const cut = fitText('12+34*5-6*78+90-12*3+45', 80, 11, 'mono');
    expect(cut.endsWith('…')).toBe(true);
    expect(textWidth(cut, 11, 'mono')).toBeLessThanOrEqual(80);
    expect(fitText('root #0', 80, 11)).toBe('root #0');
    expect(badgeWidth('gated')).toBeCloseTo(textWidth('gated', BADGE_FONT, 'sans-bold') + 8, 9);
  });

  it('marks a wrong root, a root violation and live contexts', () => {
    expect(layoutTree(episode([ctx(0, 'root')], false)).nodes[0].outcome).toBe('wrong');
    expect(layoutTree(episode([ctx(0, 'root', { violation: 'root_no_answer' })])).nodes[0].outcome).toBe('violation');
    expect(layoutTree(episode([ctx(0, 'root')]), new Set([0])).nodes[0].outcome).toBe('running');
  });
});

describe('node task lines', () => {
  it('say which chunk a multihop clone read and what it was asked; the chunk comes from its prompt', () => {
    const tok = Tokenizer.builtin();
    const encode = (t: string) => tok.encode(t);
    const context = { k1: 'qx=4. ab=qx.', k2: 'cd=7. ef=cd.' };
    const subtask = '<ctx>k2 cd?';
    // The clone's text as the runtime writes it: its expanded prompt, then what it generated.
    const built = clonePrompt(encode(subtask), context, encode);
    if ('error' in built) throw new Error(built.error);
    const text = [...built.tokens, ...encode('<ans>7<eos>')].map((id) => VOCAB[id]).join('');
    const clone = ctx(1, 'clone', { subtask, text, answer: '7' });
    expect(taskLine(clone, 'keys k1 k2. ef?')).toBe('k2 ▸ cd?');
    expect(chunkRead(clone)).toBe('cd=7. ef=cd.');
    expect(chunkRead({ ...clone, text: '<clone>something else<sep>' })).toBeNull();
    // Arithmetic clones and roots read as before.
    expect(taskLine(ctx(2, 'clone'), 'p')).toBe('1+1');
    expect(chunkRead(ctx(2, 'clone'))).toBeNull();
    expect(taskLine(ctx(0, 'root'), '1+1+2')).toBe('1+1+2');
  });
});
