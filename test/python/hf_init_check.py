"""A model folder made by `init --family`, read by transformers: AutoTokenizer's ids and decoded
texts for plain texts, apply_chat_template's text and ids for chats (with tools where given), and
AutoModelForCausalLM's logits on each chat's ids, for the project's loader to match.
Usage: hf_init_check.py FOLDER CASES_JSON OUT_JSON, CASES_JSON = {"texts": [...], "chats": [{"messages", "tools", "add_generation_prompt"}]}."""
import json, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

folder, cases_path, out_path = sys.argv[1:4]
cases = json.load(open(cases_path))
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()

def ids_of(x):
    return list(x["input_ids"]) if hasattr(x, "keys") else list(x)

out = {"class": type(model).__name__, "parameters": sum(p.numel() for p in model.parameters()), "texts": [], "chats": []}
for t in cases["texts"]:
    ids = tok(t)["input_ids"]
    out["texts"].append({"ids": ids, "decoded": tok.decode(ids)})
for c in cases["chats"]:
    kw = {"tools": c["tools"]} if c.get("tools") else {}
    text = tok.apply_chat_template(c["messages"], tokenize=False, add_generation_prompt=c["add_generation_prompt"], **kw)
    ids = ids_of(tok.apply_chat_template(c["messages"], tokenize=True, add_generation_prompt=c["add_generation_prompt"], **kw))
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    out["chats"].append({"text": text, "ids": ids, "logits": logits.tolist()})
json.dump(out, open(out_path, "w"))
print("ok")
