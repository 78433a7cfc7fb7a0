/**
 * A root that knows its limit (RolloutConfig.rootLimitMin): the limit in the root prompt, the
 * per-prompt draw of a GRPO step, the warm start's demonstrations under a drawn limit, and that
 * nothing changes without it.
 */
import { describe, expect, it } from 'vitest';
import { rootLimitText, rootPrompt } from '../protocol/grammar';
import { Rng } from '../rng';
import { rootGeneratedTokens, sftSequences } from '../sft/sft';
import { promptLimits } from '../rl/grpoStep';
import { arithmetic, chainText, parseSum } from '../tasks/arithmetic';
import { Tokenizer } from '../tokenizer/tokenizer';
import { VOCAB_SIZE } from '../tokenizer/vocab';
import type { RolloutConfig } from './config';
import { defaultRolloutConfig } from '../runConfigTargets';
import { RolloutScheduler } from './scheduler';
import { ScriptedDecoder } from './scriptedDecoder';
import { defaultGrpoConfig, defaultSftConfig } from '../runConfigTargets';

// The table's defaults (src/core/runConfig.ts) as trainer configs; a run's first step scores rewards without the token cost.
const TABLE_GRPO = defaultGrpoConfig();
const TABLE_SFT = defaultSftConfig();

const tok = Tokenizer.builtin();
const encode = (t: string) => tok.encode(t);
const problem = { task: 'arithmetic', id: 'p', prompt: '12+3*4', truth: '24', meta: {} };

describe('a root that knows its limit', () => {
  it('states the limit after <root> in its prompt, and only when told', () => {
    expect(tok.decode(rootPrompt('1+2', encode, 48))).toBe('<root>#48 1+2<sep>');
    expect(tok.decode(rootPrompt('1+2', encode))).toBe('<root>1+2<sep>');
    expect(rootLimitText(128)).toBe('#128 ');
  });

  it("rolls out with this episode's limit in the prompt and keeps to it", async () => {
    const chain = encode(chainText(parseSum(problem.prompt)));
    const told = [...rootPrompt(problem.prompt, encode, 40), ...chain];
    const run = async (cfg: Partial<RolloutConfig>, limit?: number) => {
      const s = new RolloutScheduler(
        new ScriptedDecoder([told], VOCAB_SIZE, (t) => tok.decode(t)),
        defaultRolloutConfig('arithmetic', { greedy: true, ...cfg }),
        {
          policyVersion: 0,
          encode,
        },
      );
      s.addEpisode(arithmetic, problem, new Rng(1), limit === undefined ? {} : { rootMaxTokens: limit });
      return (await s.run())[0];
    };
    // Told 40 by the episode's limit (a GRPO prompt's draw): the script's prompt, so it answers.
    const t = await run({ rootMaxTokens: 96, rootLimitMin: 32 }, 40);
    expect(t.contexts[0].text.startsWith('<root>#40 12+3*4<sep>')).toBe(true);
    expect(t.answer).toBe('24');
    // Without rootLimitMin the prompt has no limit, and the scripted model (trained with one) is lost.
    await expect(run({ rootMaxTokens: 40 })).rejects.toThrow();
    expect(() => defaultRolloutConfig('arithmetic', { rootMaxTokens: 48, rootLimitMin: 64 })).toThrow(
      /rootLimitMin must be at most rootMaxTokens = 48 \(got 64\)/,
    );
  });

  it('draws each GRPO prompt its limit in [rootLimitMin, rootMaxTokens] by its own stream, the same for its group; nothing without it', () => {
    const cfg = { ...TABLE_GRPO, seed: 5, rollout: defaultRolloutConfig('arithmetic', { rootMaxTokens: 128, rootLimitMin: 32 }) };
    const draws = Array.from({ length: 200 }, (_, p) => promptLimits(cfg, 'arithmetic', 3, p)!.rootMaxTokens!);
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(32);
    expect(Math.max(...draws)).toBeLessThanOrEqual(128);
    expect(new Set(draws).size).toBeGreaterThan(50);
    expect(promptLimits(cfg, 'arithmetic', 3, 7)).toEqual(promptLimits(cfg, 'arithmetic', 3, 7));
    // A mix's per-task limits: drawn up to the task's own root limit.
    const mix = { ...cfg, taskRollout: { multihop: { rootMaxTokens: 64, maxRounds: 4 } } };
    const mh = promptLimits(mix, 'multihop', 3, 1)!;
    expect(mh.maxRounds).toBe(4);
    expect(mh.rootMaxTokens).toBeLessThanOrEqual(64);
    const off = { ...cfg, rollout: defaultRolloutConfig('arithmetic', { rootMaxTokens: 128 }) };
    expect(promptLimits(off, 'arithmetic', 3, 7)).toBeUndefined();
    expect(promptLimits({ ...mix, rollout: off.rollout }, 'multihop', 3, 7)).toEqual({ rootMaxTokens: 64, maxRounds: 4 });
  });

  it('draws a share rootLimitStraddle of the prompts below their monolithic chain, the rest as without it', () => {
    const cfg = { ...TABLE_GRPO, seed: 5, rollout: defaultRolloutConfig('arithmetic', { rootMaxTokens: 128, rootLimitMin: 32 }) };
    const half = { ...cfg, rollout: defaultRolloutConfig('arithmetic', { rootMaxTokens: 128, rootLimitMin: 32, rootLimitStraddle: 0.5 }) };
    const all = { ...cfg, rollout: defaultRolloutConfig('arithmetic', { rootMaxTokens: 128, rootLimitMin: 32, rootLimitStraddle: 1 }) };
    const limit = (c: typeof cfg, p: number, chain: number) => promptLimits(c, 'arithmetic', 3, p, () => chain)!.rootMaxTokens!;
    const ps = Array.from({ length: 400 }, (_, p) => p);
    // Every prompt of share 1 draws below its chain of 60 tokens, over the whole of [32, 59].
    const below = ps.map((p) => limit(all, p, 60));
    expect(Math.min(...below)).toBe(32);
    expect(Math.max(...below)).toBe(59);
    // Share 0.5: about half; the others draw what a run without it draws.
    const mixed = ps.map((p) => limit(half, p, 60));
    const plain = ps.map((p) => limit(cfg, p, 60));
    const changed = ps.filter((p) => mixed[p] !== plain[p]).length;
    expect(changed).toBeGreaterThan(120);
    expect(changed).toBeLessThan(220);
    // A chain that fits under the smallest limit cannot be straddled: the plain draw.
    expect(ps.slice(0, 50).map((p) => limit(all, p, 30))).toEqual(plain.slice(0, 50));
    // Share 0 never asks for the chain.
    let asked = 0;
    promptLimits(cfg, 'arithmetic', 3, 1, () => ++asked);
    expect(asked).toBe(0);
    expect(() => defaultRolloutConfig('arithmetic', { rootMaxTokens: 128, rootLimitMin: 32, rootLimitStraddle: 1.5 })).toThrow(
      /rootLimitStraddle must be .*\(got 1.5\)/,
    );
  });

  it('warm-starts under a drawn limit: each root prompt states it and its root keeps to it; without it, the data are as before', () => {
    const base = { ...TABLE_SFT, task: 'arithmetic', steps: 10, seed: 3, batchTokens: 2048, teacher: 'naive' as const };
    const told = sftSequences(arithmetic, arithmetic.defaultOptions, { ...base, rootLimits: { min: 32, max: 64 } }, 2, encode);
    const roots = told.filter((q) => tok.decode(q.tokens.slice(0, 1)) === '<root>');
    expect(roots.length).toBeGreaterThan(10);
    for (const q of roots) {
      const text = tok.decode(q.tokens);
      const m = /^<root>#(\d+) [^<]*<sep>/.exec(text);
      expect(m, text).not.toBeNull();
      const limit = Number(m![1]);
      expect(limit).toBeGreaterThanOrEqual(32);
      expect(limit).toBeLessThanOrEqual(64);
      // The root's own tokens (trained ones) within the limit.
      expect(q.weights.filter((w) => w > 0).length, text).toBeLessThanOrEqual(limit);
    }
    const plain = sftSequences(arithmetic, arithmetic.defaultOptions, base, 2, encode);
    expect(plain.every((q) => !tok.decode(q.tokens).includes('#'))).toBe(true);
    expect(sftSequences(arithmetic, arithmetic.defaultOptions, base, 2, encode)).toEqual(plain);
    // rootGeneratedTokens counts a demonstration's root tokens as the rollout does.
    const mono = arithmetic.teacherMono(problem, new Rng(1));
    expect(rootGeneratedTokens(mono, encode)).toBe(encode(chainText(parseSum(problem.prompt))).length);
  });
});
