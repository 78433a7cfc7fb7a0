/**
 * A Hugging Face model folder (gpt2, llama, qwen2 or qwen3) through the reference's text protocol, one
 * root turn: the chat template with the spawn_clone tool offered (the arithmetic system prompt of the
 * folder's prompt set), greedy cached decoding, then the
 * tool calls the text holds and the clone requests they make. What loading took is printed first.
 */
import { defineCommand } from '../command';
import { UsageError } from '../args';
import { BACKEND_FLAG, setupBackend } from '../setup';
import { DecoderCache } from '../../core/model/decoder';
import { MODEL_FLAG, WEIGHTS_FLAG, loadTextModel, modelSummary } from '../hfModel';
import { textPrompts } from '../../core/protocol/prompts';
import { SPAWN_CLONE, SPAWN_CLONE_TOOL, cloneRequests, extractToolCalls } from '../../core/protocol/toolCalls';

export const generate = defineCommand(
  'generate',
  'One root turn of a Hugging Face model (gpt2, llama, qwen2, qwen3 folder) under the spawn_clone protocol: chat template with the tool, greedy decoding, the tool calls found.',
  {
    model: MODEL_FLAG,
    prompt: { type: 'string', required: true, help: 'the user\'s message, e.g. "Calculate the value of 3*4+5."' },
    'max-tokens': { type: 'int', default: 64, min: 1, max: 8192, help: 'tokens the root may generate' },
    tools: { type: 'bool', default: true, help: 'offer the spawn_clone tool (--no-tools: a plain chat turn)' },
    json: { type: 'bool', default: false, help: 'print one JSON object instead of text' },
    backend: BACKEND_FLAG,
    weights: WEIGHTS_FLAG,
  },
  async (f) => {
    if (f.prompt.trim() === '') throw new UsageError('--prompt is empty: give the user message');
    await setupBackend(f.backend);
    const loaded = await loadTextModel('model', f.model, f.weights);
    const { config, params, tokenizer } = loaded.model;
    const messages = [
      // The arithmetic root's system prompt in the folder's prompt set (the reference's: as export-verl's rows give it).
      { role: 'system', content: textPrompts(tokenizer.prompts).arithmeticSystem },
      { role: 'user', content: f.prompt },
    ];
    const promptIds = tokenizer.chatIds(messages, true, f.tools ? [SPAWN_CLONE_TOOL] : undefined);
    if (promptIds.length + f['max-tokens'] > config.maxPositions) {
      params.forEach((p) => p.dispose());
      throw new UsageError(`--max-tokens ${f['max-tokens']}: the prompt has ${promptIds.length} tokens and the model holds ${config.maxPositions} positions`);
    }
    const eos = new Set(tokenizer.stopIds());
    const cache = new DecoderCache(params, config);
    const t1 = performance.now();
    const { ids: generated } = await cache.greedy(promptIds, f['max-tokens'], eos);
    const decodeMs = performance.now() - t1;
    cache.dispose();
    params.forEach((p) => p.dispose());
    const text = tokenizer.decode(generated, true);
    const { calls, dropped } = extractToolCalls(tokenizer.decode(generated));
    const clones = calls.filter((c) => c.name === SPAWN_CLONE).map((c) => cloneRequests(c.arguments));
    const result = {
      model: { family: config.family, parameters: loaded.parameters, megabytes: Math.round((loaded.parameters * 4) / 1e5) / 10, loadMs: loaded.loadMs },
      messages,
      promptIds,
      generatedIds: generated,
      tokensPerSec: Math.round((generated.length / Math.max(decodeMs, 1)) * 1000 * 10) / 10,
      text,
      toolCalls: calls,
      droppedToolCalls: dropped,
      cloneRequests: clones,
    };
    if (f.json) {
      console.log(JSON.stringify(result));
      return;
    }
    console.log(modelSummary(loaded));
    console.log(`prompt ${promptIds.length} tokens; generated ${generated.length} at ${result.tokensPerSec} tokens/s`);
    console.log(text);
    console.log(`tool calls: ${calls.length} (${calls.filter((c) => c.repaired).length} repaired, ${dropped.length} dropped)`);
    clones.forEach((c, i) =>
      console.log(
        `  spawn_clone ${i + 1}: ${c.requests.map((r) => JSON.stringify(r.instruction)).join(', ') || 'no objectives'}${c.rejected.length ? `; rejected ${c.rejected.map((r) => r.reason).join(', ')}` : ''}`,
      ),
    );
  },
);
