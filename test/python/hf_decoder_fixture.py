"""Tiny random decoder checkpoints of the GPT-2, Llama, Qwen2 and Qwen3 families, saved as Hugging Face
folders (config.json + model.safetensors), with transformers' logits on fixed token ids: the
reference the project's forward must match. Usage: hf_decoder_fixture.py OUT_DIR"""
import json, os, sys
import torch
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, Qwen2Config, Qwen3Config

out = sys.argv[1]
common = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6)
families = {
    # grouped-query attention, untied, llama3 rope scaling that changes the low frequencies
    "llama": LlamaConfig(**common, tie_word_embeddings=False, rope_theta=10000.0,
                         rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
    # q/k/v biases, tied embeddings, another theta
    "qwen2": Qwen2Config(**common, tie_word_embeddings=True, rope_theta=1000.0),
    # q/k norms, a head_dim that is not hidden / heads
    "qwen3": Qwen3Config(**common, head_dim=16, tie_word_embeddings=False, rope_theta=1000000.0),
    # LayerNorm, learned positions, fused c_attn (Conv1D), an MLP width that is not 4 x n_embd
    "gpt2": GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=64, n_inner=80, layer_norm_epsilon=1e-5,
                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
}
tokens = [[1, 5, 9, 33, 2, 77, 95, 0, 14, 60, 61, 3], [7, 7, 8, 40, 41, 90, 12, 13, 50, 51, 52, 53]]
for name, cfg in families.items():
    torch.manual_seed(len(name))
    cfg.dtype = torch.float32
    model = AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        # Random biases (zero at init) and norm weights (one at init), so that they matter.
        for n, p in model.named_parameters():
            if n.endswith("bias") or "norm" in n or ".ln_" in n:
                p.add_(torch.randn_like(p) * 0.1)
        logits = model(torch.tensor(tokens)).logits
    d = os.path.join(out, name)
    model.save_pretrained(d, safe_serialization=True)
    with open(os.path.join(d, "reference_logits.json"), "w") as f:
        json.dump({"tokens": tokens, "logits": logits.tolist()}, f)
print("ok")
