"""Scores paired right/wrong model-like episodes in each answer format, as the tool agent loop calls the reward.

Usage: verl_formats_check.py REWARD.py TASK MARKERS_JSON JSON_REPAIR_PENALTY
  ->  prints {"pairs": [{"format", "shape", "right", "wrong", "root_tokens", "clone_tokens"}], "clone_own_call": {...}}

Each pair is one episode written twice, the same in every token but the final answer: a root that
reasons for a few hundred tokens, calls spawn_clone once (two clones that reason and answer) or
answers alone, then states its answer in one of the formats a chat model writes (`Answer: 1,234`,
`The answer is 1234.`, `#### 1234`, `Answer: **1234**`, `Answer: 1234`). Tokenized by a real Hugging
Face tokenizer, masked, decoded and scored by verl_loop.assign_rewards. `clone_own_call` is the
loop's end-of-run call for a clone (its own output as the root, no reward_model, clone_depth 1):
the reward's value and whether it raised, and what it logged.
"""

from __future__ import annotations

import io
import json
import logging
import random
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import verl_dump_fixture as fixture  # noqa: E402
import verl_loop  # noqa: E402

FORMATS = {
    "Answer: 1,234": lambda n: f"Answer: {n:,}",
    "The answer is 1234.": lambda n: f"The answer is {n}.",
    "#### 1234": lambda n: f"#### {n}",
    "Answer: **1234**": lambda n: f"Answer: **{n}**",
    "Answer: 1234": lambda n: f"Answer: {n}",
}


def prose(rng: random.Random, words: int) -> str:
    return fixture.rambling(rng, words)


def main():
    reward_path, task, markers, repair = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
    reward = fixture.load("formats_reward", reward_path)
    truth = 1234
    question = "Calculate the value of 1200+34." if task == "arithmetic" else "What is v0 + v1? The values are in the chunks v0, v1."
    parts = [("Compute 1200", "1200"), ("Compute 34", "34")]
    rng = random.Random(7)
    episodes = []  # (format, shape, right?, root segments, clone texts)
    for name, write in FORMATS.items():
        for shape in ("spawn", "alone"):
            thinking = prose(rng, 180)
            clone_prose = [prose(rng, 120) for _ in parts]
            for right in (True, False):
                final = truth if right else truth + 9
                if shape == "spawn":
                    call = json.dumps({"name": "spawn_clone", "arguments": {"objectives": [o for o, _ in parts]}})
                    lines = "\n".join(f"turn0_clone{i}: {v}" for i, (_, v) in enumerate(parts))
                    segments = [(f"{thinking}\n<tool_call>\n{call}\n</tool_call><|im_end|>", 1),
                                (f"\n<|im_start|>user\n<tool_response>\n{lines}\n</tool_response><|im_end|>\n<|im_start|>assistant\n", 0),
                                (f"Adding the two parts gives the total.\n{write(final)}<|im_end|>", 1)]
                    clones = [(o, f"{p}\nAnswer: {v}<|im_end|>") for (o, v), p in zip(parts, clone_prose)]
                else:
                    segments = [(f"{thinking}\nSo the total is computed.\n{write(final)}<|im_end|>", 1)]
                    clones = []
                episodes.append((name, shape, right, segments, clones))
    texts = [t for *_, segs, clones in episodes for t, _ in segs] + [t for *_, clones in episodes for _, t in clones] + [question]
    tok = fixture.tokenizer_for(texts)
    encode = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    decode = lambda ids: tok.decode(ids, skip_special_tokens=True)  # noqa: E731
    scored = {}
    last_clone = None
    for name, shape, right, segments, clone_texts in episodes:
        root, clones = fixture.loop_outputs(encode, task, question, str(truth), segments, clone_texts)
        value, _, _ = verl_loop.assign_rewards(reward.clone_accuracy_reward, root, clones, decode, markers, repair)
        scored.setdefault((name, shape), {"root_tokens": sum(root.response_mask), "clone_tokens": sum(len(c.response_ids) for c in clones)})
        scored[(name, shape)]["right" if right else "wrong"] = value
        if clones:
            last_clone = clones[0]
    # The clone's own run ends with the same call: its output as the root, no clones, and (as the
    # loop builds a clone's kwargs) no reward_model.
    own = verl_loop.output(last_clone.prompt_ids, last_clone.response_ids, last_clone.response_mask, {
        "request_id": uuid.uuid4().hex, "parent_request_id": uuid.uuid4().hex, "actor_role": "clone", "clone_depth": 1,
        "clone_label": "turn0_clone0", "data_source": f"selfcest_{task}", "extra_info": {"index": 0}}, 2)
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logging.getLogger().addHandler(handler)
    try:
        text = decode(verl_loop.masked_ids(own))
        result = reward.clone_accuracy_reward(verl_loop.strip_thinking(text, markers), own, [], root_text=text, clone_texts={})
        own_call = {"raised": None, "reward": result.get("reward") if isinstance(result, dict) else result}
    except Exception as exc:  # noqa: BLE001 - what the loop would log as "Reward function raised"
        own_call = {"raised": f"{type(exc).__name__}: {exc}", "reward": None}
    finally:
        logging.getLogger().removeHandler(handler)
    own_call["logged"] = log.getvalue()
    json.dump({"pairs": [{"format": n, "shape": s, **v} for (n, s), v in scored.items()], "clone_own_call": own_call}, sys.stdout)


if __name__ == "__main__":
    main()
