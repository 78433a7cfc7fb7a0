"""PEFT LoRA adapters over the decoder fixtures (hf_decoder_fixture.py), with torch autograd's
gradients of the causal-LM loss with respect to every lora_A and lora_B: the reference for the
project's LoRA. Usage: hf_lora_fixture.py FIXTURE_DIR (reads FAMILY/, writes FAMILY-lora/)"""
import json, os, sys
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

root = sys.argv[1]
tokens = torch.tensor([[1, 5, 9, 33, 2, 77, 95, 0, 14, 60], [7, 7, 8, 40, 41, 90, 12, 13, 50, 51]])
# gpt2's layers are Conv1D: PEFT sets fan_in_fan_out itself (and says so); c_proj is the attention's and the MLP's.
for family, targets in [("llama", ["q_proj", "v_proj", "down_proj"]), ("qwen2", ["k_proj", "o_proj", "gate_proj", "up_proj"]),
                        ("gpt2", ["c_attn", "c_proj", "c_fc"])]:
    torch.manual_seed(3)
    base = AutoModelForCausalLM.from_pretrained(os.path.join(root, family), dtype=torch.float32).eval()
    # init_lora_weights=False: B is random too, so that A has a gradient.
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=targets, lora_dropout=0.0, init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    grads = {n.replace(".default", ""): p.grad.tolist() for n, p in model.named_parameters() if p.requires_grad}
    out = os.path.join(root, family + "-lora")
    model.save_pretrained(out)
    with open(os.path.join(out, "reference_grads.json"), "w") as f:
        json.dump({"tokens": tokens.tolist(), "loss": loss.item(), "grads": grads}, f)
print("ok")
