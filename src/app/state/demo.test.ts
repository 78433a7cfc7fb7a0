import { describe, expect, it } from 'vitest';
import { configFromHash, configToHash } from '../../core/runConfig';
import { ESSENTIAL_KEYS, CONFIG_FOLDS, PAGE_FIELDS } from './configForm';
import { DEMO_HASH, demoConfig, isDemo, opensOnDemo } from './demo';

describe('the first visit', () => {
  it('opens on the demo only with no link and nothing saved', () => {
    expect(opensOnDemo('', false)).toBe(true);
    expect(opensOnDemo('#', false)).toBe(true);
    expect(opensOnDemo('', true)).toBe(false);
    expect(opensOnDemo('#preset=tiny', false)).toBe(false);
  });

  it('is a valid link of the multihop setting, recognised as the demo on any machine and left by any change', () => {
    const link = configFromHash(`#${DEMO_HASH}`, {});
    expect(link.errors).toEqual([]);
    expect(link.notes).toEqual([]);
    const demo = demoConfig({ workers: 3, gradWorkers: 0 });
    expect(demo.task).toBe('multihop');
    expect(demo.taskOptions).toEqual({ chunks: 4, perChunk: 5, filler: 24 });
    expect(isDemo(demo)).toBe(true);
    // Written back into the URL and read again, it is still the demo.
    expect(isDemo(configFromHash(`#${configToHash(demo, {})}`, {}).config)).toBe(true);
    expect(isDemo({ ...demo, lr: demo.lr * 2 })).toBe(false);
    expect(isDemo(configFromHash('#', {}).config)).toBe(false);
  });
});

describe('the config form', () => {
  it('shows every page field once: in the essentials or in one fold', () => {
    const placed = [...ESSENTIAL_KEYS, ...CONFIG_FOLDS.flatMap((f) => f.keys)];
    expect(new Set(placed).size).toBe(placed.length);
    expect([...placed].sort()).toEqual(PAGE_FIELDS.map((f) => f.key).sort());
  });
});
