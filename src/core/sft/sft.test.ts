import { describe, expect, it } from 'vitest';
import { arithmetic } from '../tasks/arithmetic';
import { multihop } from '../tasks/multihop';
import { Tokenizer } from '../tokenizer/tokenizer';
import { T } from '../tokenizer/vocab';
import { SLOPPY_CLONE_TOKENS, type TaskMixEntry, sftMixSequences, sftSequences, sloppyClone } from './sft';
import { defaultSftConfig } from '../runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_SFT = defaultSftConfig();

const tok = Tokenizer.builtin();
const encode = (t: string) => tok.encode(t);
// The mix's spawn limits: multihop needs a clone per chunk (the run-config table takes the largest).
const cfg = {
  ...TABLE_SFT,
  task: 'arithmetic,multihop',
  steps: 10,
  seed: 3,
  batchTokens: 4096,
  limits: { ...TABLE_SFT.limits, maxClonesPerRound: 16, maxRounds: 4 },
};
const mix: TaskMixEntry[] = [
  { task: arithmetic, opts: arithmetic.defaultOptions },
  { task: multihop, opts: multihop.defaultOptions },
];

describe('SFT data', () => {
  it('mixes tasks, deterministically per step, with loss only on generated tokens', () => {
    const a = sftMixSequences(mix, cfg, 4, encode);
    expect(sftMixSequences(mix, cfg, 4, encode)).toEqual(a);
    expect(sftMixSequences(mix, cfg, 5, encode)).not.toEqual(a);
    const multihopSeqs = a.filter((s) => s.tokens.includes(T.ctx) || tok.decode(s.tokens).includes(' k1:') || /keys k1/.test(tok.decode(s.tokens)));
    expect(multihopSeqs.length).toBeGreaterThan(0);
    expect(multihopSeqs.length).toBeLessThan(a.length);
    for (const s of a) {
      expect(s.weights).toHaveLength(s.tokens.length - 1);
      // The token after <sep> is the first the model writes; the prompt before it is never trained.
      const sep = s.tokens.indexOf(T.sep);
      expect(s.weights.slice(0, sep).every((w) => w === 0)).toBe(true);
      expect(s.weights[sep]).toBe(1);
    }
  });

  it('draws tasks by the mix weights and rejects a bad weight', () => {
    // Count problems by their root sequence: arithmetic roots hold no chunk keys.
    const roots = (w: number[]) => {
      const seqs = Array.from({ length: 20 }, (_, step) =>
        sftMixSequences(
          mix.map((m, i) => ({ ...m, weight: w[i] })),
          cfg,
          step,
          encode,
        ),
      ).flat();
      const texts = seqs.map((s) => tok.decode(s.tokens)).filter((t) => t.startsWith('<root>'));
      const multi = texts.filter((t) => /keys k1|k1:/.test(t)).length;
      return multi / texts.length;
    };
    expect(roots([1, 9])).toBeGreaterThan(0.8);
    expect(roots([9, 1])).toBeLessThan(0.2);
    // Equal weights draw the same data as no weights.
    expect(
      sftMixSequences(
        mix.map((m) => ({ ...m, weight: 2 })),
        cfg,
        4,
        encode,
      ),
    ).toEqual(sftMixSequences(mix, cfg, 4, encode));
    expect(() => sftMixSequences([{ ...mix[0], weight: 0 }, mix[1]], cfg, 0, encode)).toThrow(
      /weight of arithmetic in the mix must be a positive number \(got 0\)/,
    );
  });
  it('takes the teacher from the config: the expert by default, the naive one with its failed clones', () => {
    const arith = [mix[0]];
    const one = { ...cfg, task: 'arithmetic', limits: TABLE_SFT.limits, delegateFraction: 1 };
    expect(TABLE_SFT.teacher).toBe('expert');
    const expert = sftMixSequences(arith, one, 2, encode);
    const naive = sftMixSequences(arith, { ...one, teacher: 'naive' }, 2, encode);
    expect(naive).not.toEqual(expert);
    // Only the naive teacher gives too-small budgets, so only its roots see <fail>.
    expect(expert.some((q) => q.tokens.includes(T.fail))).toBe(false);
    expect(naive.some((q) => q.tokens.includes(T.fail))).toBe(true);
  });

  it("leaves out demonstrations longer than the model's window, and says so when none fits", () => {
    const long: TaskMixEntry[] = [{ task: multihop, opts: multihop.validateOptions({ chunks: 6, perChunk: 4, filler: 24 }) }];
    const c = { ...cfg, task: 'multihop', delegateFraction: 0.5 };
    // Without a window the long-context setting's monolithic demonstrations run past 256 positions.
    expect(sftMixSequences(long, c, 0, encode).some((q) => q.tokens.length > 256)).toBe(true);
    for (let step = 0; step < 3; step++) {
      const seqs = sftMixSequences(long, c, step, encode, 256);
      expect(seqs.length).toBeGreaterThan(0);
      expect(seqs.every((q) => q.tokens.length <= 256)).toBe(true);
      // What is left are delegations: a root and its clones, whose chunks each fit.
      expect(seqs.some((q) => q.tokens[0] === T.clone)).toBe(true);
    }
    // Where everything fits, the window changes nothing.
    expect(sftMixSequences(mix, cfg, 4, encode, 256)).toEqual(sftMixSequences(mix, cfg, 4, encode));
    expect(() => sftMixSequences(long, { ...c, delegateFraction: 0 }, 0, encode, 256)).toThrow(/no demonstration of multihop fits the model's 256 positions/);
  });

  it('teaches sloppy clones on request: no answer block, past every budget; none asked, the data as before', () => {
    const clone = {
      role: 'clone' as const,
      segments: [
        { text: '<clone>2+12+71<sep>', kind: 'prompt' as const },
        { text: '=14+71=85<ans>85<eos>', kind: 'generated' as const },
      ],
    };
    const sloppy = sloppyClone(clone, encode);
    const text = sloppy.segments[1].text;
    expect(text.startsWith('=14+71=85=85')).toBe(true);
    expect(text).not.toContain('<ans>');
    expect(text).not.toContain('<eos>');
    expect(encode(text).length).toBeGreaterThanOrEqual(SLOPPY_CLONE_TOKENS);
    expect(sloppy.segments[0]).toBe(clone.segments[0]);
    // In a warm start's data: share 1 makes every clone sloppy and leaves roots and chains; share 0 changes nothing.
    const base = { ...TABLE_SFT, task: 'arithmetic', steps: 10, seed: 3, batchTokens: 2048, teacher: 'naive' as const, delegateFraction: 1 };
    const plain = sftSequences(arithmetic, arithmetic.defaultOptions, base, 2, encode);
    expect(sftSequences(arithmetic, arithmetic.defaultOptions, { ...base, sloppyClones: 0 }, 2, encode)).toEqual(plain);
    const all = sftSequences(arithmetic, arithmetic.defaultOptions, { ...base, sloppyClones: 1 }, 2, encode).map((q) => tok.decode(q.tokens));
    const clones = all.filter((t) => t.startsWith('<clone>'));
    expect(clones.length).toBeGreaterThan(0);
    for (const t of clones) expect(t).not.toContain('<ans>');
    expect(all.filter((t) => t.startsWith('<root>')).every((t) => t.includes('<ans>'))).toBe(true);
  });
});
