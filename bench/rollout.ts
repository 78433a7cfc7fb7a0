/**
 * A real model's batched rollout against the same episodes one at a time, in one run
 * (`npm run bench -- rollout --model DIR [--episodes 16] [--group 1] [--seed 0] [--temperature 1]`,
 * `--group G`: G episodes of each problem, as a GRPO step samples a prompt's group): the one
 * rollout scheduler drives EPISODES arithmetic episodes of a Hugging Face model (the text protocol,
 * its clones included) through HfContextDecoder, first all together (every runnable root and clone
 * context of every episode in one forward per step), then each episode alone in its own scheduler.
 * Each episode samples from its own Rng, so both ways decode the same episodes (the count of
 * token-identical episodes is printed: a logit can differ in its last bits between a batch and a
 * single row, and a sampled token with it). Prints generated tokens per second both ways, their
 * ratio, and how many clones the episodes started. Last, what batching can give at most on this
 * machine: one decode step's time by its rows (4 to 64 slots stepping together against one alone),
 * since a row's share of a batched step bounds the ratio at the rows the episodes keep live.
 */
import { parseFlags } from '../src/cli/args';
import { loadTextModel, modelSummary } from '../src/cli/hfModel';
import { drawProblem } from '../src/core/eval/splits';
import { hfPolicyModel } from '../src/core/policyModel';
import { Rng } from '../src/core/rng';
import type { EpisodeTrace } from '../src/core/rollout/trace';
import { RolloutScheduler } from '../src/core/rollout/scheduler';
import { TEXT_LENGTHS } from '../src/core/rollout/textLimits';
import { defaultRolloutConfig } from '../src/core/runConfigTargets';
import { TASKS } from '../src/core/tasks';
import type { Problem } from '../src/core/tasks/types';
import type { BackendName } from '../src/runtime/backend';

export async function runRolloutBench(args: string[], backend: BackendName): Promise<void> {
  const f = parseFlags(args, {
    model: { type: 'string', required: true, help: 'a Hugging Face model folder (one that calls spawn_clone: a warm start)' },
    episodes: { type: 'int', default: 16, min: 1, max: 1024, help: 'episodes' },
    group: { type: 'int', default: 1, min: 1, max: 1024, help: 'episodes per problem (a GRPO group: G samples of one prompt)' },
    seed: { type: 'int', default: 0, min: 0, max: 1 << 30, help: 'seed of the problems and the sampling' },
    temperature: { type: 'number', default: 1, min: 0.01, max: 10, help: 'sampling temperature' },
  });
  const loaded = await loadTextModel('model', f.model, 'auto');
  console.log(`${modelSummary(loaded)}; backend ${backend}`);
  const model = hfPolicyModel(loaded.model, loaded.model.tokenizer, new Map());
  const task = TASKS.arithmetic;
  const cfg = defaultRolloutConfig('arithmetic', {
    temperature: f.temperature,
    rootMaxTokens: TEXT_LENGTHS.rootMaxTokens,
    budgets: [TEXT_LENGTHS.cloneBudget],
  });
  const rng = new Rng(f.seed);
  const distinct: Problem[] = Array.from({ length: Math.ceil(f.episodes / f.group) }, (_, i) =>
    drawProblem(task, rng, task.defaultOptions, `bench-${i}`, 'train'),
  );
  const problems = Array.from({ length: f.episodes }, (_, i) => distinct[Math.floor(i / f.group)]);
  const episodeRng = (i: number) => Rng.stream(f.seed, 'bench-rollout', i);

  const time = { single: 0, multi: 0, singleCalls: 0, multiCalls: 0, rows: 0 };
  const run = async (indices: readonly number[]): Promise<EpisodeTrace[]> => {
    const decoder = model.decoder(indices.length * 4);
    const feed = decoder.feed.bind(decoder);
    decoder.feed = async (slots, tokens) => {
      const t = performance.now();
      const out = await feed(slots, tokens);
      const multi = tokens.some((r) => r.length > 1);
      time[multi ? 'multi' : 'single'] += performance.now() - t;
      time[multi ? 'multiCalls' : 'singleCalls']++;
      if (!multi) time.rows += slots.length;
      return out;
    };
    const scheduler = new RolloutScheduler(decoder, cfg, { policyVersion: 0, encode: () => [] });
    for (const i of indices) scheduler.addEpisode(task, problems[i], episodeRng(i));
    const traces = await scheduler.run();
    decoder.dispose();
    return traces;
  };
  const generated = (ts: readonly EpisodeTrace[]) => ts.reduce((n, t) => n + t.tokens.total, 0);
  // Warm-up: kernels compiled and caches sized before either timing.
  await run([0, 1]);

  const all = problems.map((_, i) => i);
  split();
  let t0 = performance.now();
  const batched = await run(all);
  const batchedSec = (performance.now() - t0) / 1000;
  function split(): string {
    const r = `prefill/injection feeds ${time.multiCalls} (${(time.multi / 1000).toFixed(2)} s), one-token feeds ${time.singleCalls} of ${(time.rows / Math.max(1, time.singleCalls)).toFixed(1)} rows on average (${(time.single / 1000).toFixed(2)} s)`;
    Object.assign(time, { single: 0, multi: 0, singleCalls: 0, multiCalls: 0, rows: 0 });
    return r;
  }
  const batchedSplit = split();
  t0 = performance.now();
  const single: EpisodeTrace[] = [];
  for (const i of all) single.push(...(await run([i])));
  const singleSec = (performance.now() - t0) / 1000;
  const singleSplit = split();

  const same = batched.filter((t, i) => JSON.stringify(t.contexts.map((c) => c.tokens)) === JSON.stringify(single[i].contexts.map((c) => c.tokens))).length;
  const clones = batched.reduce((n, t) => n + t.contexts.length - 1, 0);
  const rate = (ts: EpisodeTrace[], sec: number) => generated(ts) / sec;
  console.log(
    `episodes ${f.episodes}, clones ${clones}, generated tokens ${generated(batched)} batched / ${generated(single)} one at a time; ${same} episodes token-identical`,
  );
  console.log(`batched       ${batchedSec.toFixed(2)} s  ${rate(batched, batchedSec).toFixed(1)} tokens/s; ${batchedSplit}`);
  console.log(`one at a time ${singleSec.toFixed(2)} s  ${rate(single, singleSec).toFixed(1)} tokens/s; ${singleSplit}`);
  console.log(`ratio (batched / one at a time, tokens per second): ${(rate(batched, batchedSec) / rate(single, singleSec)).toFixed(2)}×`);

  // What batching can give at most: one decode step's time by its rows (each slot holds a root's prompt and
  // 32 of its tokens), so a row's share of a batched step against a step of one row alone.
  const prompt = model.protocol(cfg).root(problems[0], cfg, { allowSpawn: true, limitInPrompt: false }).prompt;
  const stepMs = async (rows: number): Promise<number> => {
    const decoder = model.decoder(rows);
    const slots = Array.from({ length: rows }, () => decoder.open());
    await decoder.feed(
      slots,
      slots.map(() => [...prompt]),
    );
    const next = () => slots.map(() => [prompt[prompt.length - 1]]);
    for (let i = 0; i < 4; i++) await decoder.feed(slots, next());
    const steps = 32;
    const t = performance.now();
    for (let i = 0; i < steps; i++) await decoder.feed(slots, next());
    const ms = (performance.now() - t) / steps;
    decoder.dispose();
    return ms;
  };
  const one = await stepMs(1);
  const line: string[] = [`1 row ${one.toFixed(2)} ms`];
  for (const rows of [4, 8, 16, 32, 64]) {
    const ms = await stepMs(rows);
    line.push(`${rows} rows ${ms.toFixed(2)} ms (${(ms / rows).toFixed(2)} a row, ${((one * rows) / ms).toFixed(2)}× one row's rate)`);
  }
  console.log(`one decode step by rows (prompt ${prompt.length} tokens + 36): ${line.join('; ')}`);
}
