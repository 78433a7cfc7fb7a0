/**
 * The lookup-learning probe (issue 12, target 1): its drills, the separation of held-out drills
 * from training ones, its validation, and a short real run on the tiny preset.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { getTokenizer, setupBackend } from '../src/cli/setup';
import {
  LOOKUP_PROBE_DEFAULTS,
  type LookupProbeConfig,
  probeDrill,
  probeEvalDrills,
  probeTrainDrills,
  runLookupProbe,
  validateLookupProbeConfig,
} from '../src/core/eval/lookupProbe';
import { presetConfig } from '../src/core/model/config';
import { Rng } from '../src/core/rng';
import { COMMANDS } from '../src/cli/commands';

const tok = getTokenizer();
const encode = (t: string) => tok.encode(t);

beforeAll(async () => {
  await setupBackend('wasm');
});

/** An independent reading of a drill's prompt in either layout: its pairs and its question. */
function readDrill(prompt: string, layout: 'last' | 'first'): { pairs: Map<string, string>; question: string } {
  const parts = prompt
    .replace(/^<clone>/, '')
    .replace(/<sep>$/, '')
    .split(' ');
  const q = (layout === 'last' ? parts.pop()! : parts.shift()!).replace(/\?$/, '');
  return { pairs: new Map(parts.map((p) => p.replace(/\.$/, '').split('=') as [string, string])), question: q };
}

const cfg = (o: Partial<LookupProbeConfig>): LookupProbeConfig => ({ ...LOOKUP_PROBE_DEFAULTS, size: 3, nameChars: 2, layout: 'last', steps: 10, ...o });

describe('lookup probe', () => {
  it('draws drills of the asked size, name length and layout, answering the value or none', () => {
    for (const layout of ['last', 'first'] as const)
      for (const nameChars of [1, 2] as const)
        for (const size of [1, 3, 6]) {
          const rng = Rng.stream(3, 'probe-test', size);
          for (let i = 0; i < 40; i++) {
            const found = i % 2 === 0;
            const d = probeDrill(rng, size, nameChars, layout, found);
            const { pairs, question } = readDrill(d.prompt, layout);
            expect(pairs.size).toBe(size);
            for (const name of [...pairs.keys(), question]) expect(name).toMatch(nameChars === 1 ? /^[a-z]$/ : /^[a-z]{2}$/);
            expect(d.answer).toBe(found ? pairs.get(question) : 'none');
            expect(pairs.has(question)).toBe(found);
            // Every token of the prompt is a vocabulary token (names are one token per letter).
            expect(encode(d.prompt).length).toBe(d.prompt.replace(/<clone>|<sep>/g, '#').length);
          }
        }
  });

  it('with cot the clone first restates the lookup, as the monolithic teacher writes a hop', () => {
    const rng = Rng.stream(4, 'probe-cot');
    const found = probeDrill(rng, 3, 2, 'last', true, true);
    const { pairs, question } = readDrill(found.prompt, 'last');
    expect(found.written).toBe(`=${question}=${pairs.get(question)}<ans>${pairs.get(question)}<eos>`);
    const missing = probeDrill(rng, 3, 2, 'first', false, true);
    expect(missing.written).toBe(`=${readDrill(missing.prompt, 'first').question}=none<ans>none<eos>`);
    expect(probeDrill(rng, 3, 2, 'last', true).written).toMatch(/^<ans>[^<]+<eos>$/);
  });

  it("with adjacent the chunk and the clone's answer are multihop's one-letter notation", () => {
    const rng = Rng.stream(5, 'probe-adjacent');
    for (let i = 0; i < 20; i++) {
      const d = probeDrill(rng, 3, 1, 'last', i % 2 === 0, false, true);
      const words = d.prompt
        .replace(/^<clone>/, '')
        .replace(/\?<sep>$/, '')
        .split(' ');
      const question = words.pop()!;
      // `q7.` or `aq.`: the name, then its right-hand side, no `=`.
      const pairs = new Map(words.map((w) => [w[0], w.slice(1, -1)]));
      expect(words.every((w) => /^[a-z]([a-z]|\d+)\.$/.test(w))).toBe(true);
      expect(d.answer).toBe(d.found ? pairs.get(question) : 'none');
      expect(d.written).toBe(d.found ? `${question}${d.answer}<ans>${d.answer}<eos>` : `${question}<ans>none<eos>`);
    }
    expect(() => validateLookupProbeConfig(cfg({ adjacent: true, nameChars: 2 }))).toThrow(/adjacent needs one-letter names/);
    expect(() => validateLookupProbeConfig(cfg({ adjacent: true, nameChars: 1, cot: true }))).toThrow(/adjacent already has the clone restate the lookup/);
  });

  it('keeps every held-out drill out of training, also where the drill space is small', () => {
    const c = cfg({ size: 1, nameChars: 1, evalN: 400, batch: 256 });
    const held = probeEvalDrills(c);
    const keys = new Set([...held.found, ...held.missing].map((d) => d.prompt + d.answer));
    // One assignment, one-letter names: a few thousand distinct drills, so collisions do occur.
    let seen = 0;
    for (let step = 0; step < 20; step++) {
      const drills = probeTrainDrills(c, step, keys);
      expect(drills).toHaveLength(256);
      expect(drills.filter((d) => d.found)).toHaveLength(128);
      for (const d of drills) expect(keys.has(d.prompt + d.answer)).toBe(false);
      seen += drills.length;
    }
    expect(seen).toBe(20 * 256);
    // Seeded by step: the same step draws the same drills.
    expect(probeTrainDrills(c, 5, keys)).toEqual(probeTrainDrills(c, 5, keys));
    // With mix, training chunks take every size from 1 to size.
    const sizes = new Set(probeTrainDrills(cfg({ size: 4, mix: true }), 0, new Set()).map((d) => readDrill(d.prompt, 'last').pairs.size));
    expect([...sizes].sort()).toEqual([1, 2, 3, 4]);
  });

  it('names every bad field', () => {
    expect(() => validateLookupProbeConfig(cfg({ size: 7, nameChars: 3 as never, layout: 'middle' as never, lr: 0 }))).toThrow(
      /size must be an integer in \[1, 6\] \(got 7\); nameChars must be 1 or 2 \(got 3\); layout must be one of last, first \(got middle\); lr must be in \(0, 1\] \(got 0\)/,
    );
  });

  it('trains the tiny preset and reads the held-out drills at step 0 and every evalEvery steps', async () => {
    const rows: number[] = [];
    const r = await runLookupProbe(presetConfig('tiny'), cfg({ size: 1, steps: 6, evalEvery: 3, evalN: 20, batch: 16, warmup: 1 }), encode, (row) =>
      rows.push(row.step),
    );
    expect(rows).toEqual([0, 3, 6]);
    expect(r.rows.map((x) => x.step)).toEqual([0, 3, 6]);
    expect(r.stepsToTarget).toBeNull();
    // The loss of the first steps of a fresh model is near ln(vocabulary).
    expect(r.rows[1].loss).toBeGreaterThan(2);
    for (const x of r.rows) for (const a of [x.foundAccuracy, x.missingAccuracy]) expect(a).toBeGreaterThanOrEqual(0);
  });

  it('the CLI rejects a bad flag by name', async () => {
    const probe = (argv: string[]) => Promise.resolve().then(() => COMMANDS['probe-lookup'].run(argv));
    await expect(probe(['--layout', 'middle'])).rejects.toThrow(/--layout must be one of last, first \(got "middle"\)/);
    await expect(probe(['--names', '3'])).rejects.toThrow(/--names/);
  });

  it('the CLI writes the configuration, every reading and the result as JSON lines', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'selfcest-probe-'));
    try {
      const out = join(dir, 'sub', 'probe.jsonl');
      await COMMANDS['probe-lookup'].run([
        '--preset',
        'tiny',
        '--size',
        '1',
        '--steps',
        '2',
        '--eval-every',
        '1',
        '--eval-n',
        '5',
        '--batch',
        '8',
        '--warmup',
        '1',
        '--out',
        out,
      ]);
      const lines = (await readFile(out, 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { kind: string; step?: number; size?: number; stepsToTarget?: unknown });
      expect(lines.map((l) => l.kind)).toEqual(['config', 'row', 'row', 'row', 'result']);
      expect(lines[0].size).toBe(1);
      expect(lines.slice(1, 4).map((l) => l.step)).toEqual([0, 1, 2]);
      expect(lines[4].stepsToTarget).toBeNull();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
