/**
 * export-verl's files as SELFCEST's verl fork uses them (commit c37cc91e), in Python:
 *
 * - the reward called exactly as tool_agent_loop.py's _assign_rewards calls it (restated in
 *   test/python/verl_loop.py): right answers score near 1 and wrong ones below, both recipes,
 *   both tasks;
 * - the reference recipe against clone_reward_2.py's formulas on cases computed here by hand;
 * - selfcest_dump.py on batches shaped as the fork's (torch tensors and numpy object columns, as
 *   agent_loop.py's _postprocess builds them) from model-like text, read back by import-verl into
 *   the same trees, answers, token counts and rewards, named clones included;
 * - the parquet files as verl loads them (pyarrow, datasets).
 *
 * Needs a Python with tokenizers, transformers, numpy, torch, pyarrow and datasets (test/python/
 * python.ts: .ci/run makes one); without it each part is skipped, saying what is missing.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from './cliProcess';
import { pythonWith } from './python/python';
import { parseTracesJsonl } from '../src/core/io/traces';
import { REFERENCE_FINAL_ANSWER_MARKERS } from '../src/core/verl/config';
import type { EpisodeTrace } from '../src/core/rollout/trace';

const PY = (f: string) => fileURLToPath(new URL(`./python/${f}`, import.meta.url));
const LOOP = pythonWith('numpy', 'tokenizers', 'transformers');
const TORCH = pythonWith('numpy', 'tokenizers', 'transformers', 'torch');
const ARROW = pythonWith('pyarrow');
const DATASETS = pythonWith('datasets', 'pyarrow');
for (const [what, p] of [
  ['the loop checks', LOOP],
  ['the torch batches', TORCH],
  ['the pyarrow read', ARROW],
  ['datasets.load_dataset', DATASETS],
] as const) {
  if (p.python === null) console.warn(`test/verl-loop.test.ts: ${what} skipped: ${p.why}`);
}

let dir: string;
const exports: Record<string, string> = {};
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'selfcest-verl-loop-'));
  for (const recipe of ['playground', 'reference']) {
    for (const task of ['arithmetic', 'multihop']) {
      const out = join(dir, `${recipe}-${task}`);
      const r = await cli('export-verl', '--recipe', recipe, '--task', task, '--train', '32', '--test', '6', '--out', out);
      if (r.code !== 0) throw new Error(`export-verl ${recipe} ${task}: ${r.stderr}`);
      exports[`${recipe}-${task}`] = out;
    }
  }
}, 120_000);
afterAll(() => rm(dir, { recursive: true, force: true }));

function run(python: string, args: string[], input?: string): string {
  const r = spawnSync(python, args, { encoding: 'utf8', input, maxBuffer: 256 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${args[0]} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** The loop's final-answer markers for an export: what its config.yaml gives. */
const markersOf = () => [...REFERENCE_FINAL_ANSWER_MARKERS];

describe('the exported reward, called as the tool agent loop calls it', () => {
  it.skipIf(LOOP.python === null)('scores a right answer near 1 (with and without a spawn) and a wrong one below it, for both recipes and both tasks', () => {
    const seen: string[] = [];
    for (const [name, out] of Object.entries(exports)) {
      const [recipe, task] = name.split('-');
      const scores = JSON.parse(
        run(LOOP.python!, [
          PY('verl_loop_check.py'),
          join(out, 'selfcest_reward.py'),
          task,
          JSON.stringify(markersOf()),
          recipe === 'reference' ? '0.05' : '0',
        ]),
      ) as Record<string, { reward: number; clone_rewards: number[] }>;
      for (const spawn of ['with spawn', 'without spawn']) {
        const right = scores[`right ${spawn}`];
        const wrong = scores[`wrong ${spawn}`];
        // Near 1: the playground recipe's token cost (0.003 a generated token) is all that is taken off these short episodes.
        expect(right.reward, `${name} right ${spawn}`).toBeGreaterThan(0.8);
        expect(right.reward, `${name} right ${spawn}`).toBeLessThanOrEqual(1);
        expect(wrong.reward, `${name} wrong ${spawn}`).toBeLessThan(right.reward - 0.5);
        if (spawn === 'with spawn') expect(right.clone_rewards, `${name}: both clones answered, so both get R`).toEqual([right.reward, right.reward]);
        seen.push(`${name} ${spawn}: right ${right.reward.toFixed(3)}, wrong ${wrong.reward.toFixed(3)}`);
      }
    }
    console.log(`rewards as the loop gives them:\n  ${seen.join('\n  ')}`);
  });

  it.skipIf(LOOP.python === null)(
    "scores a right answer at least 0.5 above the same episode's wrong one in every format a chat model writes, and a clone's own end-of-run call quietly",
    () => {
      const seen: string[] = [];
      for (const [name, out] of Object.entries(exports)) {
        const [recipe, task] = name.split('-');
        const result = JSON.parse(
          run(LOOP.python!, [
            PY('verl_formats_check.py'),
            join(out, 'selfcest_reward.py'),
            task,
            JSON.stringify(markersOf()),
            recipe === 'reference' ? '0.05' : '0',
          ]),
        ) as {
          pairs: { format: string; shape: string; right: number; wrong: number; root_tokens: number; clone_tokens: number }[];
          clone_own_call: { raised: string | null; reward: number | null; logged: string };
        };
        expect(result.pairs).toHaveLength(10);
        for (const p of result.pairs) {
          expect(p.right - p.wrong, `${name} ${p.shape} "${p.format}": right ${p.right}, wrong ${p.wrong}`).toBeGreaterThanOrEqual(0.5);
          // Episodes of a few hundred model tokens: the recipe's length terms leave a right answer clearly above zero.
          expect(p.right, `${name} ${p.shape} "${p.format}"`).toBeGreaterThan(0.5);
          expect(p.root_tokens).toBeGreaterThan(150);
          seen.push(`${name} ${p.shape} "${p.format}": ${p.right.toFixed(3)} vs ${p.wrong.toFixed(3)} (${p.root_tokens}+${p.clone_tokens} tokens)`);
        }
        expect(result.clone_own_call, name).toEqual({ raised: null, reward: 0, logged: '' });
      }
      console.log(`paired answers as the loop scores them:\n  ${seen.join('\n  ')}`);
    },
    60_000,
  );

  it.skipIf(LOOP.python === null)("--recipe reference gives clone_reward_2.py's numbers on cases computed by hand", async () => {
    const ones = (n: number) => Array<number>(n).fill(1);
    const P = (n: number, tau: number, rho: number, pmax: number) => (n <= tau ? 0 : pmax * (1 - Math.exp(-(n - tau) / rho)));
    const root = (truth: string | null, tokens: number, extra: object = {}) => ({
      response_ids: ones(tokens),
      response_mask: ones(tokens),
      extra_fields: { request_id: 'root', parent_request_id: null, actor_role: 'root', reward_model: truth === null ? {} : { ground_truth: truth }, ...extra },
    });
    const clone = (id: string, label: string, tokens: number) => ({
      response_ids: ones(tokens),
      response_mask: ones(tokens),
      extra_fields: { request_id: id, parent_request_id: 'root', clone_label: label, actor_role: 'clone' },
    });
    const call = '<tool_call>{"name": "spawn_clone", "arguments": {"objectives": ["x"]}}</tool_call>\n';
    const markers = markersOf();
    interface HandCase {
      id: string;
      args: { clone_rollouts: { extra_fields: { request_id: string } }[] } & Record<string, unknown>;
      reward: number;
      clones?: Record<string, number>;
    }
    const cases: HandCase[] = [
      // 600 root tokens: 88 past the threshold 512, ramp 256, at most 0.3. "1,234" reads as 1234.
      {
        id: 'penalty',
        args: { loop_text: 'so\nAnswer: 1,234', markers, root_output: root('1234', 600), clone_rollouts: [], root_text: 'so\nAnswer: 1,234', clone_texts: {} },
        reward: 1 - 0.3 * (1 - Math.exp(-88 / 256)),
      },
      // The last integer of the answer text counts, not the first.
      {
        id: 'last',
        args: {
          loop_text: 'Answer: 12 then 1234',
          markers,
          root_output: root('1234', 40),
          clone_rollouts: [],
          root_text: 'Answer: 12 then 1234',
          clone_texts: {},
        },
        reward: 1,
      },
      {
        id: 'partial',
        args: {
          loop_text: 'Answer: 1234 or maybe 12',
          markers,
          root_output: root('1234', 40),
          clone_rollouts: [],
          root_text: 'Answer: 1234 or maybe 12',
          clone_texts: {},
        },
        reward: 0.2 / Math.log2(2 + 1222 / Math.sqrt(1236)),
      },
      // Negative numbers: √|2 + max(A, B)| = √|2 − 3| = 1, so 0.2 / log2(2 + 2) (the playground's √(2 + max|·|) would give another number).
      {
        id: 'negative',
        args: { loop_text: 'Answer: -5', markers, root_output: root('-3', 40), clone_rollouts: [], root_text: 'Answer: -5', clone_texts: {} },
        reward: 0.1,
      },
      // 2 + max(-2, -5) = 0: the reference divides by zero, the loop catches it and scores root and clones 0.
      {
        id: 'zero',
        args: {
          loop_text: 'Answer: -2',
          markers,
          root_output: root('-5', 40),
          clone_rollouts: [clone('c', 'turn0_clone0', 5)],
          root_text: call + 'Answer: -2',
          clone_texts: { c: 'Answer: 1' },
        },
        reward: 0,
        clones: {},
      },
      // No integer in the truth: 0.1 when it appears in the answer.
      {
        id: 'substring',
        args: {
          loop_text: 'Answer: it is seven',
          markers,
          root_output: root('seven', 40),
          clone_rollouts: [],
          root_text: 'Answer: it is seven',
          clone_texts: {},
        },
        reward: 0.1,
      },
      // The gate: no "answer:" in any case and more than 192 tokens.
      {
        id: 'gate',
        args: {
          loop_text: call + 'Answer: 1234',
          markers,
          root_output: root('1234', 100),
          clone_rollouts: [clone('g193', 'turn0_clone0', 193), clone('a193', 'turn0_clone1', 193), clone('g192', 'turn0_clone2', 192)],
          root_text: call + 'Answer: 1234',
          clone_texts: { g193: 'thinking and thinking', a193: 'so, ANSWER: 5', g192: 'thinking' },
        },
        reward: 1,
        clones: { g193: 0, a193: 1, g192: 1 },
      },
      // Clone penalty: the longest clone of each turn (a named clone is a turn of its own), the largest penalty; three calls cost 0.3 − 0.2.
      {
        id: 'turns',
        args: {
          loop_text: call.repeat(3) + 'Answer: 1234',
          markers,
          root_output: root('1234', 50),
          clone_rollouts: [clone('t0', 'turn0_clone0', 700), clone('left', 'left', 600), clone('t1', 'turn1_clone0', 100)],
          root_text: call.repeat(3) + 'Answer: 1234',
          clone_texts: { t0: 'Answer: 1', left: 'Answer: 2', t1: 'Answer: 3' },
        },
        reward: 1 - P(700, 512, 512, 0.2) - 0.1,
      },
      // The reference's markers: after </think>, then after "Final Answer:".
      {
        id: 'markers',
        args: {
          loop_text: '<think>99</think>Final Answer: 1234',
          markers,
          root_output: root('1234', 40),
          clone_rollouts: [],
          root_text: '<think>99</think>Final Answer: 1234',
          clone_texts: {},
        },
        reward: 1,
      },
      {
        id: 'no truth',
        args: { loop_text: 'Answer: 1', markers, root_output: root(null, 40), clone_rollouts: [], root_text: 'Answer: 1', clone_texts: {} },
        reward: 0,
      },
    ];
    const file = join(dir, 'reference-cases.json');
    await writeFile(
      file,
      JSON.stringify({
        modules: { ref: join(exports['reference-arithmetic'], 'selfcest_reward.py') },
        cases: cases.map((c) => ({ id: c.id, module: 'ref', fn: 'clone_accuracy_reward', args: c.args })),
      }),
    );
    const results = (
      JSON.parse(run(LOOP.python!, [PY('verl_reward_check.py'), file])) as {
        results: Record<string, { reward: number; clone_rewards: Record<string, number> | unknown[] }>;
      }
    ).results;
    for (const c of cases) {
      expect(results[c.id].reward, c.id).toBeCloseTo(c.reward, 12);
      const clones: Record<string, number> = c.clones ?? Object.fromEntries(c.args.clone_rollouts.map((k) => [k.extra_fields.request_id, c.reward]));
      if (c.id === 'no truth') continue;
      const got = results[c.id].clone_rewards as Record<string, number>;
      expect(Object.keys(got).sort(), c.id).toEqual(Object.keys(clones).sort());
      for (const [k, v] of Object.entries(clones)) expect(got[k], `${c.id} ${k}`).toBeCloseTo(v, 12);
    }
    expect(results.zero).toMatchObject({ reference_error: expect.stringContaining('ZeroDivisionError') });
    expect(results['no truth']).toMatchObject({ reason: 'missing_ground_truth' });
  });
});

/** What the fixture says each root should read back as. */
interface FixtureEpisode {
  request_id: string;
  step: number;
  truth: string;
  answer: string | null;
  reward: number;
  generated: number;
  clones: { request_id: string; label: string; objective: string; answered: boolean; reward: number; generated: number }[];
}

async function writeDump(
  name: string,
  opts: { recipe: string; task: string; backend: string; logParts?: boolean; steps?: number; prompts?: number },
): Promise<{ out: string; episodes: FixtureEpisode[] }> {
  const exp = exports[`${opts.recipe}-${opts.task}`];
  const out = join(dir, name);
  const spec = join(dir, `${name}.json`);
  await writeFile(
    spec,
    JSON.stringify({
      reward: join(exp, 'selfcest_reward.py'),
      dump: join(exp, 'selfcest_dump.py'),
      out,
      task: opts.task,
      steps: opts.steps ?? 4,
      prompts: opts.prompts ?? 4,
      group: 4,
      seed: 7,
      markers: markersOf(),
      json_repair_penalty: opts.recipe === 'reference' ? 0.05 : 0,
      summary_max_length: 256,
      summary_truncate_side: opts.recipe === 'reference' ? 'right' : 'left',
      backend: opts.backend,
      log_parts: opts.logParts ?? true,
    }),
  );
  return {
    out,
    episodes: (JSON.parse(run((opts.backend === 'torch' ? TORCH : LOOP).python!, [PY('verl_dump_fixture.py'), spec])) as { episodes: FixtureEpisode[] })
      .episodes,
  };
}

async function importDump(out: string): Promise<(EpisodeTrace & { step?: number })[]> {
  const traces = join(dir, `${out.split('/').pop()}.traces.jsonl`);
  const r = await cli('import-verl', '--in', out, '--out', traces);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return parseTracesJsonl(await readFile(traces, 'utf8'));
}

function expectSame(traces: (EpisodeTrace & { step?: number })[], episodes: FixtureEpisode[], parts: boolean): void {
  expect(traces.map((t) => t.problemId)).toEqual(episodes.map((e) => e.request_id));
  traces.forEach((t, i) => {
    const e = episodes[i];
    const at = `episode ${i} (${e.request_id})`;
    expect(t.step, at).toBe(e.step);
    expect(t.truth, at).toBe(e.truth);
    expect(t.answer, at).toBe(e.answer);
    expect(t.correct, at).toBe(e.answer === e.truth);
    expect(t.contexts[0].generatedTokens, at).toBe(e.generated);
    // The reward as the trainer logged it (a float32 of verl's token-level scores).
    const reward = t.reward?.reward ?? t.sourceReward?.reward;
    expect(Math.abs(reward! - e.reward), at).toBeLessThan(1e-6);
    if (parts) expect(t.reward, `${at}: all parts logged`).toBeDefined();
    else {
      expect(t.reward, at).toBeUndefined();
      expect(t.sourceReward!.parts, `${at}: no part logged, none invented`).toBeUndefined();
    }
    // Every clone, by its objective; a named clone in a round of its own, labelled ones by their turn.
    const clones = t.contexts.slice(1);
    expect(clones.map((c) => c.subtask).sort(), at).toEqual(e.clones.map((c) => c.objective).sort());
    for (const c of e.clones) {
      const ctx = clones.find((x) => x.subtask === c.objective)!;
      expect(ctx.generatedTokens, `${at} ${c.label}`).toBe(c.generated);
      expect(ctx.answer !== null, `${at} ${c.label}`).toBe(c.answered);
      const turn = /^turn(\d+)_clone/.exec(c.label);
      const sameRound = clones.filter((x) => x.round === ctx.round).map((x) => e.clones.find((y) => y.objective === x.subtask)!.label);
      if (turn)
        expect(
          sameRound.every((l) => l.startsWith(`turn${turn[1]}_`)),
          `${at} ${c.label}`,
        ).toBe(true);
      else expect(sameRound, `${at}: ${c.label} is a round of its own`).toEqual([c.label]);
    }
    expect(t.rounds, at).toBe(new Set(clones.map((c) => c.round)).size);
  });
}

describe('selfcest_dump.py and import-verl', () => {
  it.skipIf(TORCH.python === null)(
    'a dump written from torch batches reads back as the same trees, answers, tokens and rewards (playground recipe, parts logged)',
    async () => {
      const { out, episodes } = await writeDump('dump-playground', { recipe: 'playground', task: 'arithmetic', backend: 'torch' });
      const traces = await importDump(out);
      expectSame(traces, episodes, true);
      const named = episodes.filter((e) => e.clones.some((c) => !c.label.startsWith('turn'))).length;
      const twoCalls = traces.filter((t) => t.events.filter((x) => x.kind === 'spawn').length >= 2).length;
      const unanswered = episodes.reduce((n, e) => n + e.clones.filter((c) => !c.answered).length, 0);
      const rows = (await Promise.all([1, 2, 3, 4].map(async (s) => (await readFile(join(out, `${s}.jsonl`), 'utf8')).trim().split('\n').length))).reduce(
        (a, b) => a + b,
        0,
      );
      console.log(
        `dump: ${rows} rows, ${episodes.length} roots, ${named} with named clones, ${twoCalls} with two or more rounds, ${unanswered} clones without an answer`,
      );
      expect(named).toBeGreaterThan(0);
      expect(twoCalls).toBeGreaterThan(0);
      expect(unanswered).toBeGreaterThan(0);
      // A row has verl's own fields and the links: what the stock logger writes plus what it drops.
      const row = JSON.parse((await readFile(join(out, '2.jsonl'), 'utf8')).split('\n')[0]);
      expect(Object.keys(row)).toEqual(
        expect.arrayContaining([
          'input',
          'output',
          'gts',
          'score',
          'step',
          'request_id',
          'actor_role',
          'uid',
          'data_source',
          'response_mask_tokens',
          'response_tokens',
          'reward_extra_info',
        ]),
      );
    },
    120_000,
  );

  it.skipIf(LOOP.python === null)(
    'numpy batches, the reference recipe, multihop, and a reward that logs no parts (shown as not logged)',
    async () => {
      const ref = await writeDump('dump-reference', { recipe: 'reference', task: 'arithmetic', backend: 'numpy', steps: 2 });
      expectSame(await importDump(ref.out), ref.episodes, true);
      const mh = await writeDump('dump-multihop', { recipe: 'playground', task: 'multihop', backend: 'numpy', steps: 2 });
      expectSame(await importDump(mh.out), mh.episodes, true);
      const bare = await writeDump('dump-noparts', { recipe: 'reference', task: 'arithmetic', backend: 'numpy', steps: 2, logParts: false });
      expectSame(await importDump(bare.out), bare.episodes, false);
    },
    120_000,
  );
});

describe('the parquet files as verl loads them', () => {
  const script = `import json, sys
import pyarrow.parquet as pq
out = {}
for name in ("train", "test"):
    t = pq.read_table(f"{sys.argv[1]}/{name}.parquet")
    out[name] = {"schema": {f.name: str(f.type) for f in t.schema}, "rows": t.to_pylist()}
if len(sys.argv) > 2:
    import datasets
    d = datasets.load_dataset("parquet", data_files={"train": f"{sys.argv[1]}/train.parquet", "test": f"{sys.argv[1]}/test.parquet"}, cache_dir=sys.argv[2])
    out["datasets"] = {k: {"rows": d[k].num_rows, "columns": d[k].column_names, "first": d[k][0]} for k in ("train", "test")}
print(json.dumps(out))`;

  for (const task of ['arithmetic', 'multihop']) {
    it.skipIf(ARROW.python === null)(
      `${task}: pyarrow reads verl's columns and types, chat prompts, the ground truth and extra_info${DATASETS.python ? '; datasets.load_dataset("parquet") loads the same rows' : ''}`,
      () => {
        const exp = exports[`playground-${task}`];
        const python = DATASETS.python ?? ARROW.python!;
        const got = JSON.parse(run(python, ['-c', script, exp, ...(DATASETS.python ? [join(dir, 'hf-cache')] : [])]));
        for (const name of ['train', 'test']) {
          const { schema, rows } = got[name] as { schema: Record<string, string>; rows: Record<string, any>[] };
          expect(Object.keys(schema)).toEqual(['data_source', 'agent_name', 'prompt', 'ability', 'reward_model', 'extra_info']);
          expect(schema.prompt).toBe('list<element: struct<role: string, content: string>>');
          expect(schema.reward_model).toBe('struct<style: string, ground_truth: string, data_source: string>');
          expect(schema.extra_info).toMatch(/^struct<split: string, index: int64, problem_id: string, task: string, prompt: string, answer: string/);
          expect(rows).toHaveLength(name === 'train' ? 32 : 6);
          rows.forEach((r, i) => {
            expect(r.data_source).toBe(`selfcest_${task}`);
            expect(r.agent_name).toBe('tool_agent');
            expect(r.prompt.map((m: { role: string }) => m.role)).toEqual(['system', 'user']);
            expect(r.reward_model.ground_truth).toBe(r.extra_info.answer);
            expect(r.extra_info.index).toBe(i);
            if (task === 'multihop') {
              expect(r.extra_info.context_items.length).toBeGreaterThan(0);
              expect(r.extra_info.context_items.every((c: { key: string; text: string }) => typeof c.key === 'string' && c.text.length > 0)).toBe(true);
            }
          });
          if (DATASETS.python) {
            const d = got.datasets[name];
            expect(d.rows).toBe(rows.length);
            expect(d.columns).toEqual(Object.keys(schema));
            expect(d.first).toEqual(rows[0]);
          }
        }
      },
      120_000,
    );
  }
});
