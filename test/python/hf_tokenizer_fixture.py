"""A byte-level BPE tokenizer trained with `tokenizers` on a few kilobytes of task text, saved as a
Hugging Face tokenizer (tokenizer.json, tokenizer_config.json with a ChatML chat template), with
transformers' ids for plain texts and for chats: the reference the project's loading must match.
Usage: hf_tokenizer_fixture.py OUT_DIR [model [gpt2]]: with `model`, also a tiny random Qwen2 (or GPT-2) of the
tokenizer's vocabulary in the same folder, a whole model folder."""
import json, os, random, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = random.Random(7)
ops = "+-*"
texts = []
for _ in range(400):
    n = rng.randint(3, 8)
    expr = str(rng.randint(0, 99))
    for _ in range(n - 1):
        expr += rng.choice(ops) + str(rng.randint(0, 99))
    texts.append(f"Calculate the value of {expr}. Answer: {rng.randint(-500, 500)}")
    texts.append(f"The key k{rng.randint(0, 9)} holds {rng.choice(['apple', 'river', 'stone', 'cloud'])}; ask a clone to find it.")
specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
template = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=template)
fast.save_pretrained(out)
cases = ["Calculate the value of 12+7*3.", "Answer: -42", " leading space and  two spaces", "k7 holds river; <|im_end|> inside", "ümlaut and emoji 🙂 are bytes"]
chats = [
    [{"role": "system", "content": "You may spawn clones."}, {"role": "user", "content": "Calculate the value of 3*4+5."}],
    [{"role": "user", "content": "Find k3."}, {"role": "assistant", "content": "<tool_call>{\"objectives\": [\"find k3\"]}</tool_call>"}],
]
def ids_of(x):
    return list(x["input_ids"]) if hasattr(x, "keys") else list(x)
ref = {
    "texts": [{"text": t, "ids": fast(t)["input_ids"], "decoded": fast.decode(fast(t)["input_ids"])} for t in cases],
    "chats": [
        {"messages": c, "text": fast.apply_chat_template(c, tokenize=False, add_generation_prompt=True),
         "ids": ids_of(fast.apply_chat_template(c, tokenize=True, add_generation_prompt=True))}
        for c in chats
    ],
}
with open(os.path.join(out, "reference_tokens.json"), "w") as f:
    json.dump(ref, f, ensure_ascii=False)
if len(sys.argv) > 2 and sys.argv[2] == "model":
    import torch
    from transformers import AutoModelForCausalLM, GPT2Config, Qwen2Config
    torch.manual_seed(11)
    eos = fast.convert_tokens_to_ids("<|im_end|>")
    if len(sys.argv) > 3 and sys.argv[3] == "gpt2":
        cfg = GPT2Config(vocab_size=len(fast), n_embd=32, n_layer=2, n_head=4, n_positions=1024, bos_token_id=eos,
                         eos_token_id=eos, initializer_range=0.4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    else:
        cfg = Qwen2Config(vocab_size=len(fast), hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=True,
                          eos_token_id=eos, initializer_range=0.4)
    cfg.dtype = torch.float32
    AutoModelForCausalLM.from_config(cfg).save_pretrained(out, safe_serialization=True)
print("ok")
