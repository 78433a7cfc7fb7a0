/**
 * A ContextDecoder that replays token scripts: a context whose tokens so far are a prefix of a
 * script gets a logit spike at that script's next token, so greedy rollouts follow the scripts
 * exactly. For driving the real scheduler through chosen paths (tests, teacher replays).
 */
import type { ContextDecoder } from './scheduler';

export class ScriptedDecoder implements ContextDecoder {
  private history = new Map<number, number[]>();
  private next = 0;
  /** Most contexts open at once, and the batch size of every feed. */
  maxLive = 0;
  calls: number[] = [];

  constructor(
    private readonly scripts: number[][],
    readonly vocabSize: number,
    /** Describes a stuck context in the error (e.g. the tokenizer's decode). */
    private readonly describe: (tokens: number[]) => string = (t) => t.join(' '),
    readonly maxPositions = 256,
  ) {}

  open(): number {
    this.history.set(this.next, []);
    this.maxLive = Math.max(this.maxLive, this.history.size);
    return this.next++;
  }

  close(slot: number): void {
    this.history.delete(slot);
  }

  async feed(slots: number[], tokens: number[][]): Promise<Float32Array> {
    this.calls.push(slots.length);
    const V = this.vocabSize;
    const out = new Float32Array(slots.length * V);
    slots.forEach((slot, r) => {
      const h = this.history.get(slot)!;
      h.push(...tokens[r]);
      const script = this.scripts.find((s) => s.length > h.length && h.every((t, i) => s[i] === t));
      if (!script) throw new Error(`no script continues ${this.describe(h)}`);
      out[r * V + script[h.length]] = 50;
    });
    return out;
  }
}
