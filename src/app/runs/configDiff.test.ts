import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadEvent } from '../../core/io/provenance';
import { PAGE_DEFAULTS, type RunConfig } from '../../core/runConfig';
import { cliRunOf } from './cliRun';
import { KEY_SETTINGS, comparableConfig, configDiff, flattenConfig, startName, valueText } from './configDiff';
import { type KeptRun, pageRunOf } from './keptRun';

const cli = (dir: string, names = ['metrics.jsonl', 'run.json']): KeptRun =>
  cliRunOf(
    names.map((name) => ({ name, text: readFileSync(`${dir}/${name}`, 'utf8') })),
    { id: dir, keptAt: '' },
  ).run;

function pageRun(config: RunConfig, source = '/checkpoints/warmstart-tiny/'): KeptRun {
  return pageRunOf(
    { config, model: { preset: config.preset, parameters: 1, policyVersion: 0, source }, metrics: [], sftMetrics: [], frontier: [], provenance: [loadEvent(source, config.preset)], policyVersion: 0 },
    { id: 'p', name: 'page run', keptAt: '', hash: '' },
  );
}

const diffKeys = (...runs: KeptRun[]) => configDiff(runs.map(comparableConfig)).rows.map((r) => r.key);

describe('config differences between runs', () => {
  it('the two arms of the gating ablation differ in gating alone', () => {
    const d = configDiff([comparableConfig(cli('runs/ablation-naive/gating-s1')), comparableConfig(cli('runs/ablation-naive/no-gating-s1'))]);
    expect(d.rows).toEqual([{ key: 'advantage.gating', values: [true, false] }]);
    expect(d.agreeing).toBeGreaterThan(40);
    // The longer run of the same recipe differs in nothing compared (its planned steps are left out).
    expect(diffKeys(cli('runs/ablation-naive/gating-s1'), cli('runs/grpo-naive-limit48'))).toEqual([]);
  });

  it('a page run on the recipe defaults and the CLI gating arm agree on every trainer setting but the token cost schedule; start, seed and evaluation differ', () => {
    const page = pageRun({ ...PAGE_DEFAULTS, preset: 'tiny' });
    const d = configDiff([comparableConfig(page), comparableConfig(cli('runs/ablation-naive/gating-s1'))]);
    expect(d.rows).toEqual([
      { key: 'start', values: ['checkpoints/warmstart-tiny', 'checkpoints/warmstart-naive'] },
      { key: 'seed', values: [0, 1] },
      // The cost schedule is a default; the ablation ran without a cost (read as GRPO_IMPLIED).
      { key: 'reward.tokenRate', values: [0.003, 0] },
      { key: 'tokenRateAfter', values: [250, 0] },
      { key: 'restartOptimizer', values: [true, false] },
      { key: 'eval.every', values: [10, 25] },
      { key: 'eval.n', values: [32, 64] },
    ]);
    // The page's run config maps onto the trainer's names: lr, gating, the loss's β.
    expect(diffKeys(page, pageRun({ ...PAGE_DEFAULTS, preset: 'tiny', lr: 1e-4, gating: false, beta: 0 }))).toEqual(['lr', 'loss.beta', 'advantage.gating']);
  });

  it('leaves out a run without a config, and counts a setting one config lacks as a difference', () => {
    const noConfig = cli('runs/ablation-naive/gating-s1', ['metrics.jsonl']);
    const d = configDiff([comparableConfig(noConfig), comparableConfig(cli('runs/ablation-naive/gating-s1')), comparableConfig(cli('runs/ablation-naive/no-gating-s1'))]);
    expect(d.unrecorded).toEqual([0]);
    expect(d.rows).toEqual([{ key: 'advantage.gating', values: [undefined, true, false] }]);
    expect(configDiff([null, { a: 1 }])).toEqual({ rows: [], agreeing: 0, unrecorded: [0] });
    expect(configDiff([{ a: 1, b: 2 }, { a: 1 }])).toEqual({ rows: [{ key: 'b', values: [2, undefined] }], agreeing: 1, unrecorded: [] });
    // An older CLI (runs/ablation) had no dual clip or mini-batches: those settings differ from today's run.
    const older = diffKeys(cli('runs/ablation/gating-s1', ['metrics.jsonl', 'state.json']), cli('runs/ablation-naive/gating-s1'));
    expect(older).toEqual(expect.arrayContaining(['batch', 'miniBatch', 'loss.dualClip']));
  });

  it('flattens nested settings to dotted paths, keeps arrays whole, and prints values plainly', () => {
    expect(flattenConfig({ a: 1, b: { c: [1, 2], d: { e: null } }, f: {} })).toEqual({ a: 1, 'b.c': [1, 2], 'b.d.e': null, f: {} });
    expect(startName('public/checkpoints/warmstart-naive')).toBe('checkpoints/warmstart-naive');
    expect(startName('/checkpoints/warmstart-tiny/')).toBe('checkpoints/warmstart-tiny');
    expect([valueText(undefined), valueText(null), valueText([8, 16]), valueText(2e-5), valueText(0.2), valueText(true)]).toEqual(['—', 'off', '8,16', '2e-5', '0.2', 'true']);
    const c = comparableConfig(cli('runs/ablation-naive/no-gating-s1'));
    expect(KEY_SETTINGS.map((k) => `${k.label} ${k.text(c ?? {})}`)).toEqual(['lr 2e-5', 'B×G 16×4', 'gating off']);
    expect(KEY_SETTINGS.map((k) => k.text({}))).toEqual(['—', '—', '—']);
  });
});
