/**
 * The reference's text protocol and GRPO with LoRA through the one runner and trainer, on a folder
 * made by `init --family qwen2 --prompts reference`:
 *
 * - a scripted decoder (the real scheduler, protocol, chat template and tokenizer; only the token
 *   each context writes is scripted) drives episodes through every violation class and through
 *   JSON that needs repair or cannot be read, without a throw;
 * - the policy loss of a packed batch of those episodes' sequences (episodeSequences, packRl,
 *   surrogateLoss over the decoder's scores with adapters) equals the same loss computed by PEFT and
 *   torch autograd (test/python/text_grpo_check.py): the loss, its diagnostics and every adapter
 *   gradient; skipped, naming what is missing, without torch, transformers and peft;
 * - a sampled GRPO step (GrpoRun over hfPolicyModel) trains the adapters only, on the model's own
 *   tokens only.
 */
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { encodeSafetensors } from '../src/core/io/safetensors';
import { decoderTargetScores } from '../src/core/model/decoder';
import { INIT_DEFAULT_SIZES, initHfFolder } from '../src/core/model/hfInit';
import { Lora, peftAdapterConfig } from '../src/core/model/lora';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import { type TextModel, hfPolicyModel } from '../src/core/policyModel';
import { textProtocol } from '../src/core/protocol/textProtocol';
import { cloneUserMessage } from '../src/core/protocol/toolCalls';
import { VIOLATIONS } from '../src/core/protocol/violations';
import { computeAdvantages } from '../src/core/rl/advantage';
import { GrpoRun } from '../src/core/rl/grpoRun';
import { episodeSequences } from '../src/core/rl/grpoStep';
import { DIAGNOSTICS, aggregationWeights, packRl, surrogateLoss } from '../src/core/rl/ppoLoss';
import { Rng } from '../src/core/rng';
import type { RolloutConfig } from '../src/core/rollout/config';
import { type ContextDecoder, RolloutScheduler } from '../src/core/rollout/scheduler';
import type { EpisodeTrace } from '../src/core/rollout/trace';
import { defaultGrpoConfig, defaultRolloutConfig } from '../src/core/runConfigTargets';
import { TASKS, getTask, withOptions } from '../src/core/tasks';
import type { Problem } from '../src/core/tasks/types';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { writeHfFolder } from '../src/runtime/node/folderWriter';
import { pythonWith } from './python/python';

const CHECK = fileURLToPath(new URL('./python/text_grpo_check.py', import.meta.url));
const py = pythonWith('torch', 'transformers', 'peft');
let dir = '';
let model: TextModel;

beforeAll(async () => {
  await initBackend('wasm');
  dir = await mkdtemp(join(tmpdir(), 'text-grpo-'));
  await writeHfFolder(
    join(dir, 'model'),
    initHfFolder('qwen2', { ...INIT_DEFAULT_SIZES, layers: 2, hiddenSize: 32, heads: 4, kvHeads: 2, intermediateSize: 48, maxPositions: 2048 }, 8, 'reference'),
  );
  model = (await loadHfTextModel(nodeFolderReader(join(dir, 'model')), 'float32')).model;
});

afterAll(async () => {
  model?.params.forEach((t) => t.dispose());
  if (dir) await rm(dir, { recursive: true, force: true });
});

const END = '<|im_end|>';
const call = (args: string) => `<tool_call>{"name": "spawn_clone", "arguments": ${args}}</tool_call>`;

/**
 * Each context writes its own script, a token per feed: the root the first (all its turns, in
 * order), each clone the next one in the order the scheduler opens them. A script given as a number
 * is that many tokens of filler text with no stop (a context cut at its limit).
 */
class TurnScript implements ContextDecoder {
  readonly maxPositions = 2048;
  private readonly queues: number[][];
  private readonly bySlot = new Map<number, number[]>();
  private slots = 0;
  constructor(
    readonly vocabSize: number,
    scripts: (string | number)[],
  ) {
    const filler = model.tokenizer.encode(' and then some more words'.repeat(40), false);
    this.queues = scripts.map((s) => (typeof s === 'number' ? filler.slice(0, s) : model.tokenizer.encode(s, false)));
  }

  open(): number {
    const slot = this.slots++;
    this.bySlot.set(slot, this.queues[slot] ?? []);
    return slot;
  }

  close(slot: number): void {
    this.bySlot.delete(slot);
  }

  async feed(slots: number[], _tokens: number[][]): Promise<Float32Array> {
    const out = new Float32Array(slots.length * this.vocabSize);
    slots.forEach((slot, i) => {
      const next = this.bySlot.get(slot)?.shift();
      if (next === undefined) throw new Error(`slot ${slot}: the script ran out`);
      out[i * this.vocabSize + next] = 60;
    });
    return out;
  }
}

const problem: Problem = { task: 'arithmetic', id: 'p', prompt: '3*4+5+6', truth: '23', meta: { operands: 4, terms: 4 } };
const rollout = (over: Partial<RolloutConfig> = {}): RolloutConfig => ({
  ...defaultRolloutConfig('arithmetic'),
  rootMaxTokens: 160,
  budgets: [80],
  maxClonesPerRound: 2,
  maxRounds: 2,
  greedy: true,
  ...over,
});

/** One episode of `p` whose contexts write `scripts` (root turns joined in the first). */
async function episode(scripts: (string | number)[], over: Partial<RolloutConfig> = {}, p: Problem = problem, allowSpawn = true): Promise<EpisodeTrace> {
  const scheduler = new RolloutScheduler(new TurnScript(model.config.vocabSize, scripts), rollout({ ...over, allowSpawn }), {
    policyVersion: 0,
    encode: () => [],
    protocol: textProtocol(model.tokenizer),
  });
  scheduler.addEpisode(getTask(p.task), p, new Rng(0));
  await scheduler.run();
  return scheduler.results()[0];
}

const kinds = (e: EpisodeTrace) => [...new Set(e.violations.map((v) => v.violation))].sort();

describe('the text protocol through the one runner, and GRPO with LoRA through the one trainer', () => {
  const episodes: EpisodeTrace[] = [];

  it('a scripted model meets every violation class and unreadable JSON without a throw', async () => {
    // Repairable JSON (a brace missing), three objectives for two clones; one clone runs out its
    // budget, one calls the tool itself; then the root answers.
    const a = await episode([call('{"objectives": ["3*4", "5+6", "7-2"]') + END + 'Answer: 23' + END, 80, call('{"objectives": ["x"]}') + END]);
    expect(a.contexts.map((c) => c.violation)).toEqual(['too_many_clones', 'clone_over_budget', 'clone_spawn']);
    expect(kinds(a)).toEqual(['clone_over_budget', 'clone_spawn', 'too_many_clones']);
    expect(a.contexts.map((c) => c.subtask)).toEqual([null, '3*4', '5+6']);
    expect(a.answer).toBe('23');
    // Unreadable JSON, an objective that is no objective, an unknown tool; a clone that says nothing,
    // one that writes a tool response; the root writes one too and never answers.
    const b = await episode([
      '<tool_call>not json {{{ at all</tool_call>' +
        call('{"objectives": ["find 3*4", 7]}') +
        '<tool_call>{"name": "search", "arguments": {}}</tool_call>' +
        END +
        'no answer here </tool_response>' +
        END,
      END,
    ]);
    // The root's own field names its missing answer; the episode lists every violation.
    expect(b.contexts.map((c) => c.violation)).toEqual(['root_no_answer', 'clone_no_answer']);
    expect(kinds(b)).toEqual(['clone_no_answer', 'malformed_spawn', 'reserved_token', 'root_no_answer'].sort());
    // Clones that answer, then a spawn after the last round.
    const c = await episode([call('{"objectives": ["3*4"]}') + END + call('{"objectives": ["5+6"]}') + END, 'Answer: 12' + END], { maxRounds: 1 });
    expect(c.contexts[1].answer).toBe('12');
    expect(kinds(c)).toEqual(['root_no_answer', 'too_many_rounds']);
    // A root that runs to its limit; a clone writing a tool response.
    const d = await episode([call('{"objectives": ["3*4"]}') + END + '7'.repeat(1) + ' and then'.repeat(60), 'Answer: 12 </tool_response>' + END], {
      rootMaxTokens: 110,
    });
    expect(d.contexts[1].violation).toBe('reserved_token');
    expect(kinds(d)).toEqual(['reserved_token', 'root_over_max']);
    // A long-context task: the clone's message is its objective with the chunks of its keys expanded.
    const mh = TASKS.multihop.generate(new Rng(2), withOptions('multihop').opts as never, 'mh');
    const chunks = mh.context ?? {};
    const [key] = Object.keys(chunks);
    const m = await episode([call(`{"objectives": ["read it"], "shared_context": ["${key}", "nope"]}`) + END + 'Answer: 1' + END, 'Answer: 1' + END], {}, mh);
    expect(m.contexts[1].subtask).toBe('read it');
    const cloneText = m.contexts[1].text;
    expect(cloneText).toContain(cloneUserMessage({ instruction: 'read it', sharedContextKeys: [key, 'nope'] }, chunks));
    expect(cloneText).toContain(`[${key}]\n${chunks[key]}`);
    expect(cloneText).toContain('Missing context keys: nope');
    // The monolithic baseline: no tool offered; a call it writes anyway starts nothing.
    const mono = await episode([call('{"objectives": ["3*4"]}') + 'Answer: 23' + END], {}, problem, false);
    expect(mono.contexts).toHaveLength(1);
    expect(mono.contexts[0].text).not.toContain('<tools>');
    expect(mono.answer).toBe('23');
    episodes.push(a, b, c, d);
    const seen = new Set([...episodes, mono].flatMap((e) => e.violations.map((v) => v.violation)));
    expect([...seen].sort()).toEqual([...VIOLATIONS].sort());
    // Every token is the prompt's, the model's or the runtime's, and the model's count is kept.
    for (const e of episodes) {
      for (const ctx of e.contexts) {
        expect(ctx.writers).toHaveLength(ctx.tokens.length);
        expect(ctx.generatedTokens).toBe([...ctx.writers].filter((w) => w === 'g').length);
        expect(ctx.pieces).toHaveLength(ctx.tokens.length);
      }
    }
  }, 120_000);

  it.skipIf(py.python === null)(
    `the policy loss through the adapters equals PEFT and torch autograd: loss, diagnostics and every adapter gradient${py.python === null ? ` (skipped: ${py.why})` : ''}`,
    async () => {
      expect(episodes.length).toBe(4);
      const lora = Lora.init(model.config, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'] }, 3);
      // B starts at zero (PEFT's init); give it values so that A's gradients are not zero either.
      const rng = new Rng(5);
      for (const [name, v] of lora.params) if (name.endsWith('lora_B')) v.assign(tf.randomUniform(v.shape, -0.3, 0.3, 'float32', rng.int(0, 1 << 30)));
      const cfg = { ...defaultGrpoConfig('arithmetic').loss, clipLow: 0.2, clipHigh: 0.28, dualClip: 3, beta: 0.01 };
      // Rewards that differ, so the advantages do; credit as the run computes it.
      const { credits } = computeAdvantages(
        episodes.map((e) => ({ contexts: e.contexts })),
        [1, -0.5, 0.25, 0],
        [[0, 1, 2, 3]],
        { ...defaultGrpoConfig('arithmetic').advantage, gating: false },
      );
      const seqs = episodes.flatMap((e, i) => episodeSequences(e, credits[i]));
      // Behaviour and reference log-probs that differ from the current ones, so the clip and the KL act.
      const noise = new Rng(9);
      for (const s of seqs) {
        const n = s.tokens.length - 1;
        const lp = tf.tidy(
          () =>
            decoderTargetScores(
              model.params,
              model.config,
              tf.tensor2d([s.tokens.slice(0, -1)], [1, n], 'int32'),
              tf.tensor2d([s.tokens.slice(1)], [1, n], 'int32'),
              1,
              lora,
            ).logp.arraySync()[0],
        );
        s.oldLogprobs = s.actions.map((a, i) => (a ? lp[i] + (noise.next() - 0.5) * 1.2 : 0));
        s.refLogprobs = s.actions.map((a, i) => (a ? lp[i] + (noise.next() - 0.5) * 0.4 : 0));
      }
      const weights = aggregationWeights(seqs, 'token-mean');
      const [b] = packRl(seqs, weights, 1 << 20);
      expect(b.rows).toBeGreaterThan(1);
      const vars = [...lora.params.values()];
      let diag: number[] = [];
      const { value, grads } = tf.variableGrads(() => {
        const r = surrogateLoss((i, t) => decoderTargetScores(model.params, model.config, i, t, cfg.temperature, lora), b, cfg);
        diag = r.diagnostics.map((d) => d.dataSync()[0]);
        return r.loss;
      }, vars);
      await mkdir(join(dir, 'adapter'), { recursive: true });
      await writeFile(join(dir, 'adapter', 'adapter_config.json'), JSON.stringify(peftAdapterConfig(lora.config, model.config, join(dir, 'model'))));
      await writeFile(join(dir, 'adapter', 'adapter_model.safetensors'), encodeSafetensors(await lora.peftTensors()));
      const batchFile = join(dir, 'batch.json');
      const plain = (a: ArrayLike<number> | null) => (a === null ? null : Array.from(a));
      await writeFile(
        batchFile,
        JSON.stringify({
          rows: b.rows,
          length: b.length,
          inputs: plain(b.inputs),
          targets: plain(b.targets),
          weights: plain(b.weights),
          advantages: plain(b.advantages),
          oldLogprobs: plain(b.oldLogprobs),
          refLogprobs: plain(b.refLogprobs),
          config: cfg,
        }),
      );
      const r = spawnSync(py.python as string, [CHECK, join(dir, 'model'), join(dir, 'adapter'), batchFile], {
        encoding: 'utf8',
        timeout: 240_000,
        maxBuffer: 64 << 20,
      });
      expect(r.status, r.stderr).toBe(0);
      const theirs = JSON.parse(r.stdout) as { loss: number; sums: Record<string, number>; grads: Record<string, number[][]> };
      expect(Math.abs(value.dataSync()[0] - theirs.loss)).toBeLessThan(1e-4 * Math.max(1, Math.abs(theirs.loss)));
      DIAGNOSTICS.forEach((k, i) => expect(Math.abs(diag[i] - theirs.sums[k]), k).toBeLessThan(1e-3 * Math.max(1, Math.abs(theirs.sums[k]))));
      expect(theirs.sums.clipped).toBeGreaterThan(0);
      expect(theirs.sums.kl).toBeGreaterThan(0);
      expect(Object.keys(theirs.grads)).toHaveLength(lora.params.size);
      for (const [key, v] of lora.params) {
        const want = theirs.grads[lora.peftName(key)].flat();
        const got = grads[v.name].dataSync();
        const scale = Math.max(...want.map(Math.abs));
        expect(scale, key).toBeGreaterThan(0);
        const worst = want.reduce((w, x, i) => Math.max(w, Math.abs(x - got[i])), 0);
        expect(worst / scale, key).toBeLessThan(1e-4);
      }
      value.dispose();
      Object.values(grads).forEach((g) => g.dispose());
      lora.dispose();
    },
    300_000,
  );

  it('a sampled GRPO step trains the adapters only, on the model’s own tokens', async () => {
    const lora = Lora.init(model.config, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj'] }, 1);
    const base = new Map([...model.params].map(([k, t]) => [k, t.dataSync().slice()]));
    const before = new Map([...lora.params].map(([k, t]) => [k, t.dataSync().slice()]));
    const grpo = { ...defaultGrpoConfig('arithmetic', 1), batch: 2, group: 4, lr: 1e-2, miniBatch: null, innerEpochs: 1, seed: 4 };
    // A token cost makes rewards differ with the episodes' lengths, and a temperature that makes
    // the random model's choice nearly uniform lets it stop at different lengths: advantages that are not zero.
    grpo.reward = { ...grpo.reward, tokenRate: 0.01 };
    grpo.tokenRateAfter = 0;
    grpo.rollout = { ...grpo.rollout, rootMaxTokens: 96, budgets: [8], maxClonesPerRound: 2, maxRounds: 1, temperature: 50 };
    grpo.loss = { ...grpo.loss, temperature: 50 };
    const optimizer = new AdamW(lora.params, { ...ADAM_MOMENTS, lr: grpo.lr, weightDecay: 0, gradClip: 1 });
    const policy = hfPolicyModel({ ...model, adapters: lora }, model.tokenizer, lora.params);
    const run = new GrpoRun(grpo, [withOptions('arithmetic')], { every: 0, n: 0, methods: ['delegate'] });
    const { metrics, episodes: eps } = await run.step({ model: policy, reference: null, optimizer, encode: () => [] }, () => optimizer);
    expect(eps).toHaveLength(8);
    expect(metrics.step).toBe(1);
    expect(metrics.updates, JSON.stringify(metrics)).toBe(1);
    expect(Number.isFinite(metrics.loss) && Number.isFinite(metrics.gradNorm) && metrics.gradNorm > 0).toBe(true);
    // Trained: the model's tokens of the contexts with weight (a group whose rewards are all equal has none).
    expect(metrics.trainedTokens).toBe(
      eps.reduce((n, e) => n + e.trace.contexts.reduce((k, c, j) => k + (e.credits[j].weight > 0 ? c.generatedTokens : 0), 0), 0),
    );
    expect(metrics.trainedTokens).toBeGreaterThan(0);
    // Sampled, not greedy: the group's episodes differ.
    expect(new Set(eps.slice(0, 4).map((e) => e.trace.contexts[0].tokens.join(','))).size).toBeGreaterThan(1);
    for (const [k, t] of model.params) expect(t.dataSync(), k).toEqual(base.get(k));
    const moved = [...lora.params].filter(([k, t]) => t.dataSync().some((x, i) => x !== before.get(k)![i]));
    expect(moved.length).toBeGreaterThan(0);
    // The training sequences: only positions predicting a model-written token carry an action.
    for (const e of eps) {
      for (const [j, s] of episodeSequences(e.trace, e.credits).entries()) {
        const ctx = e.trace.contexts[j];
        expect(s.actions.join('')).toBe([...ctx.writers.slice(1)].map((w) => (w === 'g' ? 1 : 0)).join(''));
      }
    }
    lora.dispose();
    optimizer.dispose();
  }, 300_000);
});
