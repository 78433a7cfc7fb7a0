import { toyScorer } from '../policyModel';
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { presetConfig } from '../model/config';
import { targetLogProbs } from '../model/gpt';
import { initParams } from '../model/params';
import { CLONE_VIOLATIONS, VIOLATIONS, type Violation } from '../protocol/violations';
import { Rng } from '../rng';
import { type AdvantageConfig, type ContextCredit, type CreditedContext, computeAdvantages, isGated, ratioFactor } from './advantage';
import { type RlSequence, aggregationWeights, packRl, policyGradients, withReferenceLogprobs } from './ppoLoss';
import { defaultGrpoConfig } from '../runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();

const root = (violation: Violation | null = null): CreditedContext => ({
  role: 'root',
  answer: violation ? null : '1',
  violation,
  budget: null,
  generatedTokens: 20,
});
/** A clone with budget 16 that generated `generated` tokens. */
const clone = (answer: string | null, violation: Violation | null, generated: number): CreditedContext => ({
  role: 'clone',
  answer,
  violation,
  budget: 16,
  generatedTokens: generated,
});
const answered = () => clone('3', null, 9);
const overBudget = () => clone(null, 'clone_over_budget', 16);
const noAnswerEarly = () => clone(null, 'clone_no_answer', 5);
const spawnEarly = () => clone(null, 'clone_spawn', 3);

/**
 * One group of 4 (rewards 1, 0.5, 0, −0.2): mean 0.325, sample std √(0.8675/3) = 0.5377421935,
 * A = (R − mean)/(std + 1e-6) = 1.2552460136, 0.3254341517, −0.6043777103, −0.9763024551;
 * without std: 0.675, 0.175, −0.325, −0.525.
 */
const episodes = [
  { contexts: [root(), answered(), overBudget(), noAnswerEarly()] }, // R = 1 > 0
  { contexts: [root()] }, // R = 0.5, monolithic
  { contexts: [root(), answered(), overBudget()] }, // R = 0
  { contexts: [root(), answered(), overBudget(), spawnEarly()] }, // R = −0.2 < 0
];
const rewards = [1, 0.5, 0, -0.2];
const groups = [[0, 1, 2, 3]];
const A = [1.2552460136422237, 0.32543415168502093, -0.6043777102721818, -0.9763024550550629];
const run = (c: Partial<AdvantageConfig> = {}) => computeAdvantages(episodes, rewards, groups, { ...TABLE_GRPO.advantage, ...c });

describe('advantages', () => {
  it('GRPO on the roots of a group of 4 equals the hand-computed values, with and without std', () => {
    const { credits, stats } = run();
    credits.forEach((ep, i) => expect(ep[0].advantage).toBeCloseTo(A[i], 12));
    expect(credits.map((ep) => ep[0].reward)).toEqual(rewards);
    const dr = run({ stdNormalize: false }).credits;
    [0.675, 0.175, -0.325, -0.525].forEach((a, i) => expect(dr[i][0].advantage).toBeCloseTo(a, 12));
    // Reference gating catches the three clones over budget (episodes 0, 2, 3): 3 of 12 contexts.
    expect(stats).toMatchObject({ groups: 1, zeroVarianceGroups: 0, gatedContexts: 3, contexts: 12 });
  });

  it('measures what gating removes: the share of |A|·tokens in gated contexts, and the mean advantage gated clones would have had', () => {
    const abs = A.map(Math.abs);
    // Ungated advantages: roots A_i; clones A_i (factor 1) except at R = 0 (factor 0). Tokens: root 20,
    // answered 9, over budget 16, no answer early 5, spawn early 3.
    const total = abs[0] * (20 + 9 + 16 + 5) + abs[1] * 20 + abs[2] * 20 + abs[3] * (20 + 9 + 16 + 3);
    const reference = run().stats;
    expect(reference.gradientMass).toBeCloseTo(total, 12);
    expect(reference.gatedMass).toBeCloseTo(16 * abs[0] + 16 * abs[3], 12);
    expect(reference.gatedClones).toBe(3);
    expect(reference.gatedCloneAdvantage / reference.gatedClones).toBeCloseTo((A[0] + 0 + A[3]) / 3, 12);
    // The protocol gate also catches the clone without an answer and the one that spawned.
    const protocol = run({ gateMode: 'protocol' }).stats;
    expect(protocol.gatedMass).toBeCloseTo((16 + 5) * abs[0] + (16 + 3) * abs[3], 12);
    expect(protocol.gatedCloneAdvantage / protocol.gatedClones).toBeCloseTo((2 * A[0] + 0 + 2 * A[3]) / 5, 12);
    // With gating off nothing is gated, and the figures say what the gate would have removed.
    const off = run({ gating: false }).stats;
    expect(off.gatedContexts).toBe(0);
    expect([off.gradientMass, off.gatedMass, off.gatedClones]).toEqual([reference.gradientMass, reference.gatedMass, 3]);
    // A group without signal has no mass.
    const flat = computeAdvantages(episodes, [1, 1, 1, 1], groups, TABLE_GRPO.advantage).stats;
    expect([flat.gradientMass, flat.gatedMass, flat.gatedClones]).toEqual([0, 0, 0]);
  });

  it('ratio credit: r_clone = R for an ungated clone (factor 1 at R > 0 and R < 0, 0 at R = 0), 0 for a gated one', () => {
    const { credits } = run();
    const credit = (i: number, j: number) => credits[i][j];
    const A = credits.map((ep) => ep[0].advantage); // the roots' (checked above to 12 digits)
    // R = 1: answered clone and the early answerless clone (not gated in reference mode) inherit A exactly.
    expect(credit(0, 1)).toEqual({ advantage: A[0], weight: 1, gated: false, reward: 1 });
    expect(credit(0, 3)).toEqual({ advantage: A[0], weight: 1, gated: false, reward: 1 });
    // R = −0.2: factor (−0.2)/(−0.2) = 1 (d = sign(R)·|R|).
    expect(credit(3, 1)).toEqual({ advantage: A[3], weight: 1, gated: false, reward: -0.2 });
    expect(credit(3, 3)).toEqual({ advantage: A[3], weight: 1, gated: false, reward: -0.2 });
    // R = 0: d = +1e-8 (sign(0) = +1), r_clone = 0 → factor 0; recorded as 0, not −0.
    expect(credit(2, 1)).toEqual({ advantage: 0, weight: 1, gated: false, reward: 0 });
    expect(Object.is(credit(2, 1).advantage, 0)).toBe(true);
    // Gated clones (over budget) at R > 0, R = 0, R < 0: r_clone = 0, effective advantage 0, KL kept (weight 1).
    for (const i of [0, 2, 3]) expect(credit(i, 2)).toEqual({ advantage: 0, weight: 1, gated: true, reward: 0 });
  });

  it('the ratio factor is the reference formula: clamp(r_clone / (sign(R)·max(|R|, 1e-8)), ±1.5)', () => {
    expect(ratioFactor(0, 0, 1.5)).toBe(0);
    expect(ratioFactor(0.3, 0, 1.5)).toBe(1.5);
    expect(ratioFactor(-0.3, 0, 1.5)).toBe(-1.5);
    expect(ratioFactor(0.4, 0.8, 1.5)).toBe(0.5);
    expect(ratioFactor(0.4, -0.8, 1.5)).toBe(-0.5);
    expect(ratioFactor(-2, 0.5, 1.5)).toBe(-1.5);
    expect(ratioFactor(1e-9, 1e-9, 1.5)).toBeCloseTo(0.1, 12); // |R| < 1e-8: d = 1e-8
    expect(ratioFactor(-1e-9, -1e-9, 1.5)).toBeCloseTo(0.1, 12);
  });

  it('without gating every clone gets r_clone = R: no 0.05 penalty for a missing answer', () => {
    const { credits, stats } = run({ gating: false });
    const A = credits.map((ep) => ep[0].advantage);
    expect(credits[0][2]).toEqual({ advantage: A[0], weight: 1, gated: false, reward: 1 });
    expect(credits[3][2]).toEqual({ advantage: A[3], weight: 1, gated: false, reward: -0.2 });
    expect(credits[2][2]).toEqual({ advantage: 0, weight: 1, gated: false, reward: 0 });
    expect(stats.gatedContexts).toBe(0);
  });

  it('protocol gating catches every clone violation; broadcast credit; a gated clone without KL leaves the batch', () => {
    const protocol = run({ gateMode: 'protocol' });
    expect(protocol.credits[0][3]).toEqual({ advantage: 0, weight: 1, gated: true, reward: 0 });
    expect(protocol.credits[3][3]).toEqual({ advantage: 0, weight: 1, gated: true, reward: 0 });
    expect(protocol.stats.gatedContexts).toBe(5);
    const broadcast = run({ credit: 'broadcast' }).credits;
    const A = broadcast.map((ep) => ep[0].advantage);
    expect(broadcast[2][1]).toEqual({ advantage: A[2], weight: 1, gated: false, reward: 0 }); // R = 0 does not matter
    expect(broadcast[3][1].advantage).toBe(A[3]);
    expect(broadcast[3][2]).toEqual({ advantage: 0, weight: 1, gated: true, reward: 0 });
    const noKl = run({ gatedKl: false }).credits;
    expect(noKl[0][2]).toEqual({ advantage: 0, weight: 0, gated: true, reward: 0 });
    expect(noKl[0][1].weight).toBe(1);
  });

  it('skips a zero-variance group and gates roots that broke the protocol only with gateRoots', () => {
    const skipped = computeAdvantages([{ contexts: [root(), answered()] }, { contexts: [root()] }], [0.2, 0.2], [[0, 1]], TABLE_GRPO.advantage);
    expect(skipped.credits).toEqual([
      [
        { advantage: 0, weight: 0, gated: false, reward: 0.2 },
        { advantage: 0, weight: 0, gated: false, reward: 0.2 },
      ],
      [{ advantage: 0, weight: 0, gated: false, reward: 0.2 }],
    ]);
    expect(skipped.stats.zeroVarianceGroups).toBe(1);
    const eps = [{ contexts: [root('malformed_spawn')] }, { contexts: [root()] }];
    // Rewards 0, 1: A = ∓0.5/(std 0.7071068 + 1e-6).
    const off = computeAdvantages(eps, [0, 1], [[0, 1]], TABLE_GRPO.advantage);
    expect(off.credits[0][0]).toMatchObject({ gated: false, weight: 1 });
    expect(off.credits[0][0].advantage).toBeCloseTo(-0.7071057812, 9);
    const on = computeAdvantages(eps, [0, 1], [[0, 1]], { ...TABLE_GRPO.advantage, gateRoots: true });
    expect(on.credits[0][0]).toEqual({ advantage: 0, weight: 1, gated: true, reward: 0 });
    expect(on.credits[1][0]).toMatchObject({ gated: false, weight: 1 });
    expect(computeAdvantages(eps, [0, 1], [[0, 1]], { ...TABLE_GRPO.advantage, gateRoots: true, gatedKl: false }).credits[0][0].weight).toBe(0);
  });
});

describe('gating modes on every violation class', () => {
  const modes = {
    off: { gating: false, gateMode: 'reference', gateRoots: true },
    reference: { gating: true, gateMode: 'reference', gateRoots: false },
    protocol: { gating: true, gateMode: 'protocol', gateRoots: false },
    'reference + roots': { gating: true, gateMode: 'reference', gateRoots: true },
  } as const;
  type Mode = keyof typeof modes;
  const gatedIn = (ctx: CreditedContext) => (Object.keys(modes) as Mode[]).filter((m) => isGated(ctx, modes[m]));

  it('clones: reference gates no answer with the budget spent, protocol any violation', () => {
    const cases: [string, CreditedContext, Mode[]][] = [
      ['answered', clone('3', null, 9), []],
      ['answered on its last budget token', clone('3', null, 16), []],
      ['clone_over_budget', clone(null, 'clone_over_budget', 16), ['reference', 'protocol', 'reference + roots']],
      ['clone_no_answer before the budget', clone(null, 'clone_no_answer', 7), ['protocol']],
      ['clone_no_answer on its last budget token', clone(null, 'clone_no_answer', 16), ['reference', 'protocol', 'reference + roots']],
      ['clone_spawn before the budget', clone(null, 'clone_spawn', 3), ['protocol']],
      ['clone_spawn on its last budget token', clone(null, 'clone_spawn', 16), ['reference', 'protocol', 'reference + roots']],
      ['reserved_token written by a clone', clone(null, 'reserved_token', 2), ['protocol']],
    ];
    for (const [name, ctx, expected] of cases) expect(gatedIn(ctx), name).toEqual(expected);
    // Every clone class is covered above.
    for (const v of CLONE_VIOLATIONS) expect(cases.some(([, c]) => c.violation === v)).toBe(true);
  });

  it('roots: only with gateRoots, and only protocol breaks (not a missing or long answer)', () => {
    const rootClasses = VIOLATIONS.filter((v) => !CLONE_VIOLATIONS.has(v));
    const expected: Record<string, Mode[]> = {
      malformed_spawn: ['reference + roots'],
      too_many_clones: ['reference + roots'],
      too_many_rounds: ['reference + roots'],
      reserved_token: ['reference + roots'],
      root_over_max: [],
      root_no_answer: [],
    };
    expect(Object.keys(expected).sort()).toEqual([...rootClasses].sort());
    for (const v of rootClasses) expect(gatedIn(root(v)), v).toEqual(expected[v]);
    expect(gatedIn(root())).toEqual([]);
  });
});

describe('a gated clone in the loss', () => {
  const config = presetConfig('tiny');
  let params: ReturnType<typeof initParams>;
  let reference: ReturnType<typeof initParams>;
  beforeAll(async () => {
    await initBackend('wasm');
    params = initParams(config, 3);
    reference = initParams(config, 4);
  });

  /** A random context whose behaviour log-probs are the current policy's (ρ = 1), with a credit. */
  async function sequence(seed: number, credit: Pick<ContextCredit, 'advantage' | 'weight'>): Promise<RlSequence> {
    const rng = new Rng(seed);
    const tokens = Array.from({ length: 12 }, () => rng.int(21, config.vocabSize - 1));
    const actions = tokens.slice(1).map((_, t) => (t >= 3 ? 1 : 0));
    const lp = tf.tidy(() =>
      targetLogProbs(params, config, tf.tensor2d([tokens.slice(0, -1)], [1, 11], 'int32'), tf.tensor2d([tokens.slice(1)], [1, 11], 'int32')),
    );
    const old = Array.from(await lp.data()).map((v, t) => (actions[t] ? v : 0));
    lp.dispose();
    return { tokens, actions, oldLogprobs: old, advantage: credit.advantage, weight: credit.weight };
  }

  async function grads(seqs: RlSequence[], beta: number): Promise<{ flat: Float32Array; trainedTokens: number }> {
    const c = { ...TABLE_GRPO.loss, beta };
    const withRef = await withReferenceLogprobs(reference === null ? null : toyScorer(reference, config), seqs, c, 1000);
    const batches = packRl(withRef, aggregationWeights(withRef, c.aggregation), 1000);
    const r = await policyGradients(toyScorer(params, config), batches, c);
    const parts: number[] = [];
    for (const [name, p] of params) parts.push(...(r.grads.has(name) ? await r.grads.get(name)!.data() : new Float32Array(p.size)));
    r.grads.forEach((t) => t.dispose());
    return { flat: Float32Array.from(parts), trainedTokens: r.trainedTokens };
  }
  const maxAbs = (a: Float32Array) => a.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
  const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

  /** Credits of episode 0's clones (R = 1, A = 1.2552): [answered, gated over budget]. */
  const creditsOf = (c: Partial<AdvantageConfig> = {}) => run(c).credits[0];

  it('gives exactly zero policy gradient and keeps its KL gradient, like an ungated context with advantage 0', async () => {
    const [, answeredCredit, gatedCredit] = creditsOf();
    expect(gatedCredit).toEqual({ advantage: 0, weight: 1, gated: true, reward: 0 });
    const gated = await sequence(7, gatedCredit);
    // β = 0: its policy-gradient term alone is exactly zero, though its tokens are in the batch.
    const pg = await grads([gated], 0);
    expect(pg.trainedTokens).toBe(8);
    expect(pg.flat.every((x) => x === 0)).toBe(true);
    // β > 0 against a different reference: its KL gradient acts, exactly as an ungated context with advantage 0.
    const kl = await grads([gated], 0.1);
    expect(maxAbs(kl.flat)).toBeGreaterThan(1e-6);
    const ungatedZero = await grads([await sequence(7, { advantage: 0, weight: 1 })], 0.1);
    expect(kl.flat).toEqual(ungatedZero.flat);
    // In a batch with trained contexts: its tokens change nothing of the policy gradient (β = 0) …
    const others = [await sequence(1, answeredCredit), await sequence(2, { advantage: -0.6, weight: 1 })];
    const other = { ...(await sequence(9, gatedCredit)) };
    const a = await grads([...others, gated], 0);
    expect((await grads([...others, other], 0)).flat).toEqual(a.flat);
    // … while its advantage before gating would (the check can fail).
    expect(maxDiff((await grads([...others, { ...gated, advantage: A[0] }], 0)).flat, a.flat)).toBeGreaterThan(1e-5);
    // … and its KL term does once β > 0.
    expect(maxDiff((await grads([...others, gated], 0.1)).flat, (await grads([...others, other], 0.1)).flat)).toBeGreaterThan(1e-7);
  });

  it('without gatedKl leaves the batch: no gradient at all, even with β > 0', async () => {
    const [, answeredCredit, gatedCredit] = creditsOf({ gatedKl: false });
    expect(gatedCredit.weight).toBe(0);
    const others = [await sequence(1, answeredCredit), await sequence(2, { advantage: -0.6, weight: 1 })];
    const base = await grads(others, 0.1);
    const withGated = await grads([...others, await sequence(7, gatedCredit)], 0.1);
    expect(withGated.flat).toEqual(base.flat);
    expect(withGated.trainedTokens).toBe(base.trainedTokens);
  });

  it('leaves no tensors behind', async () => {
    const seqs = [await sequence(1, { advantage: 1, weight: 1 }), await sequence(7, { advantage: 0, weight: 1 })];
    await grads(seqs, 0.1);
    const before = tf.memory().numTensors;
    await grads(seqs, 0.1);
    expect(tf.memory().numTensors).toBe(before);
  });
});
