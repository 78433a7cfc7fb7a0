"""The warm start's loss of a set of sequences with torch autograd: the mean next-token NLL over
the trained positions, -sum_t w[t] log p(tokens[t+1] | tokens[..t]) / sum w, each sequence run
alone (no padding). Through a PEFT LoRA model (ADAPTER_DIR), gradients of the adapters; with "-"
for ADAPTER_DIR, through the base model, gradients of every weight. Prints the loss and the
gradients as JSON.
Usage: text_sft_check.py BASE_DIR ADAPTER_DIR|- SEQUENCES_JSON"""
import json, sys
import torch
from transformers import AutoModelForCausalLM

base_dir, adapter_dir, seq_path = sys.argv[1], sys.argv[2], sys.argv[3]
with open(seq_path) as f:
    seqs = json.load(f)
model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float64)
if adapter_dir != "-":
    from peft import PeftModel
    model = PeftModel.from_pretrained(model, adapter_dir, is_trainable=True)
model = model.double()
model.train(False)
total = sum(sum(s["weights"]) for s in seqs)
loss = torch.zeros((), dtype=torch.float64)
for s in seqs:
    ids = torch.tensor(s["tokens"]).unsqueeze(0)
    w = torch.tensor(s["weights"], dtype=torch.float64)
    logp = torch.log_softmax(model(input_ids=ids[:, :-1]).logits[0], dim=-1)
    picked = logp.gather(-1, ids[0, 1:].unsqueeze(-1)).squeeze(-1)
    loss = loss - (picked * w).sum() / total
loss.backward()
if adapter_dir != "-":
    grads = {n.replace(".default", "").replace("base_model.model.", ""): p.grad.tolist() for n, p in model.named_parameters() if "lora_" in n}
else:
    grads = {n: p.grad.tolist() for n, p in model.named_parameters() if p.grad is not None}
print(json.dumps({"loss": float(loss), "grads": grads}))
