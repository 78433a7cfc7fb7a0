import { describe, expect, it } from 'vitest';
import { paramSpecs, type ModelConfig } from '../model/config';
import { Rng } from '../rng';
import { buildTokenizerConfig, buildTokenizerJson } from '../tokenizer/tokenizerJson';
import { VOCAB, VOCAB_SIZE } from '../tokenizer/vocab';
import {
  CHECKPOINT_FILES,
  CheckpointError,
  decodeCheckpoint,
  encodeCheckpoint,
  makeSelfcestMeta,
  SELFCEST_PROTOCOL_VERSION,
  type Checkpoint,
} from './checkpoint';
import { decodeSafetensors, encodeSafetensors, type TensorToEncode } from './safetensors';

const config: ModelConfig = { nLayer: 2, nEmbd: 8, nHead: 2, nPositions: 16, vocabSize: VOCAB_SIZE, layerNormEps: 1e-5 };

function tinyCheckpoint(seed = 7): Checkpoint {
  const rng = new Rng(seed);
  const tensors = new Map<string, Float32Array>();
  for (const s of paramSpecs(config)) {
    const n = s.shape.reduce((a, b) => a * b, 1);
    tensors.set(
      s.name,
      Float32Array.from({ length: n }, () => rng.normal() * 0.02),
    );
  }
  return {
    config,
    tensors,
    tokenizer: buildTokenizerJson(),
    selfcest: makeSelfcestMeta({ preset: 'test', step: 12, training: { lr: 3e-4, steps: 100 }, notes: 'unit test' }),
  };
}

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
const dec = (b: Uint8Array | undefined): Record<string, unknown> => JSON.parse(new TextDecoder().decode(b));

/** The checkpoint's weights as re-encodable tensors, for building corrupted files. */
function weightsOf(files: Map<string, Uint8Array>): TensorToEncode[] {
  const { tensors } = decodeSafetensors(files.get('model.safetensors') as Uint8Array);
  return [...tensors].map(([name, t]) => ({ name, shape: t.shape, data: t.data }));
}

function withWeights(tensors: TensorToEncode[]): Map<string, Uint8Array> {
  const files = encodeCheckpoint(tinyCheckpoint());
  files.set('model.safetensors', encodeSafetensors(tensors, { format: 'pt' }));
  return files;
}

function withJson(file: string, patch: Record<string, unknown>): Map<string, Uint8Array> {
  const files = encodeCheckpoint(tinyCheckpoint());
  files.set(file, enc({ ...dec(files.get(file)), ...patch }));
  return files;
}

describe('encodeCheckpoint / decodeCheckpoint', () => {
  it('writes the four HF-layout files and round-trips bit-exactly', () => {
    const ckpt = tinyCheckpoint();
    const files = encodeCheckpoint(ckpt);
    expect([...files.keys()].sort()).toEqual(['config.json', 'model.safetensors', 'selfcest.json', 'tokenizer.json']);

    const back = decodeCheckpoint(files);
    expect(back.config).toEqual(config);
    expect(back.selfcest).toEqual(ckpt.selfcest);
    expect(back.tokenizer).toEqual(ckpt.tokenizer);
    expect([...back.tensors.keys()]).toEqual(paramSpecs(config).map((s) => s.name));
    for (const [name, data] of ckpt.tensors) {
      expect(Buffer.from((back.tensors.get(name) as Float32Array).buffer)).toEqual(Buffer.from(data.buffer));
    }
  });

  it('stores the HF tensor names in Conv1D layout, without lm_head, tagged format=pt', () => {
    const { tensors, metadata } = decodeSafetensors(encodeCheckpoint(tinyCheckpoint()).get('model.safetensors') as Uint8Array);
    expect(metadata).toEqual({ format: 'pt' });
    expect(tensors.has('lm_head.weight')).toBe(false);
    expect(tensors.get('transformer.wte.weight')?.shape).toEqual([VOCAB_SIZE, 8]);
    expect(tensors.get('transformer.h.1.attn.c_attn.weight')?.shape).toEqual([8, 24]);
    expect(tensors.get('transformer.h.1.mlp.c_proj.weight')?.shape).toEqual([32, 8]);
    expect(tensors.size).toBe(2 + 12 * 2 + 2);
  });

  it('writes and reads back tokenizer_config.json when present', () => {
    const ckpt = { ...tinyCheckpoint(), tokenizerConfig: buildTokenizerConfig() };
    const files = encodeCheckpoint(ckpt);
    expect(files.has('tokenizer_config.json')).toBe(true);
    expect(decodeCheckpoint(files).tokenizerConfig).toEqual(ckpt.tokenizerConfig);
  });

  it("makeSelfcestMeta records this build's protocol version and vocabulary", () => {
    const meta = makeSelfcestMeta({ step: 3 });
    expect(meta.format).toBe('selfcest-checkpoint');
    expect(meta.protocolVersion).toBe(SELFCEST_PROTOCOL_VERSION);
    expect(meta.vocab).toEqual([...VOCAB]);
    expect(meta.step).toBe(3);
    expect(Number.isNaN(Date.parse(meta.createdAt ?? ''))).toBe(false);
  });

  it('accepts an lm_head.weight equal to wte (as a re-save may write) and drops it', () => {
    const tensors = weightsOf(encodeCheckpoint(tinyCheckpoint()));
    const wte = tensors.find((t) => t.name === 'transformer.wte.weight') as TensorToEncode;
    const back = decodeCheckpoint(withWeights([...tensors, { ...wte, name: 'lm_head.weight', data: wte.data.slice() }]));
    expect(back.tensors.has('lm_head.weight')).toBe(false);
    expect(back.tensors.size).toBe(paramSpecs(config).length);
  });

  it('ignores the causal-mask buffers older transformers saved', () => {
    const tensors = weightsOf(encodeCheckpoint(tinyCheckpoint()));
    const mask = { name: 'transformer.h.0.attn.bias', shape: [1, 1, 16, 16], data: new Float32Array(256).fill(1) };
    expect(decodeCheckpoint(withWeights([...tensors, mask])).tensors.has(mask.name)).toBe(false);
  });

  it('loads weights stored as BF16 (HF files often are), widened to f32', () => {
    const files = encodeCheckpoint(tinyCheckpoint());
    const tensors = weightsOf(files);
    // Build a BF16 file by hand: top 16 bits of each f32.
    const header: Record<string, unknown> = {};
    const chunks: Uint8Array[] = [];
    let offset = 0;
    for (const t of tensors) {
      const bits = new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length);
      const half = Uint16Array.from(bits, (b) => b >>> 16);
      header[t.name] = { dtype: 'BF16', shape: t.shape, data_offsets: [offset, offset + half.byteLength] };
      chunks.push(new Uint8Array(half.buffer));
      offset += half.byteLength;
    }
    const json = new TextEncoder().encode(JSON.stringify(header));
    const bytes = new Uint8Array(8 + json.length + offset);
    new DataView(bytes.buffer).setBigUint64(0, BigInt(json.length), true);
    bytes.set(json, 8);
    let pos = 8 + json.length;
    for (const c of chunks) {
      bytes.set(c, pos);
      pos += c.length;
    }
    files.set('model.safetensors', bytes);
    const back = decodeCheckpoint(files);
    const orig = tinyCheckpoint().tensors.get('transformer.h.0.mlp.c_fc.weight') as Float32Array;
    const got = back.tensors.get('transformer.h.0.mlp.c_fc.weight') as Float32Array;
    for (let i = 0; i < orig.length; i++) expect(Math.abs(got[i] - orig[i])).toBeLessThanOrEqual(Math.abs(orig[i]) / 128);
  });
});

describe('decodeCheckpoint rejects bad checkpoints with a message naming the problem', () => {
  const tensorsExcept = (drop: string) => weightsOf(encodeCheckpoint(tinyCheckpoint())).filter((t) => t.name !== drop);
  const tensorsWith = (name: string, change: (t: TensorToEncode) => TensorToEncode) =>
    weightsOf(encodeCheckpoint(tinyCheckpoint())).map((t) => (t.name === name ? change(t) : t));

  const cases: [string, () => Map<string, Uint8Array>, RegExp][] = [
    [
      'a missing file',
      () => {
        const f = encodeCheckpoint(tinyCheckpoint());
        f.delete('selfcest.json');
        return f;
      },
      /^checkpoint: missing file selfcest.json \(a checkpoint holds model.safetensors, config.json, tokenizer.json, selfcest.json\)/,
    ],
    [
      'truncated safetensors',
      () => {
        const f = encodeCheckpoint(tinyCheckpoint());
        f.set('model.safetensors', (f.get('model.safetensors') as Uint8Array).slice(0, -100));
        return f;
      },
      /checkpoint: model.safetensors is invalid: safetensors: tensor transformer\.[\w.]+: data_offsets \[\d+, \d+\] go past the end of the data section .*truncated file/,
    ],
    [
      'garbage instead of safetensors',
      () => {
        const f = encodeCheckpoint(tinyCheckpoint());
        f.set('model.safetensors', new TextEncoder().encode('<html>not found</html>'));
        return f;
      },
      /model.safetensors is invalid: safetensors: header length \d+ extends beyond the file/,
    ],
    [
      'a missing tensor',
      () => withWeights(tensorsExcept('transformer.h.1.mlp.c_fc.bias')),
      /checkpoint: model.safetensors is missing tensor transformer.h.1.mlp.c_fc.bias$/,
    ],
    [
      'an extra tensor',
      () => withWeights([...tensorsExcept(''), { name: 'transformer.h.0.attn.c_v.weight', shape: [2], data: new Float32Array(2) }]),
      /checkpoint: model.safetensors has unexpected tensor transformer.h.0.attn.c_v.weight$/,
    ],
    [
      'a transposed weight (Linear instead of Conv1D layout)',
      () => withWeights(tensorsWith('transformer.h.0.attn.c_attn.weight', (t) => ({ ...t, shape: [24, 8] }))),
      /checkpoint: tensor transformer.h.0.attn.c_attn.weight has shape \[24, 8\] but config.json implies \[8, 24\]/,
    ],
    [
      'a wrong dtype',
      () => {
        const f = encodeCheckpoint(tinyCheckpoint());
        const bytes = (f.get('model.safetensors') as Uint8Array).slice();
        const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
        // "I32" has the length of "F32", so only the dtype of the first tensor changes.
        const header = new TextDecoder().decode(bytes.subarray(8, 8 + n)).replace('"dtype":"F32"', '"dtype":"I32"');
        bytes.set(new TextEncoder().encode(header), 8);
        f.set('model.safetensors', bytes);
        return f;
      },
      /model.safetensors is invalid: safetensors: tensor transformer.wte.weight: unsupported dtype "I32"/,
    ],
    [
      'a config.json whose n_embd disagrees with wte',
      () => withJson('config.json', { n_embd: 16 }),
      new RegExp(`config.json does not match model.safetensors: n_embd = 16 but transformer.wte.weight has shape \\[${VOCAB_SIZE}, 8\\]`),
    ],
    [
      'a config.json whose n_positions disagrees with wpe',
      () => withJson('config.json', { n_positions: 32, n_ctx: 32 }),
      /config.json does not match model.safetensors: n_positions = 32 but transformer.wpe.weight has shape \[16, 8\]/,
    ],
    [
      'a config.json whose n_layer disagrees with the tensors',
      () => withJson('config.json', { n_layer: 3 }),
      /config.json does not match model.safetensors: n_layer = 3 but the tensors have 2 layers \(transformer.h.0..1\)/,
    ],
    [
      'a config.json with the wrong vocab_size',
      () => withJson('config.json', { vocab_size: 50257 }),
      new RegExp(`config.json: vocab_size is 50257 but the vocabulary has ${VOCAB_SIZE} tokens`),
    ],
    [
      'an invalid config.json field',
      () => withJson('config.json', { activation_function: 'relu' }),
      /checkpoint: config.json: activation_function must be "gelu_new"/,
    ],
    [
      'a config.json that is not JSON',
      () => {
        const f = encodeCheckpoint(tinyCheckpoint());
        f.set('config.json', new TextEncoder().encode('{ n_layer: 2 '));
        return f;
      },
      /checkpoint: config.json is not valid JSON/,
    ],
    [
      'a selfcest.json whose vocab differs from ours',
      () => withJson('selfcest.json', { vocab: VOCAB.map((t, i) => (i === 30 ? '!' : t)) }),
      new RegExp(
        `selfcest.json: vocab differs from this build's vocabulary at id 30: checkpoint has "!", expected ${JSON.stringify(JSON.stringify(VOCAB[30])).slice(1, -1)}`,
      ),
    ],
    [
      'a selfcest.json with a shorter vocab',
      () => withJson('selfcest.json', { vocab: VOCAB.slice(0, 40) }),
      new RegExp(`selfcest.json: vocab has 40 tokens but this build's vocabulary has ${VOCAB_SIZE}`),
    ],
    [
      'an unsupported protocolVersion',
      () => withJson('selfcest.json', { protocolVersion: 99 }),
      /checkpoint: selfcest.json: unsupported protocolVersion 99 \(this build supports 1\)/,
    ],
    [
      'a selfcest.json of another format',
      () => withJson('selfcest.json', { format: 'something-else' }),
      /selfcest.json: format must be "selfcest-checkpoint" \(got "something-else"\)/,
    ],
    [
      'a tokenizer.json with different ids',
      () => {
        const f = encodeCheckpoint(tinyCheckpoint());
        const tok = dec(f.get('tokenizer.json')) as { model: { vocab: Record<string, number> } };
        tok.model.vocab['a'] = 0;
        f.set('tokenizer.json', enc(tok));
        return f;
      },
      /tokenizer.json: token "a" has id 0, expected \d+/,
    ],
    [
      'an lm_head.weight that differs from wte',
      () => {
        const tensors = tensorsExcept('');
        const wte = tensors.find((t) => t.name === 'transformer.wte.weight') as TensorToEncode;
        const head = wte.data.slice();
        head[5] += 1;
        return withWeights([...tensors, { ...wte, name: 'lm_head.weight', data: head }]);
      },
      /lm_head.weight differs from transformer.wte.weight \(first at index 5: .*\); only a tied LM head is supported/,
    ],
    [
      'a NaN in a tensor',
      () =>
        withWeights(
          tensorsWith('transformer.h.1.ln_2.bias', (t) => {
            const data = t.data.slice();
            data[3] = NaN;
            return { ...t, data };
          }),
        ),
      /checkpoint: tensor transformer.h.1.ln_2.bias contains NaN at index 3 \(values must be finite\)/,
    ],
    [
      'an infinity in a tensor',
      () =>
        withWeights(
          tensorsWith('transformer.wpe.weight', (t) => {
            const data = t.data.slice();
            data[0] = -Infinity;
            return { ...t, data };
          }),
        ),
      /tensor transformer.wpe.weight contains -Infinity at index 0/,
    ],
  ];

  it.each(cases)('%s', (_label, make, message) => {
    expect(() => decodeCheckpoint(make())).toThrow(message);
  });

  it('lists every missing file at once', () => {
    const f = encodeCheckpoint(tinyCheckpoint());
    f.delete('config.json');
    f.delete('tokenizer.json');
    expect(() => decodeCheckpoint(f)).toThrow(/missing files config.json, tokenizer.json/);
  });
});

describe('decodeCheckpoint names the file and field of malformed JSON, never a TypeError', () => {
  const withFile = (file: string, text: string) => {
    const f = encodeCheckpoint(tinyCheckpoint());
    f.set(file, new TextEncoder().encode(text));
    return f;
  };
  const without = (file: string, field: string) => {
    const f = encodeCheckpoint(tinyCheckpoint());
    const j = dec(f.get(file));
    delete j[field];
    f.set(file, enc(j));
    return f;
  };
  const cases: [string, () => Map<string, Uint8Array>, RegExp][] = [
    ['a null selfcest.json', () => withFile('selfcest.json', 'null'), /^checkpoint: selfcest.json must hold a JSON object$/],
    ['a null config.json (one prefix only)', () => withFile('config.json', 'null'), /^checkpoint: config.json must hold a JSON object$/],
    ['a config.json array', () => withFile('config.json', '[2]'), /^checkpoint: config.json must hold a JSON object$/],
    ['a null tokenizer.json', () => withFile('tokenizer.json', 'null'), /^checkpoint: tokenizer.json must hold a JSON object$/],
    ['a null tokenizer_config.json', () => withFile('tokenizer_config.json', 'null'), /^checkpoint: tokenizer_config.json must hold a JSON object$/],
    [
      'a tokenizer.json whose model is an array',
      () => withJson('tokenizer.json', { model: [] }),
      /^checkpoint: tokenizer.json: model must be an object with the vocabulary \(got \[\]\)$/,
    ],
    [
      'an empty tokenizer.json object',
      () => withFile('tokenizer.json', '{}'),
      /^checkpoint: tokenizer.json: model must be an object with the vocabulary \(got undefined\)$/,
    ],
    [
      'a tokenizer.json whose vocab is an array',
      () => withJson('tokenizer.json', { model: { type: 'WordLevel', vocab: [...VOCAB] } }),
      /^checkpoint: tokenizer.json: model.vocab must be an object mapping each token to its id/,
    ],
    [
      'a tokenizer.json with an extra token on an id already taken',
      () =>
        withJson('tokenizer.json', {
          ...buildTokenizerJson(),
          model: { ...buildTokenizerJson().model, vocab: { ...buildTokenizerJson().model.vocab, zz: 5 } },
        }),
      /^checkpoint: tokenizer.json: model.vocab has the token "zz" \(id 5\), which is not in this vocabulary$/,
    ],
    [
      'selfcest.json without format',
      () => without('selfcest.json', 'format'),
      /^checkpoint: selfcest.json: format must be "selfcest-checkpoint" \(got missing\)$/,
    ],
    [
      'selfcest.json without protocolVersion',
      () => without('selfcest.json', 'protocolVersion'),
      /^checkpoint: selfcest.json: protocolVersion must be an integer \(got missing\)$/,
    ],
    ['selfcest.json without vocab', () => without('selfcest.json', 'vocab'), /^checkpoint: selfcest.json: vocab must be an array of strings \(got missing\)$/],
    ['selfcest.json with a null vocab', () => withJson('selfcest.json', { vocab: null }), /^checkpoint: selfcest.json: vocab must be an array of strings$/],
    [
      'selfcest.json with a null step',
      () => withJson('selfcest.json', { step: null }),
      /^checkpoint: selfcest.json: step must be a non-negative integer \(got null\)$/,
    ],
    [
      'config.json without n_embd',
      () => without('config.json', 'n_embd'),
      /^checkpoint: config.json: n_embd must be an integer in \[1, 4096\] \(got missing\)$/,
    ],
    ['config.json without model_type', () => without('config.json', 'model_type'), /^checkpoint: config.json: model_type must be "gpt2" \(got missing\)$/],
    [
      'config.json with a null layer_norm_epsilon',
      () => withJson('config.json', { layer_norm_epsilon: null }),
      /^checkpoint: config.json: layer_norm_epsilon must be a number in \(0, 1\) \(got null\)$/,
    ],
    [
      'config.json with a null activation_function',
      () => withJson('config.json', { activation_function: null }),
      /^checkpoint: config.json: activation_function must be "gelu_new" .*\(got null\)$/,
    ],
  ];
  it.each(cases)('%s', (_label, make, message) => {
    let thrown: unknown;
    try {
      decodeCheckpoint(make());
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(CheckpointError);
    expect((thrown as Error).message).toMatch(message);
  });
});

describe('encodeCheckpoint refuses to write a checkpoint it could not read back', () => {
  it('rejects non-finite weights, naming the tensor', () => {
    const ckpt = tinyCheckpoint();
    (ckpt.tensors.get('transformer.ln_f.weight') as Float32Array)[2] = Infinity;
    expect(() => encodeCheckpoint(ckpt)).toThrow(/tensor transformer.ln_f.weight contains Infinity at index 2/);
  });
  it('rejects a missing or wrongly sized tensor', () => {
    const ckpt = tinyCheckpoint();
    ckpt.tensors.delete('transformer.h.0.ln_1.bias');
    expect(() => encodeCheckpoint(ckpt)).toThrow(/cannot export: missing tensor transformer.h.0.ln_1.bias/);
    const ckpt2 = tinyCheckpoint();
    ckpt2.tensors.set('transformer.wpe.weight', new Float32Array(3));
    expect(() => encodeCheckpoint(ckpt2)).toThrow(/cannot export tensor transformer.wpe.weight: 3 values, shape \[16, 8\] needs 128/);
  });
  it('rejects an lm_head.weight or other unknown tensor', () => {
    const ckpt = tinyCheckpoint();
    ckpt.tensors.set('lm_head.weight', ckpt.tensors.get('transformer.wte.weight') as Float32Array);
    expect(() => encodeCheckpoint(ckpt)).toThrow(/cannot export unexpected tensor lm_head.weight/);
  });
  it('rejects metadata with a foreign vocabulary', () => {
    const ckpt = tinyCheckpoint();
    ckpt.selfcest = { ...ckpt.selfcest, vocab: ['x'] };
    expect(() => encodeCheckpoint(ckpt)).toThrow(/selfcest.json: vocab differs/);
  });
});

it('CHECKPOINT_FILES names the HF file names', () => {
  expect(CHECKPOINT_FILES.weights).toBe('model.safetensors');
  expect(CHECKPOINT_FILES.config).toBe('config.json');
});
