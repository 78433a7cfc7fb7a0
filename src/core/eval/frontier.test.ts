import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend } from '../../runtime/backend';
import { presetConfig } from '../model/config';
import { initParams } from '../model/params';
import { PolicyDecoder } from '../rollout/policyDecoder';
import { arithmetic } from '../tasks/arithmetic';
import { Tokenizer } from '../tokenizer/tokenizer';
import { heldOutProblems } from './evaluate';
import { frontier, frontierCsv, paretoOf, samplesOf } from './frontier';
import { wilsonInterval } from './stats';

const tok = Tokenizer.builtin();

beforeAll(async () => {
  await initBackend('wasm');
});

describe('frontier', () => {
  it('measures every method at every limit with n, interval and costs', async () => {
    const config = presetConfig('tiny');
    const params = initParams(config, 1);
    const decoder = new PolicyDecoder({ config, params });
    const problems = heldOutProblems(arithmetic, arithmetic.defaultOptions, 3, 5, 'final');
    const { points, pareto } = await frontier(
      decoder,
      arithmetic,
      problems,
      { methods: ['mono', 'sc2', 'delegate'], limits: [4, 8], temperature: 1, seed: 1, batch: 4 },
      (t) => tok.encode(t),
    );
    const promptTokens = problems.reduce((a, p) => a + tok.encode(`<root>${p.prompt}<sep>`).length, 0) / problems.length;
    decoder.dispose();
    params.forEach((p) => p.dispose());
    expect(points.map((p) => `${p.method}@${p.limit}`)).toEqual(['mono@4', 'mono@8', 'sc2@4', 'sc2@8', 'delegate@4', 'delegate@8']);
    for (const p of points) {
      expect(p.n).toBe(3);
      const k = samplesOf(p.method);
      // Monolithic samples stop at the limit; self-consistency pays for every sample.
      if (p.method !== 'delegate') expect(p.meanTokens).toBeLessThanOrEqual(k * p.limit);
      expect(p.meanCriticalPathTokens).toBeLessThanOrEqual(p.meanTokens);
      expect(p.interval).toEqual(wilsonInterval(Math.round(p.accuracy * 3), 3));
      // Without clones every generated token is the root's, and the root's context is its
      // prompt plus what it wrote (the longest sample's for self-consistency).
      if (p.method === 'mono') {
        expect(p.meanRootTokens).toBe(p.meanTokens);
        expect(p.meanRootContextTokens).toBeCloseTo(promptTokens + p.meanRootTokens!, 9);
      }
      if (p.method === 'sc2') expect(p.meanRootTokens).toBe(p.meanTokens);
      expect(p.meanRootContextTokens).toBeGreaterThanOrEqual(promptTokens);
    }
    expect(pareto).toEqual(paretoOf(points, 'total'));
    expect(frontierCsv(points).split('\n')[1]).toMatch(/^,mono,4,3,/);
    expect(() => samplesOf('sc0' as never)).toThrow(/sc1 … sc64/);
  });
});
