/**
 * A real model's batched rollout against the same episodes one at a time, in one run
 * (`npm run bench -- rollout --model DIR [--episodes 16] [--seed 0] [--temperature 1]`): the one
 * rollout scheduler drives EPISODES arithmetic episodes of a Hugging Face model (the text protocol,
 * its clones included) through HfContextDecoder, first all together (every runnable root and clone
 * context of every episode in one forward per step), then each episode alone in its own scheduler.
 * Each episode samples from its own Rng, so both ways decode the same episodes (the count of
 * token-identical episodes is printed: a logit can differ in its last bits between a batch and a
 * single row, and a sampled token with it). Prints generated tokens per second both ways, their
 * ratio, and how many clones the episodes started.
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
  const problems: Problem[] = Array.from({ length: f.episodes }, (_, i) => drawProblem(task, rng, task.defaultOptions, `bench-${i}`, 'train'));
  const episodeRng = (i: number) => Rng.stream(f.seed, 'bench-rollout', i);

  const run = async (indices: readonly number[]): Promise<EpisodeTrace[]> => {
    const decoder = model.decoder(indices.length * 4);
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
  let t0 = performance.now();
  const batched = await run(all);
  const batchedSec = (performance.now() - t0) / 1000;
  t0 = performance.now();
  const single: EpisodeTrace[] = [];
  for (const i of all) single.push(...(await run([i])));
  const singleSec = (performance.now() - t0) / 1000;

  const same = batched.filter((t, i) => JSON.stringify(t.contexts.map((c) => c.tokens)) === JSON.stringify(single[i].contexts.map((c) => c.tokens))).length;
  const clones = batched.reduce((n, t) => n + t.contexts.length - 1, 0);
  const rate = (ts: EpisodeTrace[], sec: number) => generated(ts) / sec;
  console.log(
    `episodes ${f.episodes}, clones ${clones}, generated tokens ${generated(batched)} batched / ${generated(single)} one at a time; ${same} episodes token-identical`,
  );
  console.log(`batched       ${batchedSec.toFixed(2)} s  ${rate(batched, batchedSec).toFixed(1)} tokens/s`);
  console.log(`one at a time ${singleSec.toFixed(2)} s  ${rate(single, singleSec).toFixed(1)} tokens/s`);
  console.log(`ratio (batched / one at a time, tokens per second): ${(rate(batched, batchedSec) / rate(single, singleSec)).toFixed(2)}×`);
}
