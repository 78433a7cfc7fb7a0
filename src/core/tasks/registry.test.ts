import { describe, expect, it } from 'vitest';
import { ARITHMETIC_DEFAULTS, arithmetic } from './arithmetic';
import { TASK_NAMES, getTask, withOptions } from './index';
import { multihop } from './multihop';
import { Rng } from '../rng';
import type { Problem } from './types';
import { Tokenizer } from '../tokenizer/tokenizer';
import { PRESETS } from '../model/config';

describe('task registry', () => {
  it('finds tasks by their own names and bundles them with validated options', () => {
    expect(TASK_NAMES).toEqual(['arithmetic', 'multihop']);
    expect(getTask('arithmetic')).toBe(arithmetic);
    const mh = withOptions('multihop', { hops: 3 });
    expect(mh.task).toBe(multihop);
    expect(mh.opts).toEqual({ chunks: 6, perChunk: 3, hops: 3, names: 1, filler: 0 });
    expect(withOptions('arithmetic').opts).toEqual(ARITHMETIC_DEFAULTS);
    expect(withOptions('arithmetic', null).opts).toEqual(ARITHMETIC_DEFAULTS);
  });

  it('names an unknown task and options that are not an object of valid fields', () => {
    expect(() => getTask('constructor')).toThrow('unknown task "constructor" (available: arithmetic, multihop)');
    expect(() => withOptions('sorting', {})).toThrow('unknown task "sorting" (available: arithmetic, multihop)');
    expect(() => withOptions('arithmetic', [3])).toThrow('arithmetic: options must be an object of fields (got [3])');
    expect(() => withOptions('multihop', 'hops=3')).toThrow('multihop: options must be an object of fields (got "hops=3")');
    expect(() => withOptions('arithmetic', { productRate: '0.5' })).toThrow('arithmetic: productRate must be in [0, 1] (got 0.5)');
    expect(() => withOptions('multihop', { hops: 9 })).toThrow(/multihop: hops must be an integer in \[1, 4\] \(got 9\)/);
  });

  it('offers named option settings that the task accepts, the default first, the long context of multihop among them', () => {
    for (const name of TASK_NAMES) {
      const { presets, defaultOptions } = getTask(name);
      expect(presets[0], name).toMatchObject({ name: 'default', options: {} });
      expect(new Set(presets.map((p) => p.name)).size, name).toBe(presets.length);
      for (const p of presets) expect(withOptions(name, p.options).opts, `${name} ${p.name}`).toEqual({ ...defaultOptions, ...p.options });
    }
    expect(multihop.presets.map((p) => p.label)).toEqual([
      'default (6 chunks × 3)',
      'long context (6 × 4 among filler, does not fit one window)',
      '6 × 3 among filler (fits one window)',
      '4 × 5 among filler (the first-visit demo)',
      'out of distribution (8 chunks, 3 hops)',
    ]);
    // Long context: the monolithic prompt outgrows every preset's positions, while the delegating root's fits easily.
    const long = withOptions('multihop', multihop.presets[1].options).opts;
    const tok = Tokenizer.builtin();
    const positions = Math.max(...Object.values(PRESETS).map((c) => c.nPositions));
    for (let i = 0; i < 20; i++) {
      const p = multihop.generate(new Rng(i), long, `p${i}`);
      expect(tok.encode(p.monoPrompt!).length, p.id).toBeGreaterThan(positions);
      expect(tok.encode(p.prompt).length, p.id).toBeLessThan(positions / 4);
    }
    // The filler setting fits one window, and the teacher's delegating root (its whole episode)
    // holds under half of it; out of distribution, the root's episode still fits.
    const byName = (n: string) => withOptions('multihop', multihop.presets.find((p) => p.name === n)!.options).opts;
    const rootTokens = (p: Problem) =>
      tok.encode(
        multihop
          .teacherDelegate(p, new Rng(0), { budgets: [8, 16, 32, 64, 128], ...multihop.rolloutDefaults, maxClonesPerRound: 16, maxRounds: 4 })!
          .contexts[0].segments.map((x) => x.text)
          .join(''),
      ).length;
    for (let i = 0; i < 20; i++) {
      const fits = multihop.generate(new Rng(i), byName('filler'), `f${i}`);
      const mono = tok.encode(fits.monoPrompt!).length;
      expect(mono, fits.id).toBeLessThan(positions);
      expect(rootTokens(fits), fits.id).toBeLessThanOrEqual(mono / 2);
      const ood = multihop.generate(new Rng(i), byName('ood'), `o${i}`);
      expect(rootTokens(ood), ood.id).toBeLessThan(positions);
    }
  });
});
