import { describe, expect, it } from 'vitest';
import { cliRunOf } from './cliRun';
import { OVERLAY_METRICS } from './overlay';
import { STUDIES, studyById, studyRunFiles } from './studies';

describe('recorded studies', () => {
  it('bundle every run they name, and each reads as a CLI run with its config and held-out readings', async () => {
    for (const study of STUDIES) {
      expect(OVERLAY_METRICS.map((m) => m.id)).toContain(study.metric);
      expect(new Set(study.runs.map((r) => r.name)).size).toBe(study.runs.length);
      for (const r of study.runs) {
        const { run } = cliRunOf(await studyRunFiles(r), { id: r.name, keptAt: '2026-01-01T00:00:00Z', name: r.name });
        expect(run.name).toBe(r.name);
        expect(run.counters.grpoSteps).toBe(150);
        expect(run.heldOut.length).toBeGreaterThan(0);
        expect(run.origin.kind === 'cli' && run.origin.config).toBeTruthy();
      }
    }
  });

  it('pairs the gating arms by seed: the arms differ in the gate only', async () => {
    const study = studyById('gating-ablation');
    const configs = await Promise.all(study.runs.map(async (r) => JSON.parse((await studyRunFiles(r))[1].text).config));
    const arms = configs.map((c) => `${c.advantage.gating ? c.advantage.gateMode : 'none'} ${c.seed}`);
    expect(arms.sort()).toEqual(['none 1', 'none 2', 'none 3', 'protocol 1', 'protocol 2', 'protocol 3', 'reference 1', 'reference 2', 'reference 3']);
    const rest = configs.map(({ advantage: { gating: _g, gateMode: _m, ...a }, seed: _s, ...c }) => JSON.stringify({ ...c, a }));
    expect(new Set(rest).size).toBe(1);
  });

  it('names an unknown study and a file the build lacks', async () => {
    expect(() => studyById('nope')).toThrow(/no recorded study "nope" \(the studies: gating-ablation\)/);
    await expect(studyRunFiles({ name: 'x', dir: 'runs/ablation-sloppy/missing' })).rejects.toThrow('runs/ablation-sloppy/missing/metrics.jsonl is not in this build');
  });
});
