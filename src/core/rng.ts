/**
 * Seeded pseudo-random numbers. Everything random in the core (init, task generation,
 * sampling) draws from an Rng so that a seed and a config give the same run.
 * Algorithm: sfc32 (fast, 128-bit state, serialisable).
 *
 * Seeds are integers in [0, SEED_MAX] = [0, 2^53 − 1]; anything else is rejected.
 * - A seed below 2^32 fills the state through splitmix32, as it always has, so shipped seeds
 *   (the held-out set's 12345, model init's `new Rng(seed)`) and `fork()` keep their streams.
 * - A seed from 2^32 up is hashed, all 53 bits, with MurmurHash3 x86_128 into the state, so
 *   seeds 2^32 apart no longer collide.
 *
 * Streams: `Rng.stream(seed, purpose, ...indices)` is the one way to derive a generator per
 * step, episode or case. It hashes the seed's 64-bit little-endian words, the purpose's UTF-8
 * bytes (length-prefixed) and each index's 64-bit words with MurmurHash3 x86_128, and takes the
 * 128-bit digest as the sfc32 state. The encoding is injective, so distinct (seed, purpose,
 * indices) give unrelated streams: no linear formula like `seed * 1_000_003 + step` that
 * overflows 2^53 for large seeds or makes (seed, step + 1) equal (seed + 1, step − 1_000_002).
 */

/** The largest seed (and stream index) accepted: 2^53 − 1. */
export const SEED_MAX = Number.MAX_SAFE_INTEGER;

/** Why `value` is not a seed, naming `name` and the range; null when it is one. */
export function checkSeed(value: unknown, name: string): string | null {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= SEED_MAX) return null;
  const shown = typeof value === 'number' ? String(value) : JSON.stringify(value);
  return `${name} must be an integer in [0, 2^53 − 1 = ${SEED_MAX}] (got ${shown})`;
}

function splitmix32(state: number): [number, number] {
  state = (state + 0x9e3779b9) | 0;
  let z = state;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  z ^= z >>> 16;
  return [state, z >>> 0];
}

const rotl = (x: number, r: number): number => (x << r) | (x >>> (32 - r));

function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return h ^ (h >>> 16);
}

// Per lane: the key multipliers and rotation, then the state rotation and addend.
const C = [0x239b961b, 0xab0e9789, 0x38b34ae5, 0xa1e38b93];
const K_ROT = [15, 16, 17, 18];
const H_ROT = [19, 17, 15, 13];
const H_ADD = [0x561ccd1b, 0x0bcaa747, 0x96cd1c35, 0x32ac3b17];

const mixKey = (k: number, lane: number): number => Math.imul(rotl(Math.imul(k, C[lane]), K_ROT[lane]), C[(lane + 1) & 3]);

/** MurmurHash3 x86_128 (Appleby, SMHasher) of `bytes`: four 32-bit words h1..h4, unsigned. */
export function murmur3x86_128(bytes: Uint8Array, seed = 0): [number, number, number, number] {
  const h = [seed | 0, seed | 0, seed | 0, seed | 0];
  const n = bytes.length;
  const word = (at: number): number => bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24);
  const blocks = n - (n & 15);
  for (let at = 0; at < blocks; at += 16) {
    for (let lane = 0; lane < 4; lane++) {
      h[lane] ^= mixKey(word(at + 4 * lane), lane);
      h[lane] = (Math.imul(rotl(h[lane], H_ROT[lane]) + h[(lane + 1) & 3], 5) + H_ADD[lane]) | 0;
    }
  }
  for (let lane = 0; lane < 4; lane++) {
    let k = 0;
    for (let b = Math.min(n - blocks, 4 * lane + 4) - 1; b >= 4 * lane; b--) k = (k << 8) | bytes[blocks + b];
    if (n - blocks > 4 * lane) h[lane] ^= mixKey(k, lane);
  }
  for (let lane = 0; lane < 4; lane++) h[lane] ^= n;
  h[0] = (h[0] + h[1] + h[2] + h[3]) | 0;
  for (let lane = 1; lane < 4; lane++) h[lane] = (h[lane] + h[0]) | 0;
  for (let lane = 0; lane < 4; lane++) h[lane] = fmix32(h[lane]);
  h[0] = (h[0] + h[1] + h[2] + h[3]) | 0;
  for (let lane = 1; lane < 4; lane++) h[lane] = (h[lane] + h[0]) | 0;
  return [h[0] >>> 0, h[1] >>> 0, h[2] >>> 0, h[3] >>> 0];
}

/** Little-endian bytes of an integer in [0, 2^53): low 32 bits, then high. */
function pushU64(out: number[], x: number): void {
  const lo = x % 4294967296;
  const hi = Math.floor(x / 4294967296);
  for (const w of [lo, hi]) out.push(w & 0xff, (w >>> 8) & 0xff, (w >>> 16) & 0xff, (w >>> 24) & 0xff);
}

function requireSeed(value: number, name: string): void {
  const err = checkSeed(value, name);
  if (err !== null) throw new Error(err);
}

const utf8 = new TextEncoder();

export class Rng {
  private a = 0;
  private b = 0;
  private c = 0;
  private d = 0;

  /** `seed`: an integer in [0, SEED_MAX]; see the file header for how it fills the state. */
  constructor(seed: number) {
    requireSeed(seed, 'seed');
    if (seed < 4294967296) {
      let s = seed | 0;
      const out: number[] = [];
      for (let i = 0; i < 4; i++) {
        const [ns, z] = splitmix32(s);
        s = ns;
        out.push(z);
      }
      this.init(out);
    } else {
      const bytes: number[] = [];
      pushU64(bytes, seed);
      this.init(murmur3x86_128(Uint8Array.from(bytes)));
    }
  }

  /**
   * The generator for one use of a run's seed: `purpose` names the use ('grpo-prompts',
   * 'eval-episode', …) and `indices` (step, problem, sample…) pick the instance. Each index is
   * an integer in [0, SEED_MAX].
   */
  static stream(seed: number, purpose: string, ...indices: number[]): Rng {
    requireSeed(seed, 'seed');
    if (typeof purpose !== 'string' || purpose.length === 0) throw new Error('rng stream: purpose must be a non-empty string');
    indices.forEach((x, i) => requireSeed(x, `rng stream '${purpose}': index ${i}`));
    const name = utf8.encode(purpose);
    const bytes: number[] = [];
    pushU64(bytes, seed);
    bytes.push(name.length & 0xff, (name.length >>> 8) & 0xff, (name.length >>> 16) & 0xff, (name.length >>> 24) & 0xff, ...name);
    for (const x of indices) pushU64(bytes, x);
    const r = new Rng(0);
    r.init(murmur3x86_128(Uint8Array.from(bytes)));
    return r;
  }

  /** Set the state from four words, then discard 12 outputs so the first draws are well mixed. */
  private init(words: readonly number[]): void {
    [this.a, this.b, this.c, this.d] = words.map((w) => w | 0);
    for (let i = 0; i < 12; i++) this.nextU32();
  }

  /** Uniform 32-bit unsigned integer. */
  nextU32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** Integer uniform in [lo, hi] inclusive. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** Standard normal (Box–Muller). */
  normal(): number {
    let u = this.next();
    while (u <= 1e-12) u = this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[Math.floor(this.next() * items.length)];
  }

  /** A copy of `items` in uniformly random order (Fisher–Yates from the back). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(0, i);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }

  bool(p = 0.5): boolean {
    return this.next() < p;
  }

  /** A fresh generator whose stream is derived from this one (for sub-tasks that must not shift the parent). */
  fork(): Rng {
    return new Rng(this.nextU32());
  }

  getState(): [number, number, number, number] {
    return [this.a, this.b, this.c, this.d];
  }

  static fromState(state: readonly number[]): Rng {
    if (state.length !== 4 || !state.every((x) => Number.isInteger(x))) {
      throw new Error('rng state must be four integers');
    }
    const r = new Rng(0);
    [r.a, r.b, r.c, r.d] = state.map((x) => x | 0);
    return r;
  }
}
