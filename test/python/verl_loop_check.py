"""Scores four short episodes with an exported reward, called as the tool agent loop calls it.

Usage: verl_loop_check.py REWARD.py TASK MARKERS_JSON JSON_REPAIR_PENALTY  ->  prints {kind: {"reward", "clone_rewards"}}

Kinds: a right answer with one spawn (two clones that answer), a right answer without a spawn, and
the same two with a wrong answer. Texts as a chat model writes them (hermes <tool_call> JSON, the
tool response the loop injects, `Answer:` lines), tokenized by a real Hugging Face tokenizer
(verl_dump_fixture.tokenizer_for), masked, decoded and scored by verl_loop.assign_rewards.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import verl_dump_fixture as fixture  # noqa: E402
import verl_loop  # noqa: E402


def main():
    reward_path, task, markers, repair = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
    reward = fixture.load("check_reward", reward_path)
    if task == "arithmetic":
        question, truth, parts = "Calculate the value of 12+30+5.", "47", [("Compute 12+30", "42"), ("Compute 5", "5")]
    else:
        question, truth, parts = "What is v0 + v1? The values are in the chunks v0, v1.", "47", [("Find the value of v0", "42"), ("Find the value of v1", "5")]
    episodes = {}
    for right in (True, False):
        final = truth if right else str(int(truth) + 9)
        call = json.dumps({"name": "spawn_clone", "arguments": {"objectives": [o for o, _ in parts]}})
        lines = "\n".join(f"turn0_clone{i}: {v}" for i, (_, v) in enumerate(parts))
        episodes[f"{'right' if right else 'wrong'} with spawn"] = (
            [(f"<tool_call>\n{call}\n</tool_call><|im_end|>", 1), (f"\n<|im_start|>user\n<tool_response>\n{lines}\n</tool_response><|im_end|>\n<|im_start|>assistant\n", 0),
             (f"42+5={final}\nAnswer: {final}<|im_end|>", 1)],
            [(o, f"{v}\nAnswer: {v}<|im_end|>") for o, v in parts])
        episodes[f"{'right' if right else 'wrong'} without spawn"] = ([(f"12+30+5={final}\nAnswer: {final}<|im_end|>", 1)], [])
    texts = [t for segs, clones in episodes.values() for t, _ in segs] + [t for _, clones in episodes.values() for _, t in clones] + [question]
    tok = fixture.tokenizer_for(texts)
    encode = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    decode = lambda ids: tok.decode(ids, skip_special_tokens=True)  # noqa: E731
    out = {}
    for kind, (segments, clone_texts) in episodes.items():
        root, clones = fixture.loop_outputs(encode, task, question, truth, segments, clone_texts)
        value, clone_rewards, _ = verl_loop.assign_rewards(reward.clone_accuracy_reward, root, clones, decode, markers, repair)
        out[kind] = {"reward": value, "clone_rewards": list((clone_rewards or {}).values())}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
