/**
 * The verl dataset export reads back, outside our writer, as the rows verl expects.
 *
 * Files are written with hyparquet-writer and read with parquet-wasm (arrow-rs compiled to wasm)
 * into apache-arrow tables: another implementation of parquet, so a wrong nesting, a list layout
 * a reader does not map to List, or int64 written as double shows up here as it would in
 * pyarrow. The expected rows are spelled out from problems regenerated here with the splits'
 * generator, not from verlRows.
 */
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Table, DataType, Vector, tableFromIPC } from 'apache-arrow';
import { readParquet } from 'parquet-wasm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeParquet } from '../src/cli/verl/parquet';
import { exportVerlDataset, type VerlExportOptions } from '../src/cli/verl/exportDataset';
import { heldOutProblems } from '../src/core/eval/evaluate';
import { type EvalSplit, drawProblem, splitOf } from '../src/core/eval/splits';
import { Rng } from '../src/core/rng';
import { type Problem, type TaskEntry, withOptions } from '../src/core/tasks';
import { multihop, resolveChain } from '../src/core/tasks/multihop';
import { ARITHMETIC_SYSTEM_PROMPT, multihopSystemPrompt, verlRows, verlSchema } from '../src/core/verl/dataset';

const COLUMNS = ['data_source', 'agent_name', 'prompt', 'ability', 'reward_model', 'extra_info'];
const MESSAGES = 'List<Struct<{role:Utf8, content:Utf8}>>';
const REWARD_MODEL = 'Struct<{style:Utf8, ground_truth:Utf8, data_source:Utf8}>';
const COMMON = 'split:Utf8, index:Int64, problem_id:Utf8, task:Utf8, prompt:Utf8, answer:Utf8';
const EXTRA_INFO = {
  arithmetic: `Struct<{${COMMON}, operands:Int64, terms:Int64}>`,
  multihop: `Struct<{${COMMON}, question:Utf8, mono_prompt:Utf8, context_keys:List<Utf8>, context_items:List<Struct<{key:Utf8, text:Utf8}>>, chunks:Int64, perChunk:Int64, hops:Int64, names:Int64, filler:Int64}>`,
};

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'selfcest-verl-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function readTable(path: string): Promise<Table> {
  return tableFromIPC(readParquet(new Uint8Array(await readFile(path))).intoIPCStream());
}

/** Arrow rows as plain values: structs as objects, lists as arrays, int64 as bigint. */
function plain(v: unknown): unknown {
  if (v instanceof Vector) return [...v].map(plain);
  // A StructRow is a proxy whose `in` sees only its fields, so ask for toJSON directly.
  const toJSON = v !== null && typeof v === 'object' ? (v as { toJSON?: unknown }).toJSON : undefined;
  if (typeof toJSON === 'function') {
    return Object.fromEntries(Object.entries(toJSON.call(v) as Record<string, unknown>).map(([k, x]) => [k, plain(x)]));
  }
  return v;
}

const rowsOf = (t: Table) => t.toArray().map(plain) as Record<string, unknown>[];
const typesOf = (t: Table) => Object.fromEntries(t.schema.fields.map((f) => [f.name, String(f.type)]));

/** The train problems regenerated here: the train split's stream, ids train-<seed>-<i>. */
function trainProblems(e: TaskEntry, n: number, seed: number): Problem[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, (_, i) => drawProblem(e.task, rng, e.opts, `train-${seed}-${i}`, 'train'));
}

const content = (p: Problem) => JSON.stringify([p.prompt, p.monoPrompt ?? '', p.context ?? {}, p.truth]);

function expectedArithmetic(p: Problem, split: 'train' | 'test', index: number, dataSource = 'selfcest_arithmetic') {
  return {
    data_source: dataSource,
    agent_name: 'tool_agent',
    prompt: [
      { role: 'system', content: ARITHMETIC_SYSTEM_PROMPT },
      { role: 'user', content: `Calculate the value of ${p.prompt}.` },
    ],
    ability: 'math',
    reward_model: { style: 'rule', ground_truth: p.truth, data_source: dataSource },
    extra_info: {
      split,
      index: BigInt(index),
      problem_id: p.id,
      task: 'arithmetic',
      prompt: p.prompt,
      answer: p.truth,
      operands: BigInt(p.meta.operands),
      terms: BigInt(p.meta.terms),
    },
  };
}

function expectedMultihop(p: Problem, split: 'train' | 'test', index: number) {
  const keys = Object.keys(p.context!);
  const variable = / ([a-z]+)\?$/.exec(p.prompt)![1];
  return {
    data_source: 'selfcest_multihop',
    agent_name: 'tool_agent',
    prompt: [
      { role: 'system', content: multihopSystemPrompt(p) },
      { role: 'user', content: `Question: what is the value of ${variable}?\n\nContext keys:\n${keys.map((k) => `- ${k}`).join('\n')}` },
    ],
    ability: 'multihop_qa',
    reward_model: { style: 'rule', ground_truth: p.truth, data_source: 'selfcest_multihop' },
    extra_info: {
      split,
      index: BigInt(index),
      problem_id: p.id,
      task: 'multihop',
      prompt: p.prompt,
      answer: p.truth,
      question: variable,
      mono_prompt: p.monoPrompt,
      context_keys: keys,
      context_items: Object.entries(p.context!).map(([key, text]) => ({ key, text })),
      chunks: BigInt(p.meta.chunks),
      perChunk: BigInt(p.meta.perChunk),
      hops: BigInt(p.meta.hops),
      names: BigInt(p.meta.names),
      filler: BigInt(p.meta.filler),
    },
  };
}

describe('export-verl dataset: arithmetic', () => {
  const entry = withOptions('arithmetic');
  const seed = 7;
  let dir: string;
  let train: Table;
  let test: Table;
  beforeAll(async () => {
    dir = join(root, 'arithmetic');
    const result = await exportVerlDataset({ entry, train: 20, test: 10, seed, outDir: dir });
    expect(result).toEqual({
      train: { path: join(dir, 'train.parquet'), rows: 20 },
      test: { path: join(dir, 'test.parquet'), rows: 10 },
      dataSource: 'selfcest_arithmetic',
      testSplit: 'final',
    });
    train = await readTable(result.train.path);
    test = await readTable(result.test.path);
  });

  it('writes the two files and no temporary ones', async () => {
    expect((await readdir(dir)).sort()).toEqual(['test.parquet', 'train.parquet']);
  });

  it('has verl’s columns in order, with nested Arrow types, in both files', () => {
    for (const t of [train, test]) {
      expect(t.schema.fields.map((f) => f.name)).toEqual(COLUMNS);
      expect(typesOf(t)).toEqual({
        data_source: 'Utf8',
        agent_name: 'Utf8',
        prompt: MESSAGES,
        ability: 'Utf8',
        reward_model: REWARD_MODEL,
        extra_info: EXTRA_INFO.arithmetic,
      });
      // The same through the type predicates, not only the printed names.
      const prompt = t.schema.fields[2].type;
      expect(DataType.isList(prompt) && DataType.isStruct(prompt.children[0].type)).toBe(true);
      const index = t.schema.fields[5].type.children.find((c: { name: string }) => c.name === 'index')!.type;
      expect(DataType.isInt(index) && index.bitWidth === 64 && index.isSigned).toBe(true);
    }
    expect(train.numRows).toBe(20);
    expect(test.numRows).toBe(10);
  });

  it('holds the train split’s problems for the seed, and the final held-out set as test', () => {
    const trainP = trainProblems(entry, 20, seed);
    const testP = heldOutProblems(entry.task, entry.opts, 10, seed, 'final');
    expect(rowsOf(train)).toEqual(trainP.map((p, i) => expectedArithmetic(p, 'train', i)));
    expect(rowsOf(test)).toEqual(testP.map((p, i) => expectedArithmetic(p, 'test', i)));
    // Ground truth is the verifier's truth: a row's answer scores correct on its problem.
    rowsOf(test).forEach((r, i) => {
      const truth = (r.reward_model as { ground_truth: string }).ground_truth;
      expect(entry.task.verify(testP[i], truth).correct).toBe(true);
    });
  });

  it('keeps train and test disjoint by content, each from its own split', () => {
    const ids = (t: Table) => rowsOf(t).map((r) => (r.extra_info as { problem_id: string }).problem_id);
    expect(ids(train).every((id, i) => id === `train-${seed}-${i}`)).toBe(true);
    expect(ids(test).every((id, i) => id === `final-${seed}-${i}`)).toBe(true);
    const trainP = trainProblems(entry, 20, seed);
    const testP = heldOutProblems(entry.task, entry.opts, 10, seed, 'final');
    expect(trainP.every((p) => splitOf(p) === 'train')).toBe(true);
    expect(testP.every((p) => splitOf(p) === 'final')).toBe(true);
    const seen = new Set(trainP.map(content));
    expect(testP.filter((p) => seen.has(content(p)))).toEqual([]);
  });

  it('records what regenerates the problems in the file’s metadata', () => {
    const about = (t: Table) => JSON.parse(t.schema.metadata.get('selfcest') ?? 'null') as Record<string, unknown>;
    expect(about(train)).toMatchObject({ format: 'selfcest-verl-dataset', task: 'arithmetic', options: entry.opts, seed, split: 'train', problems: 20 });
    expect(about(test)).toMatchObject({ split: 'final', problems: 10 });
  });

  it('writes the same bytes for the same seed, other problems for another', async () => {
    const again = join(root, 'arithmetic-again');
    await exportVerlDataset({ entry, train: 20, test: 10, seed, outDir: again });
    for (const f of ['train.parquet', 'test.parquet']) expect(await readFile(join(again, f))).toEqual(await readFile(join(dir, f)));
    const other = join(root, 'arithmetic-other');
    await exportVerlDataset({ entry, train: 20, test: 10, seed: seed + 1, outDir: other });
    const prompts = (t: Table) => rowsOf(t).map((r) => (r.extra_info as { prompt: string }).prompt);
    expect(prompts(await readTable(join(other, 'train.parquet')))).not.toEqual(prompts(train));
  });

  it('takes the monitored set as test and a data_source of its own when asked', async () => {
    const out = join(root, 'arithmetic-monitor');
    const r = await exportVerlDataset({ entry, train: 3, test: 5, seed, outDir: out, testSplit: 'monitor', dataSource: 'my_arith' });
    expect(r.testSplit).toBe('monitor');
    const monitorP = heldOutProblems(entry.task, entry.opts, 5, seed, 'monitor');
    expect(rowsOf(await readTable(r.test.path))).toEqual(monitorP.map((p, i) => expectedArithmetic(p, 'test', i, 'my_arith')));
    const finalIds = new Set(heldOutProblems(entry.task, entry.opts, 5, seed, 'final').map(content));
    expect(monitorP.some((p) => finalIds.has(content(p)))).toBe(false);
  });
});

describe('export-verl dataset: multihop', () => {
  for (const [label, raw, nTrain, nTest] of [
    ['default options', undefined, 12, 6],
    ['long context (6 × 4 among filler)', { chunks: 6, perChunk: 4, filler: 24 }, 20, 10],
  ] as const) {
    it(`${label}: nested context items equal the problems’ context, and a row alone answers its question`, async () => {
      const entry = withOptions('multihop', raw);
      const seed = 11;
      const out = join(root, `multihop-${nTrain}`);
      const r = await exportVerlDataset({ entry, train: nTrain, test: nTest, seed, outDir: out });
      const train = await readTable(r.train.path);
      const test = await readTable(r.test.path);
      for (const t of [train, test]) {
        expect(t.schema.fields.map((f) => f.name)).toEqual(COLUMNS);
        expect(typesOf(t)).toEqual({
          data_source: 'Utf8',
          agent_name: 'Utf8',
          prompt: MESSAGES,
          ability: 'Utf8',
          reward_model: REWARD_MODEL,
          extra_info: EXTRA_INFO.multihop,
        });
      }
      const trainP = trainProblems(entry, nTrain, seed);
      const testP = heldOutProblems(entry.task, entry.opts, nTest, seed, 'final');
      expect(rowsOf(train)).toEqual(trainP.map((p, i) => expectedMultihop(p, 'train', i)));
      expect(rowsOf(test)).toEqual(testP.map((p, i) => expectedMultihop(p, 'test', i)));
      expect(testP.some((p) => new Set(trainP.map(content)).has(content(p)))).toBe(false);

      for (const row of rowsOf(test)) {
        const info = row.extra_info as { prompt: string; context_items: { key: string; text: string }[]; answer: string; perChunk: bigint; names: bigint };
        expect(info.context_items).toHaveLength(6);
        // Each chunk's words: its assignments, and filler words with no letter or digit.
        expect(info.context_items.every((c) => c.text.split(' ').filter((w) => /[a-z0-9]/.test(w)).length === Number(info.perChunk))).toBe(true);
        // The problem rebuilt from the row's fields only resolves to the ground truth.
        const rebuilt: Problem = {
          task: 'multihop',
          id: 'x',
          prompt: info.prompt,
          truth: '',
          context: Object.fromEntries(info.context_items.map((c) => [c.key, c.text])),
          meta: { names: Number(info.names) },
        };
        expect(resolveChain(rebuilt).at(-1)).toBe((row.reward_model as { ground_truth: string }).ground_truth);
      }
    });
  }
});

describe('export-verl dataset: the multihop system prompt', () => {
  it("describes the problem's notation", () => {
    const one = verlRows(withOptions('multihop'), [multihop.generate(new Rng(1), multihop.defaultOptions, 'n1')], 'train', 'x')[0];
    const two = verlRows(withOptions('multihop', { names: 2 }), [multihop.generate(new Rng(1), multihop.validateOptions({ names: 2 }), 'n2')], 'train', 'x')[0];
    const system = (r: typeof one) => (r.prompt as { role: string; content: string }[])[0].content;
    expect(system(one)).toContain('`a7.` (a is 7): a one-letter name, then its value');
    expect(system(one)).not.toContain('ab=7');
    expect(system(two)).toContain('`ab=7.`');
  });
});

describe('export-verl dataset: refusals', () => {
  const entry = withOptions('arithmetic');
  const base = (outDir: string): VerlExportOptions => ({ entry, train: 2, test: 2, seed: 1, outDir });

  it('refuses empty or bad counts, seeds, splits and data sources before touching the disk', async () => {
    const out = join(root, 'refused');
    const cases: [Partial<VerlExportOptions>, RegExp][] = [
      [{ train: 0 }, /train must be an integer in \[1, 1000000\] \(got 0\)/],
      [{ test: 0 }, /test must be an integer in \[1, 1000000\] \(got 0\)/],
      [{ test: 2.5 }, /test must be an integer .*got 2\.5/],
      [{ seed: -1 }, /seed must be an integer in \[0, 2\^53/],
      [{ testSplit: 'train' as EvalSplit }, /testSplit must be one of monitor, final \(got "train"\)/],
      [{ dataSource: ' ' }, /dataSource must be a non-empty string/],
    ];
    for (const [bad, message] of cases) await expect(exportVerlDataset({ ...base(out), ...bad })).rejects.toThrow(message);
    await expect(stat(out)).rejects.toThrow(/ENOENT/);
  });

  it('leaves an earlier export as it was when a later one is refused', async () => {
    const out = join(root, 'kept');
    await exportVerlDataset(base(out));
    const before = await readFile(join(out, 'train.parquet'));
    await expect(exportVerlDataset({ ...base(out), seed: 2, train: 0 })).rejects.toThrow(/train must be/);
    expect(await readFile(join(out, 'train.parquet'))).toEqual(before);
  });

  it('refuses rows that do not fit the schema, naming the value, and zero rows', () => {
    const problems = trainProblems(entry, 1, 3);
    const columns = verlSchema('arithmetic');
    const [row] = verlRows(entry, problems, 'train', 'd');
    expect(() => encodeParquet(columns, [{ ...row, extra_info: { ...row.extra_info, index: 1.5 } }])).toThrow(
      'parquet: row 0: extra_info.index must be an integer (int64) (got 1.5)',
    );
    expect(() => encodeParquet(columns, [{ ...row, extra_info: { ...row.extra_info, hops: 2 } }])).toThrow(
      /extra_info has field hops, which its schema does not/,
    );
    expect(() => encodeParquet(columns, [{ ...row, prompt: 'hi' }])).toThrow('parquet: row 0: prompt must be a list (got "hi")');
    expect(() => encodeParquet(columns, [])).toThrow(/no rows to write/);
  });

  it('refuses a problem of another task or with meta fields the task does not declare', () => {
    const [p] = trainProblems(entry, 1, 3);
    const multihopP = trainProblems(withOptions('multihop'), 1, 3)[0];
    expect(() => verlRows(entry, [multihopP], 'train', 'd')).toThrow(/problem train-3-0 is of task multihop, not arithmetic/);
    expect(() => verlRows(entry, [{ ...p, meta: { ...p.meta, depth: 2 } }], 'train', 'd')).toThrow(/meta field depth has no column/);
    expect(() => verlRows(entry, [{ ...p, meta: { operands: 2.5, terms: 1 } }], 'train', 'd')).toThrow(/meta\.operands must be an integer \(got 2\.5\)/);
    expect(() => verlRows(entry, [p], 'train', '')).toThrow(/dataSource must be a non-empty string/);
  });
});
