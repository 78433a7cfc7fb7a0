#!/usr/bin/env python3
"""Independent numpy reference for Hugging Face GPT2LMHeadModel logits.

Reads a model directory (config.json + model.safetensors) exactly as transformers would and
computes the GPT-2 forward pass the way `transformers.models.gpt2.modeling_gpt2` does in eval
mode (dropout off): token + position embeddings, pre-LayerNorm blocks of causal multi-head
self-attention and a gelu_new MLP with Conv1D weights ([in, out], y = x @ W + b), a final
LayerNorm and an LM head tied to the token embedding. It shares no code with the TypeScript
side: the safetensors parser below is written from the format description.

Usage:
    gpt2_reference.py MODEL_DIR [TOKENS_JSON]
TOKENS_JSON (or stdin when absent) is a list of ids, or a list of such lists (one sequence
each, lengths may differ). Prints {"logits": [...]} with shape [batch, length, vocab]; a single
sequence gives a batch of one. Arithmetic is float64 so the reference is not the noisier side.
"""
import json
import math
import struct
import sys

import numpy as np

DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8")}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: shorter than 8 bytes")
    (header_len,) = struct.unpack("<Q", raw[:8])
    if 8 + header_len > len(raw):
        raise ValueError(f"{path}: header length {header_len} beyond end of file")
    header = json.loads(raw[8 : 8 + header_len].decode("utf-8"))
    data = memoryview(raw)[8 + header_len :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor {name} offsets out of range")
        chunk = data[begin:end]
        if info["dtype"] == "BF16":
            # bfloat16 is the high half of a float32.
            bits = np.frombuffer(chunk, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif info["dtype"] in DTYPES:
            arr = np.frombuffer(chunk, dtype=DTYPES[info["dtype"]])
        else:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        tensors[name] = arr.astype(np.float64).reshape(info["shape"])
    return tensors


def load(model_dir):
    with open(f"{model_dir}/config.json", encoding="utf-8") as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "gpt2":
        raise ValueError("config.json: model_type must be gpt2")
    raw = read_safetensors(f"{model_dir}/model.safetensors")
    # GPT2LMHeadModel accepts names with or without the base-model prefix.
    weights = {}
    for name, value in raw.items():
        if not name.startswith("transformer.") and name != "lm_head.weight":
            name = "transformer." + name
        weights[name] = value
    return cfg, weights


def layer_norm(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased, as torch.nn.LayerNorm
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {"gelu_new": gelu_new}


def softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def forward(cfg, w, ids):
    n_embd, n_head = cfg["n_embd"], cfg["n_head"]
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    act_name = cfg.get("activation_function", "gelu_new")
    if act_name not in ACTIVATIONS:
        raise ValueError(f"activation_function {act_name} not implemented in this reference")
    act = ACTIVATIONS[act_name]
    ids = np.asarray(ids, dtype=np.int64)
    t = ids.shape[0]
    if t > cfg["n_positions"]:
        raise ValueError(f"sequence of {t} tokens exceeds n_positions {cfg['n_positions']}")
    if ids.min() < 0 or ids.max() >= cfg["vocab_size"]:
        raise ValueError("token id out of range")
    hd = n_embd // n_head
    wte = w["transformer.wte.weight"]
    h = wte[ids] + w["transformer.wpe.weight"][np.arange(t)]
    causal = np.tril(np.ones((t, t), dtype=bool))
    mask_value = np.finfo(np.float64).min
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        a = layer_norm(h, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = np.split(qkv, 3, axis=-1)
        q, k, v = (x.reshape(t, n_head, hd).transpose(1, 0, 2) for x in (q, k, v))
        scores = q @ k.transpose(0, 2, 1)
        if cfg.get("scale_attn_weights", True):
            scores = scores / math.sqrt(hd)
        if cfg.get("scale_attn_by_inverse_layer_idx", False):
            scores = scores / float(i + 1)
        scores = np.where(causal, scores, mask_value)
        att = softmax(scores) @ v  # [head, t, hd]
        att = att.transpose(1, 0, 2).reshape(t, n_embd)
        h = h + att @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = layer_norm(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = act(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        h = h + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    h = layer_norm(h, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    tied = cfg.get("tie_word_embeddings", True)
    head = wte if tied or "lm_head.weight" not in w else w["lm_head.weight"]
    return h @ head.T  # nn.Linear(n_embd, vocab, bias=False) with weight [vocab, n_embd]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    model_dir = sys.argv[1]
    tokens = json.loads(sys.argv[2] if len(sys.argv) == 3 else sys.stdin.read())
    batch = tokens if tokens and isinstance(tokens[0], list) else [tokens]
    cfg, weights = load(model_dir)
    logits = [forward(cfg, weights, seq).tolist() for seq in batch]
    json.dump({"logits": logits}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
