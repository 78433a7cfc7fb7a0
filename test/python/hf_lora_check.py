"""Loads what the project exported, with PEFT and transformers themselves: a base folder with a
LoRA adapter folder (PeftModel.from_pretrained), and a merged folder (AutoModelForCausalLM), and
prints their logits on the given tokens as JSON. Usage: hf_lora_check.py BASE ADAPTER MERGED TOKENS_JSON"""
import json, sys
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

base_dir, adapter_dir, merged_dir, tokens = sys.argv[1], sys.argv[2], sys.argv[3], torch.tensor(json.loads(sys.argv[4]))
with torch.no_grad():
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32), adapter_dir).eval()
    merged = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32).eval()
    print(json.dumps({"adapter": adapted(tokens).logits.tolist(), "merged": merged(tokens).logits.tolist()}))
