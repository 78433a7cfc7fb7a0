"""The PyTorch CPU side of `npm run bench -- lm`: a Llama of the given config (random weights,
float32), its cached greedy decode of NEW tokens after a PROMPT-token prefill (batch 1), and a LoRA
training step (PEFT, rank R on q/k/v/o, mean next-token cross-entropy over 1 x TRAIN tokens,
forward and backward), on THREADS threads. Prints one JSON line: decode and training tokens/s
(medians) and the process's peak resident memory.
Usage: lm_torch.py CONFIG_JSON PROMPT NEW TRAIN R THREADS"""
import json, resource, statistics, sys, time
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

cfg_json, prompt, new, train, r, threads = sys.argv[1], *map(int, sys.argv[2:7])
torch.set_num_threads(threads)
torch.manual_seed(0)
cfg = LlamaConfig(**json.loads(cfg_json))
model = LlamaForCausalLM(cfg).float().eval()
gen = torch.Generator().manual_seed(1)
ids = torch.randint(0, cfg.vocab_size, (1, prompt), generator=gen)

def decode():
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        t0 = time.perf_counter()
        for _ in range(new):
            out = model(input_ids=nxt, past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        return time.perf_counter() - t0

decode()
decode_rates = [new / decode() for _ in range(3)]

peft = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], lora_dropout=0.0))
tokens = torch.randint(0, cfg.vocab_size, (1, train), generator=gen)

def step():
    t0 = time.perf_counter()
    logits = peft(input_ids=tokens[:, :-1]).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), tokens[:, 1:].reshape(-1))
    loss.backward()
    peft.zero_grad(set_to_none=True)
    return time.perf_counter() - t0

step()
train_rates = [(train - 1) / step() for _ in range(3)]
print(json.dumps({
    "decodeTokensPerSec": statistics.median(decode_rates),
    "trainTokensPerSec": statistics.median(train_rates),
    "peakMB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
