import { SEED_MAX } from '../../core/rng';
import { defineCommand } from '../command';
import { checkOutDir } from '../runDir';
import { BACKEND_FLAG, freshPolicy, savePolicy, setupBackend } from '../setup';
import { parameterCount } from '../../core/model/config';
import { disposeParams } from '../../core/model/params';
import { UsageError } from '../args';
import {
  FAMILY_LACKS,
  GPT2_DEFAULT_SIZES,
  INIT_DEFAULT_SIZES,
  INIT_FAMILIES,
  type InitFamily,
  type InitSizes,
  initHfFolder,
  initSizesError,
  tensorParameterCount,
} from '../../core/model/hfInit';
import { writeHfFolder } from '../../runtime/node/folderWriter';
import { PROMPT_SETS, type PromptSetName } from '../../core/protocol/prompts';

// The toy's backend flag without its default, so that a --backend given with --family (which reads none) is seen and refused.
const { default: _wasm, ...BACKEND_CHOICE } = BACKEND_FLAG;

/** Each size flag and the InitSizes field it sets. */
const SIZE_FLAGS = {
  layers: 'layers',
  hidden: 'hiddenSize',
  heads: 'heads',
  'kv-heads': 'kvHeads',
  intermediate: 'intermediateSize',
  'max-positions': 'maxPositions',
} as const satisfies Record<string, keyof InitSizes>;

const size = (help: string, max: number) => ({ type: 'int', min: 1, max, help }) as const;
const d = INIT_DEFAULT_SIZES;

export const init = defineCommand(
  'init',
  'Write a randomly initialised model: the toy checkpoint (--preset), or a Hugging Face folder of a family (--family) with a tokenizer and chat template made for the tasks.',
  {
    preset: { type: 'string', choices: ['tiny', 'small'], help: 'the toy model of this size (or --family)' },
    family: { type: 'string', choices: INIT_FAMILIES, help: 'a Hugging Face folder of this architecture (or --preset)' },
    layers: size(`decoder layers (--family; default ${d.layers})`, 64),
    hidden: size(`hidden size (--family; default ${d.hiddenSize})`, 4096),
    heads: size(`attention heads (--family; default ${d.heads})`, 64),
    'kv-heads': size(`key/value heads, dividing the heads (qwen2, llama; default ${d.kvHeads})`, 64),
    intermediate: size(`MLP size (--family; default ${d.intermediateSize}, gpt2 4 × hidden)`, 16384),
    'max-positions': size(`context window in tokens (--family; default ${d.maxPositions})`, 32768),
    prompts: {
      type: 'string',
      choices: PROMPT_SETS,
      help: "with --family: the prompts its episodes are framed in (written to tokenizer_config.json selfcest_prompts): short (about 30 tokens of system prompt, bare expressions) or reference (the verl export's) (default short)",
    },
    seed: { type: 'int', default: 0, min: 0, max: SEED_MAX, help: 'initialisation seed' },
    out: { type: 'string', required: true, help: 'output directory' },
    backend: { ...BACKEND_CHOICE, help: `${BACKEND_FLAG.help} (--preset only; default ${BACKEND_FLAG.default})` },
  },
  async (f) => {
    if ((f.preset === undefined) === (f.family === undefined))
      throw new UsageError('give one of --preset (the toy model) and --family (a Hugging Face folder)');
    const family = f.family as InitFamily | undefined;
    if (family === undefined) {
      const given = Object.keys(SIZE_FLAGS).filter((k) => f[k as keyof typeof SIZE_FLAGS] !== undefined);
      if (given.length > 0) throw new UsageError(`${given.map((k) => `--${k}`).join(', ')} size a --family model; --preset sizes the toy`);
      if (f.prompts !== undefined) throw new UsageError('--prompts applies to --family: the toy speaks its token grammar');
      await checkOutDir(f.out);
      await setupBackend(f.backend ?? BACKEND_FLAG.default);
      const policy = freshPolicy(f.preset as string, f.seed);
      await savePolicy(f.out, policy, { preset: f.preset, step: 0, training: { command: 'init', preset: f.preset, seed: f.seed } });
      console.log(`wrote ${f.preset} (${parameterCount(policy.config)} parameters, seed ${f.seed}) to ${f.out}`);
      disposeParams(policy.params);
      return;
    }
    if (f.backend !== undefined) throw new UsageError('--backend applies to --preset: a --family folder is written without a backend');
    const sizes: InitSizes = { ...(family === 'gpt2' ? GPT2_DEFAULT_SIZES : INIT_DEFAULT_SIZES) };
    for (const [flag, field] of Object.entries(SIZE_FLAGS)) {
      const v = f[flag as keyof typeof SIZE_FLAGS];
      if (v === undefined) continue;
      if (FAMILY_LACKS[family].includes(field)) throw new UsageError(`--${flag} does not apply to ${family} (it has no ${field} of its own)`);
      sizes[field] = v;
    }
    // GPT-2 has one key/value head per head; its MLP is 4 × hidden unless told.
    if (family === 'gpt2') {
      sizes.kvHeads = sizes.heads;
      if (f.intermediate === undefined) sizes.intermediateSize = 4 * sizes.hiddenSize;
    }
    const flagOf = (field: keyof InitSizes) => `--${Object.keys(SIZE_FLAGS).find((k) => SIZE_FLAGS[k as keyof typeof SIZE_FLAGS] === field)}`;
    const error = initSizesError(family, sizes, flagOf);
    if (error !== null) throw new UsageError(error);
    const parts = initHfFolder(family, sizes, f.seed, (f.prompts ?? 'short') as PromptSetName);
    await checkOutDir(f.out);
    await writeHfFolder(f.out, parts);
    const params = tensorParameterCount([...parts.tensors.values()]);
    console.log(
      `wrote ${family} (${params.toLocaleString('en')} parameters, ${((params * 4) / 1e6).toFixed(1)} MB float32, vocabulary ${String(parts.config.vocab_size)}, ` +
        `${sizes.layers} layers × ${sizes.hiddenSize}, ${sizes.maxPositions} positions, ${f.prompts ?? 'short'} prompts, seed ${f.seed}) to ${f.out}`,
    );
  },
);
