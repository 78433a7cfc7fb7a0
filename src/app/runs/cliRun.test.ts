import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { cliRunOf, defaultCliName, parseConfigFile, parseMetricsJsonl, pickRunFiles } from './cliRun';
import { fromKeptRecord, toKeptRecord } from './keptRun';
import { tracesToJsonl } from '../../core/io/traces';
import { parseVerlRecords, verlRecordsToTraces } from '../../core/verl/readback';

const read = (path: string) => readFileSync(path, 'utf8');
const GATING = 'runs/ablation-naive/gating-s1';
const meta = { id: 'r1', keptAt: '2026-01-02T00:00:00.000Z' };
const files = (dir: string, names: string[]) => names.map((name) => ({ name, text: read(`${dir}/${name}`) }));

/** A row as the CLI writes it, with `over` on top. */
const row = (step: number, over: Record<string, unknown> = {}) => JSON.stringify({ step, meanReward: 0.5, accuracy: 0.25, ...over });

describe('a CLI run directory imported for comparison', () => {
  it('reads the gating arm of the ablation: its 150 steps, its six held-out readings at n = 64, its config and name', () => {
    const { run, ignored } = cliRunOf(files(GATING, ['metrics.jsonl', 'run.json', 'train.log']), meta);
    expect(ignored).toEqual(['train.log']);
    expect(run.name).toBe('ablation-naive/gating-s1');
    expect(run.task).toBe('arithmetic');
    expect(run.counters).toEqual({ policyVersion: null, grpoSteps: 150, sftSteps: 0 });
    expect(run.metrics).toHaveLength(150);
    const first = run.metrics[0];
    expect(first.metrics.step).toBe(1);
    expect(first.metrics.meanReward).toBeCloseTo(0.36045374959944243, 15);
    expect(first.metrics.violations.root_over_max).toBe(25);
    // 16 groups sampled × G = 4: the violation chart divides by 64 episodes, as the page's own rows.
    expect(first.episodes).toBe(64);
    expect(run.heldOut.map((h) => h.step)).toEqual([25, 50, 75, 100, 125, 150]);
    expect(run.heldOut.map((h) => h.accuracy)).toEqual([0.609375, 0.65625, 0.625, 0.609375, 0.71875, 0.703125]);
    expect(run.heldOut.every((h) => h.n === 64 && h.interval === null)).toBe(true);
    expect(run.origin).toMatchObject({ kind: 'cli', files: ['metrics.jsonl', 'run.json'], startedAt: '2026-12-01T12:57:23.578Z' });
    expect(run.origin.kind === 'cli' && run.origin.config).toMatchObject({ batch: 16, group: 4, advantage: { gating: true } });
  });

  it('reads an older directory (state.json, rows without the newer fields: NaN, not 0)', () => {
    const { run } = cliRunOf(files('runs/ablation/gating-s1', ['metrics.jsonl', 'state.json']), meta);
    expect(run.metrics).toHaveLength(25);
    expect(run.metrics[0].metrics.approxKl).toBeNaN();
    expect(run.metrics[0].metrics.entropy).toBeNaN();
    expect(run.metrics[0].metrics.gradNorm).toBeCloseTo(0.4773600111968332, 15);
    // Without run.json's command line, no --out: the name comes from the file.
    expect(run.name).toBe('metrics (CLI run)');
    expect(run.origin.kind === 'cli' && run.origin.command).toBeNull();
  });

  it('reads the metrics.jsonl of every GRPO run in runs/ and refuses every warm-start one as such', () => {
    const tracked = execFileSync('git', ['ls-files', 'runs'], { encoding: 'utf8' })
      .split('\n')
      .filter((p) => /^runs\/[^/]+(\/[^/]+)?\/metrics\.jsonl$/.test(p));
    expect(tracked.length).toBeGreaterThan(10);
    let grpo = 0;
    for (const path of tracked) {
      const text = read(path);
      if (text.includes('"meanReward"')) {
        expect(parseMetricsJsonl(text, path).length, path).toBeGreaterThan(0);
        grpo++;
      } else expect(() => parseMetricsJsonl(text, path), path).toThrow(`${path}: line 1: this is a warm-start (sft) row`);
    }
    expect(grpo).toBeGreaterThan(5);
  });

  it('names the file, the line and the field of a malformed row', () => {
    const bad = (lines: string[]) => () => parseMetricsJsonl(lines.join('\n'), 'metrics.jsonl');
    expect(bad([row(1), row(2), '{"step":3,"meanRew'])).toThrow(/^metrics\.jsonl: line 3: not JSON \(/);
    expect(bad([row(1), '', row(2), row(2)])).toThrow('metrics.jsonl: line 4: step 2 does not follow step 2 (steps must increase)');
    expect(bad([row(1, { accuracy: 1.5 })])).toThrow('metrics.jsonl: line 1: accuracy must be a share in [0, 1] (got 1.5)');
    expect(bad([row(1), row(2, { kl: 'small' })])).toThrow('metrics.jsonl: line 2: kl must be a number (got "small")');
    expect(bad([row(1, { violations: { clone_spawn: -1 } })])).toThrow('metrics.jsonl: line 1: violations.clone_spawn must be a count ≥ 0 (got -1)');
    expect(bad([JSON.stringify({ step: 1, accuracy: 0.5 })])).toThrow('metrics.jsonl: line 1: meanReward must be a finite number (got undefined)');
    expect(bad([JSON.stringify({ step: 0, meanReward: 0.5 })])).toThrow('metrics.jsonl: line 1: step must be a positive integer (got 0)');
    expect(bad(['[1,2]'])).toThrow('metrics.jsonl: line 1: a metrics row must be a JSON object (got [1,2])');
    expect(bad(['', '  '])).toThrow('metrics.jsonl: no rows');
    // A non-finite value the CLI wrote as null reads as "not recorded".
    expect(parseMetricsJsonl(row(1, { loss: null }), 'm.jsonl')[0].loss).toBeNaN();
  });

  it('names what is wrong with the config file and with the files picked', () => {
    expect(() => parseConfigFile('{"config": ', 'run.json')).toThrow(/^run\.json: not valid JSON \(/);
    expect(() => parseConfigFile('{"command": []}', 'run.json')).toThrow('run.json: config must be an object (the run\'s trainer config; got undefined)');
    expect(() => parseConfigFile('{"kind": "sft", "step": 3, "config": {}}', 'state.json')).toThrow('state.json: kind is "sft": only GRPO train runs compare here');
    expect(() => parseConfigFile('{"config": {}, "command": "train"}', 'run.json')).toThrow('run.json: command must be a list of strings');
    expect(() => pickRunFiles([{ name: 'run.json', text: '{}' }])).toThrow('no metrics file among run.json: pick the run\'s metrics.jsonl (and run.json if you have it)');
    expect(() => pickRunFiles([{ name: 'a.jsonl', text: '' }, { name: 'metrics.jsonl', text: '' }])).toThrow('pick one run at a time: a.jsonl and metrics.jsonl are both metrics files');
    // run.json is preferred to state.json (it is the first start's).
    expect(pickRunFiles([{ name: 'state.json', text: '' }, { name: 'run.json', text: '' }, { name: 'metrics.jsonl', text: '' }]).config?.name).toBe('run.json');
  });

  it('names the run after its --out, else its file', () => {
    expect(defaultCliName(['train', '--out', 'runs/ablation-naive/no-gating-s2/'], 'metrics.jsonl')).toBe('ablation-naive/no-gating-s2');
    expect(defaultCliName(['train', '--out', 'r1'], 'metrics.jsonl')).toBe('r1');
    expect(defaultCliName(null, 'arm-b.jsonl')).toBe('arm-b (CLI run)');
  });

  it('without run.json the run has no config, and its violation rates are not guessed', () => {
    const { run } = cliRunOf(files(GATING, ['metrics.jsonl']), meta);
    expect(run.origin.kind === 'cli' && run.origin.config).toBeNull();
    expect(run.task).toBe('');
    expect(run.metrics[0].episodes).toBeNaN();
    // Held-out readings are there; their n was on the command line, which is not.
    expect(run.heldOut).toHaveLength(6);
    expect(run.heldOut[0].n).toBeNull();
  });
});

describe('a run known by its traces alone (a verl run read back)', () => {
  const verlLines = [
    { request_id: 'a', parent_request_id: null, step: 1, prompt: 'Calculate 2+2.', response: 'Answer: 4', response_mask: [1, 1, 1], ground_truth: '4', data_source: 'selfcest_arithmetic', reward: 1 },
    { request_id: 'b', parent_request_id: null, step: 2, prompt: 'Calculate 3+3.', response: '<tool_call>x</tool_call><tool_response>["Answer: 6"]</tool_response>Answer: 6', response_mask: [1, 1, 0, 1], ground_truth: '6', data_source: 'selfcest_arithmetic', reward: 0.9 },
    { request_id: 'b1', parent_request_id: 'b', clone_label: 'turn0', prompt: '3+3', response: 'Answer: 6', response_mask: [1, 1] },
  ];
  const tracesText = () => tracesToJsonl(verlRecordsToTraces(parseVerlRecords(verlLines.map((l) => JSON.stringify(l)).join('\n'))));

  it('takes a traces file by its content, whatever its name: curves from its episodes, its rollouts kept for their trees', () => {
    const { run, ignored } = cliRunOf([{ name: 'verl-run.jsonl', text: tracesText() }, { name: 'notes.txt', text: 'x' }], meta);
    expect(ignored).toEqual(['notes.txt']);
    expect(run.name).toBe('verl-run (CLI run)');
    expect(run.task).toBe('arithmetic');
    expect(run.metrics.map((p) => [p.metrics.step, p.metrics.meanReward, p.metrics.clonesPerEpisode, p.episodes])).toEqual([
      [1, 1, 0, 1],
      [2, 0.9, 1, 1],
    ]);
    expect(run.metrics[0].metrics.loss).toBeNaN();
    expect(run.rollouts!.map((t) => [t.step, t.answer, t.contexts.length])).toEqual([
      [1, '4', 1],
      [2, '6', 2],
    ]);
    // Stored and read back as the browser does: the rollouts come back checked and equal.
    const back = fromKeptRecord(JSON.parse(JSON.stringify(toKeptRecord(run))), 'run-r1');
    expect(back.rollouts).toEqual(run.rollouts);
    const broken = { ...toKeptRecord(run), rollouts: [{ ...run.rollouts![0], contexts: [] }] };
    expect(() => fromKeptRecord(JSON.parse(JSON.stringify(broken)), 'run-r1')).toThrow('kept run run-r1: rollouts[0]: contexts must be a non-empty array');
  });

  it('a metrics file and a traces file together: the curves from the metrics, the rollouts kept beside them', () => {
    const { run } = cliRunOf([...files(GATING, ['metrics.jsonl', 'run.json']), { name: 'traces.jsonl', text: tracesText() }], meta);
    expect(run.metrics).toHaveLength(150);
    expect(run.rollouts).toHaveLength(2);
    expect(run.origin).toMatchObject({ files: ['metrics.jsonl', 'traces.jsonl', 'run.json'] });
  });

  it('takes a trainer\'s own traces (with tokens) alone the same way', () => {
    const { run } = cliRunOf(files('runs/grpo-naive-limit48', ['traces.sample.jsonl']), meta);
    expect(run.rollouts!.length).toBe(32);
    expect(run.rollouts![0].contexts[0].tokens.length).toBeGreaterThan(0);
    // The curve's reward at a step is the mean of that step's sampled episodes' rewards.
    const at = run.rollouts!.filter((t) => t.step === run.metrics[0].metrics.step);
    expect(run.metrics[0].metrics.meanReward).toBeCloseTo(at.reduce((a, t) => a + t.reward!.reward, 0) / at.length, 12);
    expect(run.metrics[0].episodes).toBe(at.length);
  });

  it('numbers the stored rollouts as the curves number the steps (a source counting from 0 starts at 1)', () => {
    const from0 = tracesText().replace('"step":1,', '"step":0,').replace('"step":2,', '"step":1,');
    const { run } = cliRunOf([{ name: 'verl.jsonl', text: from0 }], meta);
    expect(run.metrics.map((p) => p.metrics.step)).toEqual([1, 2]);
    expect(run.rollouts!.map((t) => t.step)).toEqual([1, 2]);
  });

  it('reads a verl dump as import-verl does (its step files in step order, one run), and names a trace of another schema as such', () => {
    const step = (n: number) => ({ name: `${n}.jsonl`, text: verlLines.filter((l) => (l.step ?? 2) === n).map((l) => JSON.stringify(l)).join('\n') + '\n' });
    const { run } = cliRunOf([step(2), step(1)], meta);
    expect(run.name).toBe('verl steps 1–2 (CLI run)');
    expect(run.origin).toMatchObject({ kind: 'cli', files: ['1.jsonl', '2.jsonl'] });
    expect(run.metrics.map((p) => [p.metrics.step, p.episodes])).toEqual([[1, 1], [2, 1]]);
    expect(run.rollouts!.map((t) => t.contexts.length)).toEqual([1, 2]);
    expect(run.rollouts).toEqual(verlRecordsToTraces(parseVerlRecords(verlLines.map((l) => JSON.stringify(l)).join('\n'))));
    expect(() => cliRunOf([step(1), { name: 'metrics.jsonl', text: '{"step":1}\n' }], meta)).toThrow('pick one run at a time: 1.jsonl holds verl rollout records, metrics.jsonl does not');
    expect(() => cliRunOf([{ name: '3.jsonl', text: JSON.stringify({ ...verlLines[0], response_mask: [2] }) }], meta)).toThrow('3.jsonl: line 1: response_mask must be an array of 0 and 1');
    const old = '\uFEFF' + tracesText().replace(/selfcest-episode\/1/g, 'selfcest-episode/0');
    expect(() => cliRunOf([{ name: 'old.jsonl', text: old }], meta)).toThrow('old.jsonl: line 1: schema is "selfcest-episode/0", expected "selfcest-episode/1"');
  });

  it('refuses a bad traces line by file and line, and two traces files', () => {
    const bad = tracesText().replace('"method":"delegate"', '"method":"both"');
    expect(() => cliRunOf([{ name: 'verl.jsonl', text: bad }], meta)).toThrow('verl.jsonl: line 1: method must be "delegate" or "mono"');
    expect(() => cliRunOf([{ name: 'a.jsonl', text: tracesText() }, { name: 'b.jsonl', text: tracesText() }], meta)).toThrow('a.jsonl and b.jsonl are both traces files');
  });
});
