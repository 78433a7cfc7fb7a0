/**
 * The clone lookup probe: its cases, and its greedy check against a plain greedy loop, on a
 * model this test trains itself (the shipped tiny warm start, given a few lookup drills).
 */
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { getTokenizer, loadPolicy, setupBackend } from '../src/cli/setup';
import { lookupAccuracy, lookupCases, lookupProbe } from '../src/core/eval/lookup';
import { forwardLogits } from '../src/core/model/gpt';
import { disposeParams } from '../src/core/model/params';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import { demoSequence } from '../src/core/parallel/sequences';
import { sftStep } from '../src/core/sft/sft';
import { T } from '../src/core/tokenizer/vocab';

const tok = getTokenizer();
const encode = (t: string) => tok.encode(t);

beforeAll(async () => {
  await setupBackend('wasm');
});

/**
 * An independent reading of a clone prompt: its pairs (`name=value.` with two-letter names, the
 * letter then its value with one) and the question.
 */
function readPrompt(prompt: string): { pairs: Map<string, string>; question: string } {
  const body = prompt.replace(/^<clone>/, '').replace(/\?<sep>$/, '');
  const parts = body.split(' ');
  const question = parts.pop()!;
  const pairs = new Map(
    parts.map((p) => {
      const a = p.replace(/\.$/, '');
      return (a.includes('=') ? a.split('=') : [a[0], a.slice(1)]) as [string, string];
    }),
  );
  return { pairs, question };
}

describe('clone lookup probe', () => {
  it.each([1, 2])('builds lookups that find and that miss, of the asked chunk size, deterministically (names %i)', (names) => {
    for (const size of [1, 3, 6]) {
      const { found, missing } = lookupCases(size, 20, 7, names);
      expect(lookupCases(size, 20, 7, names)).toEqual({ found, missing });
      for (const c of found) {
        const { pairs, question } = readPrompt(c.prompt);
        expect(question).toHaveLength(names);
        expect(pairs.size).toBe(size);
        expect(pairs.get(question)).toBe(c.answer);
        // One-letter names: the clone writes the name and its value before the answer block.
        expect(c.written).toBe(names === 1 ? `${question}${c.answer}<ans>${c.answer}<eos>` : `<ans>${c.answer}<eos>`);
      }
      for (const c of missing) {
        const { pairs, question } = readPrompt(c.prompt);
        expect(pairs.size).toBe(size);
        expect(pairs.has(question)).toBe(false);
        expect(c.answer).toBe('none');
        expect(c.written).toBe(names === 1 ? `${question}<ans>none<eos>` : '<ans>none<eos>');
      }
    }
    expect(() => lookupCases(7, 1, 1)).toThrow(/chunk size must be an integer in \[1, 6\] \(got 7\)/);
    expect(() => lookupCases(3, 1, 1, 1, -2)).toThrow(/filler must be an integer in \[0, 96\] \(got -2\)/);
  });

  it("builds lookups among filler, as the long context's clones read them", () => {
    const { found, missing } = lookupCases(4, 20, 3, 1, 24);
    for (const c of [...found, ...missing]) {
      const words = c.prompt
        .replace(/^<clone>/, '')
        .replace(/ [a-z]\?<sep>$/, '')
        .split(' ');
      expect(words.filter((w) => /[a-z0-9]/.test(w))).toHaveLength(4);
      expect(words.filter((w) => !/[a-z0-9]/.test(w)).join('')).toMatch(/^[#*_+]{24}$/);
    }
    // The same lookups without filler (the filler has its own stream): a paired reading.
    const plain = lookupCases(4, 20, 3, 1, 0);
    const unfilled = (prompt: string) =>
      `<clone>${prompt
        .replace(/^<clone>/, '')
        .split(' ')
        .filter((w) => /[a-z0-9]/.test(w))
        .join(' ')}`;
    expect(plain.found.map((c) => [c.prompt, c.written])).toEqual(found.map((c) => [unfilled(c.prompt), c.written]));
    expect(plain.missing.map((c) => [c.prompt, c.written])).toEqual(missing.map((c) => [unfilled(c.prompt), c.written]));
  });

  it('counts a lookup solved exactly when greedy decoding writes its answer', async () => {
    // The shipped tiny warm start (arithmetic only) answers a clone lookup with `<ans>` runs;
    // 50 steps of lookup drills (seconds on wasm) make it write real `<ans>value<eos>` answers,
    // right for some cases (three of the checked ones are among the drills) and wrong for others.
    const { policy } = await loadPolicy('public/checkpoints/warmstart-tiny', true);
    // In the two-letter notation, where the clone writes the answer block alone.
    const { found } = lookupCases(3, 6, 2, 2);
    const optimizer = new AdamW(policy.params, { ...ADAM_MOMENTS, weightDecay: 0, gradClip: 1, lr: 3e-3 });
    try {
      const drill = (c: { prompt: string; answer: string }) =>
        demoSequence(
          {
            role: 'clone',
            segments: [
              { kind: 'prompt', text: c.prompt },
              { kind: 'generated', text: `<ans>${c.answer}<eos>` },
            ],
          },
          encode,
        );
      for (let step = 0; step < 50; step++) {
        const drills = [1, 6].flatMap((size) => {
          const c = lookupCases(size, 4, 1000 + step, 2);
          return [...c.found, ...c.missing];
        });
        await sftStep(policy.params, policy.config, optimizer, [...found.slice(0, 3), ...found.slice(0, 3), ...drills].map(drill), 3e-3, 2048);
      }
      // A plain greedy loop: one token at a time until <eos>.
      const greedy = (prompt: string) => {
        const ids = encode(prompt);
        const start = ids.length;
        while (ids.length < start + 12 && ids[ids.length - 1] !== T.eos) {
          const next = tf.tidy(() => {
            const l = forwardLogits(policy.params, policy.config, tf.tensor2d([ids], [1, ids.length], 'int32'));
            return (l.argMax(-1).arraySync() as number[][])[0][ids.length - 1];
          });
          ids.push(next);
        }
        return tok.decode(ids.slice(start));
      };
      let answered = 0;
      for (const c of found) {
        const written = greedy(c.prompt);
        const m = /^<ans>(.*)<eos>$/.exec(written);
        // A real answer: a value or `none`, not a run of control tokens.
        if (m && !m[1].includes('<')) answered++;
        if (!m) {
          expect(lookupAccuracy(policy.params, policy.config, [c], encode)).toBe(0);
          continue;
        }
        expect(lookupAccuracy(policy.params, policy.config, [{ prompt: c.prompt, answer: m[1] }], encode)).toBe(1);
        expect(lookupAccuracy(policy.params, policy.config, [{ prompt: c.prompt, answer: `${m[1]}1` }], encode)).toBe(0);
        expect(lookupAccuracy(policy.params, policy.config, [c], encode)).toBe(m[1] === c.answer ? 1 : 0);
      }
      // The drilled model writes answer blocks as clones, so the check above met real answers.
      expect(answered).toBeGreaterThan(0);
      const rows = lookupProbe(policy.params, policy.config, encode, [1, 6], 3, 1, 2);
      expect(rows.map((r) => [r.size, r.foundN, r.missingN])).toEqual([
        [1, 3, 3],
        [6, 3, 3],
      ]);
      for (const r of rows) for (const a of [r.foundAccuracy, r.missingAccuracy]) expect([0, 1 / 3, 2 / 3, 1]).toContainEqual(a);
    } finally {
      optimizer.dispose();
      disposeParams(policy.params);
    }
  }, 120_000);
});
