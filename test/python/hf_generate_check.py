"""transformers' side of `generate`: the chat template's ids for the messages, and greedy decoding
from them. Usage: hf_generate_check.py MODEL_DIR MESSAGES_JSON MAX_NEW_TOKENS -> {"promptIds", "generatedIds"}"""
import json, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

model_dir, messages, max_new = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
tok = AutoTokenizer.from_pretrained(model_dir)
ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
with torch.no_grad():
    out = model.generate(torch.tensor([ids]), max_new_tokens=max_new, do_sample=False, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
print(json.dumps({"promptIds": ids, "generatedIds": out[0][len(ids):].tolist()}))
