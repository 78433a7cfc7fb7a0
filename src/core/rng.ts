/**
 * Seeded pseudo-random numbers. Everything random in the core (init, task generation,
 * sampling) draws from an Rng so that a seed and a config give the same run.
 * Algorithm: sfc32 seeded through splitmix32; fast, 128-bit state, serialisable.
 */

function splitmix32(state: number): [number, number] {
  state = (state + 0x9e3779b9) | 0;
  let z = state;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  z ^= z >>> 16;
  return [state, z >>> 0];
}

export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    if (!Number.isFinite(seed)) throw new Error(`seed must be a finite number, got ${seed}`);
    let s = Math.floor(seed) | 0;
    const out: number[] = [];
    for (let i = 0; i < 4; i++) {
      const [ns, z] = splitmix32(s);
      s = ns;
      out.push(z);
    }
    [this.a, this.b, this.c, this.d] = out;
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
