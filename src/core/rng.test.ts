import { describe, expect, it } from 'vitest';
import { lookupCases } from './eval/lookup';
import { sftSequences } from './sft/sft';
import { Rng, SEED_MAX, checkSeed, murmur3x86_128 } from './rng';
import { arithmetic } from './tasks/arithmetic';
import { Tokenizer } from './tokenizer/tokenizer';
import { defaultSftConfig } from './runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_SFT = defaultSftConfig();

const first = (r: Rng, n = 4) => Array.from({ length: n }, () => r.nextU32());
const popcount = (x: number) => {
  let c = 0;
  for (let v = x >>> 0; v; v >>>= 1) c += v & 1;
  return c;
};

describe('Rng seeds', () => {
  it('keeps the streams of seeds below 2^32 exactly as before (recorded from the old constructor)', () => {
    expect(first(new Rng(0))).toEqual([4205396811, 3543653536, 1222415357, 3047368389]);
    expect(first(new Rng(1))).toEqual([1828152527, 3394835397, 2967886022, 2251045104]);
    expect(first(new Rng(42))).toEqual([1028872839, 2516511472, 400437680, 853279530]);
    expect(first(new Rng(12345))).toEqual([2345461488, 1344865159, 2974739204, 3448212715]);
    expect(first(new Rng(2 ** 31 - 1))).toEqual([3803216344, 3425584514, 392159176, 1689447961]);
    // fork() seeds with a full u32, so [2^31, 2^32) is kept too.
    expect(first(new Rng(3_000_000_000))).toEqual([1993940349, 1764999790, 4235715611, 3637859213]);
    expect(first(new Rng(2 ** 32 - 1))).toEqual([1413747962, 91561161, 3282502067, 2190738929]);
    expect(first(new Rng(12345).fork(), 2)).toEqual([1971573898, 1735052837]);
  });

  it('uses all 53 bits: seeds 2^32 apart differ, and the largest seed is accepted', () => {
    for (const s of [0, 5, 12345, 2 ** 31]) {
      expect(first(new Rng(s + 2 ** 32))).not.toEqual(first(new Rng(s)));
      expect(first(new Rng(s + 2 ** 33))).not.toEqual(first(new Rng(s + 2 ** 32)));
    }
    expect(first(new Rng(SEED_MAX))).not.toEqual(first(new Rng(SEED_MAX - 1)));
    expect(first(new Rng(SEED_MAX))).toEqual(first(new Rng(SEED_MAX)));
  });

  it('rejects seeds that are not integers in [0, 2^53 − 1], naming the field', () => {
    for (const bad of [-1, 1.5, Number.NaN, Infinity, 2 ** 53]) {
      expect(() => new Rng(bad)).toThrow(/seed must be an integer in \[0, 2\^53 − 1 = 9007199254740991\]/);
      expect(() => Rng.stream(bad, 'x', 0)).toThrow(/seed must be an integer/);
    }
    expect(checkSeed(0, 'cfg.seed')).toBeNull();
    expect(checkSeed(SEED_MAX, 'cfg.seed')).toBeNull();
    expect(checkSeed(-3, 'cfg.seed')).toBe('cfg.seed must be an integer in [0, 2^53 − 1 = 9007199254740991] (got -3)');
    expect(checkSeed('7', 'seed')).toBe('seed must be an integer in [0, 2^53 − 1 = 9007199254740991] (got "7")');
    expect(() => Rng.stream(1, 'x', 0, -1)).toThrow(/rng stream 'x': index 1 must be an integer in \[0, 2\^53 − 1/);
    expect(() => Rng.stream(1, 'x', 0.5)).toThrow(/index 0 must be an integer/);
    expect(() => Rng.stream(1, '', 0)).toThrow(/purpose must be a non-empty string/);
  });
});

describe('MurmurHash3 x86_128', () => {
  it('matches the SMHasher verification value 0xB3ECE62A', () => {
    // SMHasher's VerificationTest: hash keys 0..i-1 with seed 256 − i, then hash the 256 digests.
    const key = Uint8Array.from({ length: 256 }, (_, i) => i);
    const digests = new Uint8Array(16 * 256);
    for (let i = 0; i < 256; i++) {
      murmur3x86_128(key.subarray(0, i), 256 - i).forEach((w, lane) => {
        for (let b = 0; b < 4; b++) digests[16 * i + 4 * lane + b] = (w >>> (8 * b)) & 0xff;
      });
    }
    expect(murmur3x86_128(digests, 0)[0]).toBe(0xb3ece62a);
    expect(murmur3x86_128(new Uint8Array(0), 0)).toEqual([0, 0, 0, 0]);
  });
});

describe('Rng.stream', () => {
  it('is deterministic and separates purposes, indices and their order', () => {
    expect(first(Rng.stream(7, 'grpo-step', 3))).toEqual(first(Rng.stream(7, 'grpo-step', 3)));
    const variants = [
      Rng.stream(7, 'grpo-step', 3),
      Rng.stream(7, 'sft-data', 3),
      Rng.stream(7, 'grpo-step', 4),
      Rng.stream(8, 'grpo-step', 3),
      Rng.stream(7, 'grpo-step'),
      Rng.stream(7, 'grpo-step', 3, 0),
      Rng.stream(7, 'frontier-episode', 1, 2),
      Rng.stream(7, 'frontier-episode', 2, 1),
      // The old formula's collision: i * 131 + j made (0, 131) equal (1, 0).
      Rng.stream(7, 'frontier-episode', 0, 131),
      Rng.stream(7, 'frontier-episode', 1, 0),
      new Rng(7),
    ].map((r) => first(r).join(','));
    expect(new Set(variants).size).toBe(variants.length);
  });

  it('gives different data per step at huge seeds, where seed * 1_000_003 + step lost the step', () => {
    for (const seed of [1e10, 1e15, SEED_MAX]) {
      expect(seed * 1_000_003 + 1).toBe(seed * 1_000_003); // the bug this replaces
      expect(first(Rng.stream(seed, 'grpo-step', 1))).not.toEqual(first(Rng.stream(seed, 'grpo-step', 0)));
      expect(first(Rng.stream(seed - 2 ** 32, 'grpo-step', 0))).not.toEqual(first(Rng.stream(seed, 'grpo-step', 0)));
    }
    const tok = Tokenizer.builtin();
    const cfg = { ...TABLE_SFT, task: 'arithmetic', steps: 2, seed: 1e15, batchTokens: 256 };
    const step = (s: number) => sftSequences(arithmetic, arithmetic.defaultOptions, cfg, s, (t) => tok.encode(t)).map((q) => q.tokens);
    expect(step(1)).not.toEqual(step(0));
    expect(step(0)).toEqual(step(0));
    expect(lookupCases(3, 4, 1e15)).not.toEqual(lookupCases(4, 4, 1e15));
  });

  it('flips about half the bits of the first output between neighbouring steps (no linear structure)', () => {
    // For a linear seed the first outputs of adjacent steps are related; a hashed state makes
    // their XOR look like 32 fair coins: mean popcount 16, s.d. of the mean ≈ 2.8 / √n.
    const n = 2000;
    let bits = 0;
    const seen = new Set<number>();
    for (let step = 0; step < n; step++) {
      const a = Rng.stream(1e15, 'grpo-step', step).nextU32();
      bits += popcount(a ^ Rng.stream(1e15, 'grpo-step', step + 1).nextU32());
      seen.add(a);
    }
    expect(bits / n).toBeGreaterThan(15.6);
    expect(bits / n).toBeLessThan(16.4);
    expect(seen.size).toBeGreaterThan(n - 2);
  });
});
