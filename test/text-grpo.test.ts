/**
 * The reference's text protocol and GRPO with LoRA on a whole Hugging Face folder (a tiny random
 * Qwen2 with a BPE tokenizer and chat template, test/python/hf_tokenizer_fixture.py):
 *
 * - a scripted chooser (the real loop, model and tokenizer; only the choice of each token is
 *   scripted) drives episodes through every violation class and through JSON that needs repair
 *   or cannot be read, without a throw;
 * - the policy loss of a packed batch of those episodes' sequences, through the adapters, equals
 *   the same loss computed by PEFT and torch autograd (test/python/text_grpo_check.py): the
 *   loss, its diagnostics and every adapter gradient;
 * - a sampled GRPO step trains the adapters only, on the model's own tokens only.
 *
 * Skipped, naming what is missing, without torch, tokenizers, transformers and peft.
 */
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readHfConfig, readHfWeights } from '../src/core/io/hfFolder';
import { encodeSafetensors } from '../src/core/io/safetensors';
import {
  type ChooseToken,
  DecoderCache,
  decoderConfigFromHf,
  decoderForward,
  decoderParams,
  decoderTargetScores,
  samplingChooser,
} from '../src/core/model/decoder';
import { Lora, peftAdapterConfig } from '../src/core/model/lora';
import { ADAM_MOMENTS, AdamW } from '../src/core/optim/adamw';
import { VIOLATIONS } from '../src/core/protocol/violations';
import { cloneUserMessage } from '../src/core/protocol/toolCalls';
import { computeAdvantages } from '../src/core/rl/advantage';
import { DIAGNOSTICS, aggregationWeights, packRl, surrogateLoss } from '../src/core/rl/ppoLoss';
import { textGrpoStep, textSequence } from '../src/core/rl/textGrpo';
import { type TextModel, loraPolicy } from '../src/core/policyModel';
import { Rng } from '../src/core/rng';
import { type TextEpisode, runTextEpisode, runTextEpisodeGroup } from '../src/core/rollout/textEpisode';
import { type TextLimits } from '../src/core/rollout/textLimits';
import { defaultGrpoConfig } from '../src/core/runConfigTargets';
import { TASKS } from '../src/core/tasks';
import { HfTokenizer } from '../src/core/tokenizer/hfTokenizer';
import { monoChat, rootChat } from '../src/core/verl/dataset';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { pythonWith } from './python/python';

const FIXTURE = fileURLToPath(new URL('./python/hf_tokenizer_fixture.py', import.meta.url));
const CHECK = fileURLToPath(new URL('./python/text_grpo_check.py', import.meta.url));
const py = pythonWith('torch', 'tokenizers', 'transformers', 'peft');
let dir = '';
let model: TextModel;

beforeAll(async () => {
  await initBackend('wasm');
  if (py.python === null) return;
  dir = await mkdtemp(join(tmpdir(), 'text-grpo-'));
  const r = spawnSync(py.python, [FIXTURE, join(dir, 'model'), 'model'], { encoding: 'utf8', timeout: 240_000 });
  if (r.status !== 0) throw new Error(`hf_tokenizer_fixture.py failed: ${r.stderr || r.error?.message}`);
  const read = nodeFolderReader(join(dir, 'model'));
  const config = decoderConfigFromHf(await readHfConfig(read));
  model = { config, params: decoderParams(config, await readHfWeights(read)), tokenizer: await HfTokenizer.fromFolder(read) };
}, 300_000);

afterAll(async () => {
  model?.params.forEach((t) => t.dispose());
  if (dir) await rm(dir, { recursive: true, force: true });
});

const END = '<|im_end|>';
const call = (args: string) => `<tool_call>{"name": "spawn_clone", "arguments": ${args}}</tool_call>`;

/**
 * Picks the tokens of `scripts` in order, whatever the logits: the contexts of an episode ask for
 * tokens one after another (root turn, its clones, root turn, …), each script one context's turn.
 * A script given as a number is that many tokens of filler text with no stop (a context cut at its limit).
 */
function scripted(scripts: (string | number)[]): ChooseToken {
  const filler = model.tokenizer.encode(' and then some more words'.repeat(40), false);
  const queue = scripts.map((s) => (typeof s === 'number' ? filler.slice(0, s) : model.tokenizer.encode(s, false)));
  let i = 0;
  let j = 0;
  return () => {
    while (i < queue.length && j >= queue[i].length) [i, j] = [i + 1, 0];
    if (i >= queue.length) throw new Error('the script ran out: the loop asked for more turns than scripted');
    return queue[i][j++];
  };
}

const problem = { task: 'arithmetic', id: 'p', prompt: '3*4+5+6', truth: '23', meta: { operands: 4, terms: 4 } };
const limits: TextLimits = { rootMaxTokens: 160, cloneBudget: 80, maxClones: 2, maxRounds: 2 };

async function episode(scripts: (string | number)[], over: Partial<TextLimits> = {}): Promise<TextEpisode> {
  // The script reads the contexts one after another: clones one by one.
  return runTextEpisode(model, rootChat('arithmetic', problem), { ...limits, ...over }, { choose: scripted(scripts), batchClones: false });
}

const kinds = (e: TextEpisode) => [...new Set(e.violations.map((v) => v.violation))].sort();

describe.skipIf(py.python === null)(`the text protocol and GRPO with LoRA${py.python === null ? ` (skipped: ${py.why})` : ''}`, () => {
  const episodes: TextEpisode[] = [];

  it('a scripted model meets every violation class and unreadable JSON without a throw', async () => {
    // Repairable JSON (a brace missing), three objectives for two clones; one clone runs out its
    // budget, one calls the tool itself; then the root answers.
    const a = await episode([call('{"objectives": ["3*4", "5+6", "7-2"]') + END, 80, call('{"objectives": ["x"]}') + END, 'Answer: 23' + END]);
    expect(a.repairedToolCalls).toBe(1);
    expect(a.rejectedObjectives).toBe(1);
    expect(a.contexts.map((c) => c.violation)).toEqual(['too_many_clones', 'clone_over_budget', 'clone_spawn']);
    expect(kinds(a)).toEqual(['clone_over_budget', 'clone_spawn', 'too_many_clones']);
    expect(a.answer).toBe('23');
    // Unreadable JSON, an objective that is no objective, an unknown tool; a clone that says nothing,
    // one that writes a tool response; the root writes one too and never answers.
    const b = await episode([
      '<tool_call>not json {{{ at all</tool_call>' +
        call('{"objectives": ["find 3*4", 7]}') +
        '<tool_call>{"name": "search", "arguments": {}}</tool_call>' +
        END,
      END,
      '</tool_response>' + END,
      'no answer here </tool_response>' + END,
    ]);
    expect(b.droppedToolCalls).toBe(1);
    expect(b.contexts.map((c) => c.violation)).toEqual(['malformed_spawn', 'clone_no_answer']);
    expect(kinds(b)).toEqual(['clone_no_answer', 'malformed_spawn', 'reserved_token', 'root_no_answer'].sort());
    // Clones that answer, then a spawn after the last round.
    const c = await episode([call('{"objectives": ["3*4"]}') + END, 'Answer: 12' + END, call('{"objectives": ["5+6"]}') + END], { maxRounds: 1 });
    expect(c.contexts[1].answer).toBe('12');
    expect(kinds(c)).toEqual(['root_no_answer', 'too_many_rounds']);
    // A root that runs to its limit; a clone writing a tool response.
    const d = await episode([call('{"objectives": ["3*4"]}') + END, 'Answer: 12 </tool_response>' + END, 200], { rootMaxTokens: 110 });
    expect(d.contexts[1].violation).toBe('reserved_token');
    expect(kinds(d)).toEqual(['reserved_token', 'root_over_max']);
    // A long-context task: the clone's message is its objective with the chunks of its keys expanded.
    const mh = TASKS.multihop.generate(new Rng(2), TASKS.multihop.defaultOptions, 'mh');
    const chunks = mh.context ?? {};
    const [key] = Object.keys(chunks);
    const m = await runTextEpisode(model, rootChat('multihop', mh), limits, {
      context: chunks,
      choose: scripted([call(`{"objectives": ["read it"], "shared_context": ["${key}", "nope"]}`) + END, 'Answer: 1' + END, 'Answer: 1' + END]),
      batchClones: false,
    });
    expect(m.contexts[1].objective).toBe('read it');
    expect(m.contexts[1].messages[1].content).toBe(cloneUserMessage({ instruction: 'read it', sharedContextKeys: [key, 'nope'] }, chunks));
    expect(m.contexts[1].messages[1].content).toContain(`[${key}]\n${chunks[key]}`);
    expect(m.contexts[1].messages[1].content).toContain('Missing context keys: nope');
    // The monolithic baseline: one message with the whole problem, no tool; a call it writes anyway starts nothing.
    const mono = await runTextEpisode(model, monoChat('arithmetic', problem), limits, {
      offerTool: false,
      choose: scripted([call('{"objectives": ["3*4"]}') + 'Answer: 23' + END]),
    });
    expect(mono.contexts).toHaveLength(1);
    expect(mono.contexts[0].tokens.slice(0, model.tokenizer.chatIds(monoChat('arithmetic', problem), true).length)).toEqual(
      model.tokenizer.chatIds(monoChat('arithmetic', problem), true),
    );
    expect(monoChat('arithmetic', problem)[0].content).toBe('Calculate the value of 3*4+5+6. Give the final answer on the last line as `Answer: <value>`.');
    expect(kinds(mono)).toEqual(['malformed_spawn']);
    expect(mono.answer).toBe('23');
    episodes.push(a, b, c, d);
    const seen = new Set(episodes.flatMap((e) => e.violations.map((v) => v.violation)));
    expect([...seen].sort()).toEqual([...VIOLATIONS].sort());
    // Every token is the prompt's, the model's or the loop's, and the model's count is kept.
    for (const e of episodes) {
      for (const ctx of e.contexts) {
        expect(ctx.writers).toHaveLength(ctx.tokens.length);
        expect(ctx.generatedTokens).toBe([...ctx.writers].filter((w) => w === 'g').length);
      }
    }
  }, 120_000);

  it("a group's first root turns decoded as one batch give the episodes decoded one by one, and each row's cache goes on as a fresh one", async () => {
    const messages = rootChat('arithmetic', problem);
    const stop = new Set(model.tokenizer.stopIds());
    // The decoder: rows in lockstep against single rows, then each row's cache against a fresh forward.
    const prompt = model.tokenizer.chatIds(messages, true);
    const sampler = (seed: number) => {
      return samplingChooser(model.config.vocabSize, 3, new Rng(seed));
    };
    const rows = await new DecoderCache(model.params, model.config).generateRows(prompt, 12, stop, [1, 2, 3].map(sampler));
    for (const [r, seed] of [1, 2, 3].entries()) {
      const single = new DecoderCache(model.params, model.config);
      expect(await single.generate(prompt, 12, stop, sampler(seed))).toEqual({ ids: rows.ids[r], cut: rows.cut[r] });
      single.dispose();
      const c = rows.rowCaches[r];
      const read = [...prompt, ...rows.ids[r].slice(0, -1)];
      expect(c.length).toBe(read.length);
      const more = [rows.ids[r].at(-1) as number, 7, 9];
      const got = c.feed([more]);
      const fresh = new DecoderCache(model.params, model.config);
      const want = fresh.feed([[...read, ...more]]);
      const tail = tf.slice(want, [0, read.length, 0], [1, more.length, model.config.vocabSize]);
      expect(tf.max(tf.abs(tf.sub(got, tail))).dataSync()[0]).toBeLessThan(1e-4);
      [got, want, tail].forEach((t) => t.dispose());
      fresh.dispose();
      c.dispose();
    }
    expect(new Set(rows.ids.map((r) => r.join(','))).size).toBe(3);
    // Left padding: a padded row's logits at its real positions equal its own forward's.
    const short = prompt.slice(0, 5);
    const long = prompt.slice(0, 9);
    const padded = tf.tidy(() =>
      decoderForward(
        model.params,
        model.config,
        tf.tensor2d([[...new Array(4).fill(short[0]), ...short], long], [2, 9], 'int32'),
        null,
        undefined,
        [4, 0],
      ).logits.arraySync(),
    );
    const alone = tf.tidy(() => decoderForward(model.params, model.config, tf.tensor2d([short], [1, 5], 'int32'), null).logits.arraySync());
    const full = tf.tidy(() => decoderForward(model.params, model.config, tf.tensor2d([long], [1, 9], 'int32'), null).logits.arraySync());
    let worst = 0;
    alone[0].forEach((row, t) => row.forEach((x, v) => (worst = Math.max(worst, Math.abs(x - padded[0][4 + t][v])))));
    full[0].forEach((row, t) => row.forEach((x, v) => (worst = Math.max(worst, Math.abs(x - padded[1][t][v])))));
    expect(worst).toBeLessThan(1e-4);
    // A round's clones (prompts of different lengths) as one padded batch: the same tokens as one by one.
    const forced = call('{"objectives": ["3*4", "a much longer objective: 5+6+7+8", "7-2"]}') + END;
    const wide = { ...limits, maxClones: 3, cloneBudget: 10 };
    const together = await runTextEpisode(model, messages, wide, { rootPrefix: forced });
    const apart = await runTextEpisode(model, messages, wide, { rootPrefix: forced, batchClones: false });
    expect(together.contexts).toHaveLength(4);
    expect(together.contexts.map((c) => [c.tokens, c.writers, c.answer, c.violation])).toEqual(
      apart.contexts.map((c) => [c.tokens, c.writers, c.answer, c.violation]),
    );
    expect(new Set(together.contexts.slice(1).map((c) => c.tokens.length - c.generatedTokens)).size).toBeGreaterThan(1);
    // Whole episodes: batched and one by one alike.
    const options = [11, 12, 13].map((seed) => ({ choose: sampler(seed) }));
    const grouped = await runTextEpisodeGroup(model, messages, { ...limits, rootMaxTokens: 20 }, options);
    const single = [];
    for (const seed of [11, 12, 13]) single.push(await runTextEpisode(model, messages, { ...limits, rootMaxTokens: 20 }, { choose: sampler(seed) }));
    expect(grouped.map((e) => e.contexts.map((c) => [c.tokens, c.writers]))).toEqual(single.map((e) => e.contexts.map((c) => [c.tokens, c.writers])));
  }, 120_000);

  it('the policy loss through the adapters equals PEFT and torch autograd: loss, diagnostics and every adapter gradient', async () => {
    expect(episodes.length).toBe(4);
    const lora = Lora.init(model.config, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'] }, 3);
    // B starts at zero (PEFT's init); give it values so that A's gradients are not zero either.
    const rng = new Rng(5);
    for (const [name, v] of lora.params) if (name.endsWith('lora_B')) v.assign(tf.randomUniform(v.shape, -0.3, 0.3, 'float32', rng.int(0, 1 << 30)));
    const cfg = { ...defaultGrpoConfig('arithmetic').loss, clipLow: 0.2, clipHigh: 0.28, dualClip: 3, beta: 0.01 };
    // Rewards that differ, so the advantages do; credit as the run computes it.
    const rewards = [1, -0.5, 0.25, 0];
    const { credits } = computeAdvantages(
      episodes.map((e) => ({ contexts: e.contexts })),
      rewards,
      [[0, 1, 2, 3]],
      { ...defaultGrpoConfig('arithmetic').advantage, gating: false },
    );
    const seqs = episodes.flatMap((e, i) => e.contexts.map((ctx, j) => textSequence(ctx, credits[i][j])));
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
      s.oldLogprobs = s.actions.map((a, i) => (a ? lp[i] + (noise.next() - 0.5) * 0.6 : 0));
      s.refLogprobs = s.actions.map((a, i) => (a ? lp[i] + (noise.next() - 0.5) * 0.4 : 0));
    }
    const weights = aggregationWeights(seqs, 'token-mean');
    const [b] = packRl(seqs.slice(0, 4), weights.slice(0, 4), 1 << 20);
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
      const [m, part] = [key.slice(0, key.lastIndexOf('.')), key.slice(key.lastIndexOf('.') + 1)];
      const want = theirs.grads[`base_model.model.${m}.${part}.weight`].flat();
      const got = grads[v.name].dataSync();
      const scale = Math.max(...want.map(Math.abs));
      expect(scale, key).toBeGreaterThan(0);
      const worst = want.reduce((w, x, i) => Math.max(w, Math.abs(x - got[i])), 0);
      expect(worst / scale, key).toBeLessThan(1e-4);
    }
    value.dispose();
    Object.values(grads).forEach((g) => g.dispose());
    lora.dispose();
  }, 300_000);

  it('a sampled GRPO step trains the adapters only, on the model’s own tokens', async () => {
    const lora = Lora.init(model.config, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj'] }, 1);
    const base = new Map([...model.params].map(([k, t]) => [k, t.dataSync().slice()]));
    const before = new Map([...lora.params].map(([k, t]) => [k, t.dataSync().slice()]));
    const grpo = { ...defaultGrpoConfig('arithmetic'), batch: 2, group: 4, lr: 1e-2, miniBatch: null, innerEpochs: 1, seed: 4 };
    // A token cost makes rewards differ with the episodes' lengths, and a temperature that makes
    // the random model's choice nearly uniform lets it stop at different lengths: advantages that are not zero.
    grpo.reward = { ...grpo.reward, tokenRate: 0.01 };
    grpo.tokenRateAfter = 0;
    grpo.loss = { ...grpo.loss, temperature: 50 };
    const optimizer = new AdamW(lora.params, { ...ADAM_MOMENTS, lr: grpo.lr, weightDecay: 0, gradClip: 1 });
    const {
      metrics,
      episodes: eps,
      anatomy,
    } = await textGrpoStep(
      loraPolicy(model, lora),
      optimizer,
      TASKS.arithmetic,
      TASKS.arithmetic.defaultOptions,
      { grpo, limits: { rootMaxTokens: 96, cloneBudget: 8, maxClones: 2, maxRounds: 1 } },
      0,
    );
    expect(eps).toHaveLength(8);
    expect(metrics.step).toBe(1);
    expect(metrics.updates, JSON.stringify(metrics)).toBe(1);
    expect(Number.isFinite(metrics.loss) && Number.isFinite(metrics.gradNorm) && metrics.gradNorm > 0).toBe(true);
    // Trained: the model's tokens of the contexts with weight (a group whose rewards are all equal has none).
    expect(metrics.trainedTokens).toBe(
      eps.reduce((n, e) => n + e.episode.contexts.reduce((k, c, j) => k + (e.credits[j].weight > 0 ? c.generatedTokens : 0), 0), 0),
    );
    expect(metrics.trainedTokens).toBeGreaterThan(0);
    // Sampled, not greedy: the group's episodes differ.
    expect(new Set(eps.slice(0, 4).map((e) => e.episode.contexts[0].tokens.join(','))).size).toBeGreaterThan(1);
    for (const [k, t] of model.params) expect(t.dataSync(), k).toEqual(base.get(k));
    const moved = [...lora.params].filter(([k, t]) => t.dataSync().some((x, i) => x !== before.get(k)![i]));
    expect(moved.length).toBeGreaterThan(0);
    // Slow motion of the first group: every token the model wrote with its log-prob before and after the update.
    expect(anatomy.episodes).toHaveLength(grpo.group);
    expect(anatomy.prompt).toBe(eps[0].problem.prompt);
    for (const [g, e] of anatomy.episodes.entries()) {
      expect(e.reward).toEqual(eps[g].reward);
      for (const [j, c] of e.contexts.entries()) {
        expect(c.credit).toEqual(eps[g].credits[j]);
        const own = c.tokens.filter((t) => t.writer === 'g');
        expect(own).toHaveLength(eps[g].episode.contexts[j].generatedTokens);
        for (const t of c.tokens) expect(t.before === null).toBe(t.writer !== 'g');
        for (const t of own) expect(t.before as number).toBeLessThanOrEqual(0);
      }
    }
    const trained = anatomy.episodes.flatMap((e) => e.contexts.filter((c) => c.credit.weight > 0 && c.credit.advantage !== 0).flatMap((c) => c.tokens));
    if (trained.length > 0) expect(trained.some((t) => t.writer === 'g' && t.after !== t.before)).toBe(true);
    // The training sequences: only positions predicting a model-written token carry an action.
    for (const e of eps) {
      for (const [j, ctx] of e.episode.contexts.entries()) {
        const s = textSequence(ctx, e.credits[j]);
        // Up to the model's last token.
        const last = ctx.writers.lastIndexOf('g');
        expect(s.tokens).toEqual(ctx.tokens.slice(0, Math.max(last + 1, 1)));
        expect(s.actions.join('')).toBe([...ctx.writers.slice(1, last + 1)].map((w) => (w === 'g' ? 1 : 0)).join(''));
      }
    }
    lora.dispose();
    optimizer.dispose();
  }, 300_000);
});
