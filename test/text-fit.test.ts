/**
 * What a text run will not fit (src/core/protocol/textFit.ts), said before it runs: measured on a
 * folder made by `init --family qwen2` (short prompts) in its own window, a small one, and under a
 * chat template that drops the tool list.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { INIT_DEFAULT_SIZES, initHfFolder } from '../src/core/model/hfInit';
import { textFit } from '../src/core/protocol/textFit';
import { heldOutProblems } from '../src/core/eval/evaluate';
import { withOptions } from '../src/core/tasks';
import type { HfTokenizer } from '../src/core/tokenizer/hfTokenizer';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';
import { writeHfFolder } from '../src/runtime/node/folderWriter';

let dir = '';
let tokenizer: HfTokenizer;
const LIMITS = { rootMaxTokens: 256, cloneBudget: 128, maxClonesPerRound: 4, maxRounds: 3 };
const arithmetic = () => {
  const { task, opts } = withOptions('arithmetic');
  return heldOutProblems(task, opts, 16, 1, 'monitor');
};

beforeAll(async () => {
  await initBackend('wasm');
  dir = await mkdtemp(join(tmpdir(), 'text-fit-'));
  await writeHfFolder(
    dir,
    initHfFolder('qwen2', { ...INIT_DEFAULT_SIZES, layers: 1, hiddenSize: 16, heads: 2, kvHeads: 1, intermediateSize: 16, maxPositions: 2048 }, 3),
  );
  tokenizer = (await loadHfTextModel(nodeFolderReader(dir), 'float32')).model.tokenizer;
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('textFit', () => {
  it('finds nothing to say where the episode fits the window, and names the root and the clone where it does not', () => {
    const fit = textFit(tokenizer, 2048, 'arithmetic', arithmetic(), LIMITS);
    expect(fit.warnings).toEqual([]);
    expect(fit.toolsShown).toBe(true);
    // The short prompt set: system prompt and tool line about 60 tokens, the problem a few more.
    expect(fit.rootPrompt).toBeGreaterThan(50);
    expect(fit.rootPrompt).toBeLessThan(120);
    expect(fit.toolResponses).toBeGreaterThan(3 * 8);
    const small = textFit(tokenizer, 150, 'arithmetic', arithmetic(), LIMITS);
    expect(small.warnings).toHaveLength(2);
    expect(small.warnings[0]).toMatch(
      new RegExp(
        `^a root's prompt of up to ${fit.rootPrompt} tokens, its limit of 256 and up to ${fit.toolResponses} tokens of tool responses make ${fit.rootPrompt + 256 + fit.toolResponses}: past the model's 150-token window`,
      ),
    );
    expect(small.warnings[1]).toMatch(
      new RegExp(`^a clone's prompt of up to ${fit.clonePrompt} tokens and its budget of 128 make ${fit.clonePrompt + 128}: past`),
    );
    // Multihop's clones read a chunk: their prompts are longer.
    const { task, opts } = withOptions('multihop');
    const mh = textFit(tokenizer, 2048, 'multihop', heldOutProblems(task, opts, 8, 1, 'monitor'), LIMITS);
    expect(mh.clonePrompt).toBeGreaterThan(fit.clonePrompt);
  });

  it('says when the chat template drops the tool list', async () => {
    const config = JSON.parse(await readFile(join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
    config.chat_template =
      "{% for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(config));
    const plain = (await loadHfTextModel(nodeFolderReader(dir), 'float32')).model.tokenizer;
    const fit = textFit(plain, 2048, 'arithmetic', arithmetic(), LIMITS);
    expect(fit.toolsShown).toBe(false);
    expect(fit.warnings).toEqual(["the chat template drops the tool list: the root's prompt reads the same with spawn_clone offered and without"]);
  });
});
