/** The clone lookup probe on a multihop-trained checkpoint: its cases, and its greedy check against a plain greedy loop. */
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { getTokenizer, loadPolicy, setupBackend } from '../src/cli/setup';
import { lookupAccuracy, lookupCases, lookupProbe } from '../src/core/eval/lookup';
import { forwardLogits } from '../src/core/model/gpt';
import { disposeParams } from '../src/core/model/params';
import { T } from '../src/core/tokenizer/vocab';

const tok = getTokenizer();
const encode = (t: string) => tok.encode(t);

beforeAll(async () => {
  await setupBackend('wasm');
});

/** An independent reading of a clone prompt: its `name=value.` pairs and the question. */
function readPrompt(prompt: string): { pairs: Map<string, string>; question: string } {
  const body = prompt.replace(/^<clone>/, '').replace(/\?<sep>$/, '');
  const parts = body.split(' ');
  const question = parts.pop()!;
  const pairs = new Map(parts.map((p) => p.replace(/\.$/, '').split('=') as [string, string]));
  return { pairs, question };
}

describe('clone lookup probe', () => {
  it('builds lookups that find and that miss, of the asked chunk size, deterministically', () => {
    for (const size of [1, 3, 6]) {
      const { found, missing } = lookupCases(size, 20, 7);
      expect(lookupCases(size, 20, 7)).toEqual({ found, missing });
      for (const c of found) {
        const { pairs, question } = readPrompt(c.prompt);
        expect(pairs.size).toBe(size);
        expect(pairs.get(question)).toBe(c.answer);
      }
      for (const c of missing) {
        const { pairs, question } = readPrompt(c.prompt);
        expect(pairs.size).toBe(size);
        expect(pairs.has(question)).toBe(false);
        expect(c.answer).toBe('none');
      }
    }
    expect(() => lookupCases(7, 1, 1)).toThrow(/chunk size must be an integer in \[1, 6\] \(got 7\)/);
  });

  it('counts a lookup solved exactly when greedy decoding writes its answer', async () => {
    const { policy } = await loadPolicy('runs/mh-lookup', false);
    try {
      const { found } = lookupCases(3, 6, 2);
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
        if (m) answered++;
        if (!m) {
          expect(lookupAccuracy(policy.params, policy.config, [c], encode)).toBe(0);
          continue;
        }
        expect(lookupAccuracy(policy.params, policy.config, [{ prompt: c.prompt, answer: m[1] }], encode)).toBe(1);
        expect(lookupAccuracy(policy.params, policy.config, [{ prompt: c.prompt, answer: `${m[1]}1` }], encode)).toBe(0);
        expect(lookupAccuracy(policy.params, policy.config, [c], encode)).toBe(m[1] === c.answer ? 1 : 0);
      }
      // The multihop lookup stage writes answer blocks as clones, so the check above met real answers.
      expect(answered).toBeGreaterThan(0);
      const rows = lookupProbe(policy.params, policy.config, encode, [1, 6], 3, 1);
      expect(rows.map((r) => [r.size, r.foundN, r.missingN])).toEqual([
        [1, 3, 3],
        [6, 3, 3],
      ]);
      for (const r of rows) for (const a of [r.foundAccuracy, r.missingAccuracy]) expect([0, 1 / 3, 2 / 3, 1]).toContainEqual(a);
    } finally {
      disposeParams(policy.params);
    }
  }, 60_000);
});
