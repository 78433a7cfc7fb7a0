import { defaultRolloutConfig } from '../../runConfigTargets';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../rng';
import { Tokenizer } from '../../tokenizer/tokenizer';
import { clonePrompt, fanOut } from '../../protocol/grammar';
import { type MultihopOptions, multihop, notationOf, resolveChain } from './index';

/** The rollout settings these tests were written against: the table's, with a root limit of 224. */
const ROLLOUT = defaultRolloutConfig('arithmetic', { rootMaxTokens: 224 });

const opts = (o: Partial<MultihopOptions>) => multihop.validateOptions(o);

const tok = Tokenizer.builtin();

/**
 * An independent resolver: reads the monolithic prompt as a person would (line by line, words
 * ending in `.`: `name=value.` with two-letter names, the letter then its value with one;
 * filler words hold neither letters nor digits), and follows the question's variable to a number.
 */
function resolve(monoPrompt: string): string {
  const lines = monoPrompt.split('\n');
  const question = lines.pop()!.replace('?', '');
  const table: Record<string, string> = {};
  for (const line of lines) {
    const body = line.slice(line.indexOf(':') + 1);
    for (const word of body.trim().split(' ')) {
      if (!/[a-z0-9]/.test(word)) continue; // filler
      expect(word.endsWith('.')).toBe(true);
      const part = word.slice(0, -1);
      const [name, value] = part.includes('=') ? part.split('=') : [part[0], part.slice(1)];
      expect(table[name]).toBeUndefined(); // every variable is assigned once
      table[name] = value;
    }
  }
  let cur = question;
  for (let i = 0; i < 10 && !/^\d+$/.test(cur); i++) cur = table[cur];
  return cur;
}

/** The spawn limits a multihop run starts from (one clone per chunk, a round per hop). */
const MULTIHOP_LIMITS = { ...ROLLOUT, ...multihop.rolloutDefaults };

describe('multihop task', () => {
  it('generates problems whose answer an independent resolver confirms', () => {
    const rng = new Rng(1);
    for (let i = 0; i < 300; i++) {
      const chunks = rng.int(2, 6);
      const perChunk = rng.int(1, 4);
      const names = i % 2 === 0 ? 1 : 2;
      const filler = rng.bool(0.5) ? rng.int(1, 30) : 0;
      const o = multihop.validateOptions({ chunks, perChunk, hops: rng.int(1, Math.min(3, chunks * perChunk)), names, filler });
      const p = multihop.generate(rng, o, String(i));
      expect(resolve(p.monoPrompt!)).toBe(p.truth);
      expect(/ ([a-z]+)\?$/.exec(p.prompt)![1]).toHaveLength(names);
      for (const chunk of Object.values(p.context!)) {
        const words = chunk.split(' ');
        expect(words.filter((w) => /[a-z0-9]/.test(w))).toHaveLength(perChunk);
        expect(words.filter((w) => !/[a-z0-9]/.test(w)).join('')).toMatch(new RegExp(`^[#*_+]{${filler}}$`));
        if (names === 1) expect(chunk).not.toMatch(/[k=]/);
      }
      expect(Object.keys(p.context!)).toHaveLength(o.chunks);
      tok.encode(p.prompt);
      tok.encode(p.monoPrompt!);
    }
  });

  it('is seeded', () => {
    const a = multihop.generate(new Rng(4), multihop.defaultOptions, 'a');
    const b = multihop.generate(new Rng(4), multihop.defaultOptions, 'a');
    expect(a).toEqual(b);
  });

  it('spreads the chain over chunks so that one chunk does not answer the question', () => {
    const rng = new Rng(2);
    for (let i = 0; i < 100; i++) {
      const p = multihop.generate(rng, opts({ chunks: 6, perChunk: 3, hops: 2, names: 1 + (i % 2) }), String(i));
      const question = / ([a-z]+)\?$/.exec(p.prompt)![1];
      const note = notationOf(question.length);
      const holder = Object.values(p.context!).find((c) => note.parse(c).has(question))!;
      expect(/^\d+$/.test(note.parse(holder).get(question)!)).toBe(false);
    }
  });

  it.each([1, 2])('writes delegation demonstrations in notation %i: one round per hop, balanced clone lookups', (names) => {
    const p = multihop.generate(new Rng(3), opts({ chunks: 4, perChunk: 3, hops: 2, names }), 'x');
    const note = notationOf(names);
    const name = names === 1 ? '[a-z]' : '[a-z]{2}';
    const d = multihop.teacherDelegate(p, new Rng(0), MULTIHOP_LIMITS)!;
    const [root, ...clones] = d.contexts;
    const rootText = root.segments.map((s) => s.text).join('');
    expect(rootText.match(/<join>/g)).toHaveLength(2);
    // One-letter names: one spawn a round fanning out over the chunks; two-letter: a spawn per chunk.
    if (names === 1) expect(rootText.match(new RegExp(`<spawn><ctx>\\* ${name}\\?<b\\d+>`, 'g'))).toHaveLength(2);
    else expect(rootText.match(new RegExp(`<spawn><ctx>k\\d ${name}\\?<b\\d+>`, 'g'))).toHaveLength(8);
    expect(rootText.endsWith(`<ans>${p.truth}<eos>`)).toBe(true);
    // Per round: the clone that finds the hop's variable, one that does not, and four lookup
    // drills (two find, two do not); every clone answer is the one its own chunk gives.
    expect(clones).toHaveLength(12);
    const chain = resolveChain(p);
    const asked = [/ ([a-z]+)\?$/.exec(p.prompt)![1], chain[0]];
    for (const [r, round] of [clones.slice(0, 6), clones.slice(6)].entries()) {
      const texts = round.map((c) => c.segments[0].text);
      expect(texts.slice(0, 2).every((t) => t.endsWith(` ${asked[r]}?<sep>`))).toBe(true);
      expect(round.map((c) => c.segments[1].text.endsWith('<ans>none<eos>'))).toEqual([false, true, false, false, true, true]);
      for (const c of round) {
        const m = new RegExp(`^<clone>(.*) (${name})\\?<sep>$`).exec(c.segments[0].text)!;
        const rhs = note.parse(m[1]).get(m[2]);
        // One-letter names: the clone restates the asked name and what followed it.
        expect(c.segments[1].text).toBe(names === 1 ? `${m[2]}${rhs ?? ''}<ans>${rhs ?? 'none'}<eos>` : `<ans>${rhs ?? 'none'}<eos>`);
        expect(note.parse(m[1]).size).toBeLessThanOrEqual(6);
        expect(tok.encode(c.segments[1].text).length).toBeLessThanOrEqual(8);
      }
    }
    expect(tok.encode(rootText).length).toBeLessThan(256);
    const mono = multihop
      .teacherMono(p, new Rng(0))
      .contexts[0].segments.map((s) => s.text)
      .join('');
    expect(mono.endsWith(`<ans>${p.truth}<eos>`)).toBe(true);
    // The chain of thought restates each hop as the context writes it.
    for (const [i, rhs] of chain.entries()) {
      const from = i === 0 ? asked[0] : chain[i - 1];
      expect(mono).toContain(names === 1 ? `${from}${rhs}.` : `=${from}=${rhs}.`);
    }
  });

  it("teaches clones the very tokens the runtime builds from the root's spawns", () => {
    // Each demonstrated clone that answers a spawn of the root (the holder and the miss of each
    // round) must be, token for token, the prompt clonePrompt expands from that spawn's subtask.
    for (let seed = 0; seed < 20; seed++) {
      const p = multihop.generate(new Rng(seed), opts({ chunks: 4, perChunk: 3, hops: 2, names: 1 + (seed % 2), filler: seed % 3 === 0 ? 12 : 0 }), `t${seed}`);
      const d = multihop.teacherDelegate(p, new Rng(seed), MULTIHOP_LIMITS)!;
      const rootText = d.contexts[0].segments.map((s) => s.text).join('');
      const blocks = [...rootText.matchAll(/<spawn>(.*?)<b(\d+)>/g)].map((m) => ({ subtask: tok.encode(m[1]), budget: Number(m[2]) }));
      const fanned = fanOut(blocks, p.context);
      if ('error' in fanned) throw new Error(fanned.error);
      expect(fanned.blocks).toHaveLength(8); // 4 chunks × 2 hops, however they were written
      const runtime = fanned.blocks.map((b) => {
        const built = clonePrompt(b.subtask, p.context, (t) => tok.encode(t));
        if ('error' in built) throw new Error(built.error);
        return built.tokens.join(',');
      });
      const taught = d.contexts.filter((c) => c.role === 'clone').map((c) => tok.encode(c.segments[0].text).join(','));
      const perRound = 6;
      for (let r = 0; r < 2; r++) for (const c of taught.slice(r * perRound, r * perRound + 2)) expect(runtime).toContain(c);
    }
  });

  it('drills clone lookups over chunks of up to twice perChunk assignments', () => {
    const sizes = (perChunk: number) => {
      const seen = new Set<number>();
      for (let i = 0; i < 40; i++) {
        const p = multihop.generate(new Rng(i), opts({ chunks: 6, perChunk, hops: 2 }), String(i));
        const clones = multihop.teacherDelegate(p, new Rng(100 + i), MULTIHOP_LIMITS)!.contexts.slice(1);
        for (const c of clones) seen.add(notationOf(1).parse(c.segments[0].text).size);
      }
      return [...seen].sort();
    };
    expect(sizes(1)).toEqual([1, 2]);
    expect(sizes(3)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it("drills lookups among filler: a problem's own share, and half the drills of a problem without", () => {
    const fillerOf = (chunk: string) =>
      chunk
        .split(' ')
        .filter((w) => !/[a-z0-9]/.test(w))
        .join('');
    const drills = (o: Partial<MultihopOptions>) => {
      const out: { size: number; filler: number }[] = [];
      for (let i = 0; i < 30; i++) {
        const p = multihop.generate(new Rng(i), opts(o), String(i));
        // Each round: the holder and the miss (the problem's own chunks), then four drills.
        const clones = multihop.teacherDelegate(p, new Rng(200 + i), MULTIHOP_LIMITS)!.contexts.slice(1);
        for (const c of [...clones.slice(2, 6), ...clones.slice(8, 12)]) {
          const chunk = c.segments[0].text.replace(/^<clone>/, '').replace(/ [a-z]\?<sep>$/, '');
          out.push({ size: notationOf(1).parse(chunk).size, filler: fillerOf(chunk).length });
        }
      }
      return out;
    };
    // The long context: 24 filler characters for 4 assignments, so 6 per assignment.
    for (const d of drills({ chunks: 6, perChunk: 4, filler: 24 })) expect(d.filler).toBe(6 * d.size);
    const plain = drills({});
    const withFiller = plain.filter((d) => d.filler > 0);
    expect(withFiller.length / plain.length).toBeGreaterThan(0.35);
    expect(withFiller.length / plain.length).toBeLessThan(0.65);
    for (const d of withFiller) expect(d.filler / d.size).toBeLessThanOrEqual(6);
    // The two-letter notation keeps its drills as they were: no filler.
    const p = multihop.generate(new Rng(1), opts({ names: 2 }), 'n2');
    for (const c of multihop.teacherDelegate(p, new Rng(1), MULTIHOP_LIMITS)!.contexts.slice(1)) expect(c.segments[0].text).not.toMatch(/[#*_+]/);
  });

  it('verifies exact answers and rejects bad options', () => {
    const p = multihop.generate(new Rng(5), multihop.defaultOptions, 'v');
    expect(multihop.verify(p, p.truth).correct).toBe(true);
    expect(multihop.verify(p, 'none').correct).toBe(false);
    expect(() => multihop.validateOptions({ hops: 9 })).toThrow(/hops must be an integer in \[1, 4\]/);
    expect(() => multihop.validateOptions({ names: 3 })).toThrow(/names must be an integer in \[1, 2\]/);
    expect(() => multihop.validateOptions({ filler: -1 })).toThrow(/filler must be an integer in \[0, 96\]/);
    expect(() => multihop.validateOptions({ chunks: 6, perChunk: 6 })).toThrow(
      /one-letter names give 25 variables .* must be at most 25 \(got 6 × 6 = 36\); use names 2/,
    );
    expect(multihop.validateOptions({ chunks: 6, perChunk: 6, names: 2 }).perChunk).toBe(6);
  });

  it('delegates only within the spawn limits it is given', () => {
    const p = multihop.generate(new Rng(3), opts({ chunks: 4, perChunk: 3, hops: 2 }), 'x');
    const d = multihop.teacherDelegate(p, new Rng(0), { budgets: [32, 128], maxClonesPerRound: 4, maxRounds: 2 })!;
    const budgets = [
      ...d.contexts[0].segments
        .map((s) => s.text)
        .join('')
        .matchAll(/<b(\d+)>/g),
    ].map((m) => Number(m[1]));
    expect(budgets.length).toBe(2); // a fan-out spawn per hop
    for (const b of budgets) expect([32, 128]).toContain(b);
    // Four chunks need four clones a round and two hops two rounds.
    expect(multihop.teacherDelegate(p, new Rng(0), { budgets: [8, 16], maxClonesPerRound: 3, maxRounds: 4 })).toBeNull();
    expect(multihop.teacherDelegate(p, new Rng(0), { budgets: [8, 16], maxClonesPerRound: 4, maxRounds: 1 })).toBeNull();
  });
});
