"""The policy loss of one packed batch through a PEFT LoRA model, with torch autograd: the clipped
surrogate with dual clip and the k3 KL term, as verl's compute_policy_loss (vanilla) and
kl_penalty("low_var_kl") define them, each position weighted by the batch's aggregation weight.
Prints the loss, the diagnostics' sums and the gradient of every adapter tensor as JSON.
Usage: text_grpo_check.py BASE_DIR ADAPTER_DIR BATCH_JSON"""
import json, sys
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

base_dir, adapter_dir, batch_path = sys.argv[1], sys.argv[2], sys.argv[3]
with open(batch_path) as f:
    b = json.load(f)
model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float64), adapter_dir, is_trainable=True)
model = model.double()
model.train(False)
shape = (b["rows"], b["length"])
inputs = torch.tensor(b["inputs"]).reshape(shape)
targets = torch.tensor(b["targets"]).reshape(shape)
w = torch.tensor(b["weights"], dtype=torch.float64).reshape(shape)
adv = torch.tensor(b["advantages"], dtype=torch.float64).reshape(shape)
old = torch.tensor(b["oldLogprobs"], dtype=torch.float64).reshape(shape)
c = b["config"]

logits = model(input_ids=inputs).logits / c["temperature"]
logp_all = torch.log_softmax(logits, dim=-1)
logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
entropy = -(logp_all.exp() * logp_all).sum(-1)
trained = w > 0
log_ratio = torch.clamp(logp - old, -20.0, 20.0)
ratio = torch.exp(log_ratio)
pg1 = -adv * ratio
pg2 = -adv * torch.clamp(ratio, 1 - c["clipLow"], 1 + c["clipHigh"])
clipped_pg = torch.maximum(pg1, pg2)
clipped = (pg2 > pg1).double()
per_token = clipped_pg
dual_clipped = torch.zeros_like(logp)
if c["dualClip"] is not None:
    pg3 = -adv * c["dualClip"]
    negative = adv < 0
    dual_clipped = (negative & (pg3 < clipped_pg)).double()
    per_token = torch.where(negative, torch.minimum(pg3, clipped_pg), clipped_pg)
kl = torch.zeros_like(logp)
if b.get("refLogprobs") is not None and c["beta"] > 0:
    ref = torch.tensor(b["refLogprobs"], dtype=torch.float64).reshape(shape)
    d = torch.where(trained, ref - logp, torch.zeros_like(logp))
    kl = torch.exp(d) - d - 1
    per_token = per_token + c["beta"] * kl
loss = (per_token * w).sum()
loss.backward()
active = trained.double()
approx = ratio - 1 - log_ratio
sums = {k: float((v * active).sum()) for k, v in
        {"kl": kl, "clipped": clipped, "dualClipped": dual_clipped, "approxKl": approx, "entropy": entropy, "ratio": ratio}.items()}
grads = {n.replace(".default", ""): p.grad.tolist() for n, p in model.named_parameters() if "lora_" in n}
print(json.dumps({"loss": float(loss), "sums": sums, "grads": grads}))
