"""Calls exported selfcest_reward.py files on verl-shaped inputs (test/verl-reward.test.ts).

Usage: verl_reward_check.py CASES.json  ->  prints {"results": {case id: the function's dict}}

CASES.json: {"modules": {name: path of an exported reward file},
             "cases": [{"id", "module", "fn": "clone_accuracy_reward" | "compute_score", "args": {...}}]}
Root and clone outputs arrive as plain dicts and are passed as objects with attributes, as
verl's AgentLoopOutput is. A clone_accuracy_reward case gives the root's masked text
(`loop_text`) and the loop's final-answer markers; root_answer is derived from them as the tool
agent loop derives it (verl_loop.strip_thinking), and root_text and clone_texts are passed by
keyword as the loop passes them.
"""

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).parent))
import verl_loop  # noqa: E402


def load(name, path):
    spec = importlib.util.spec_from_file_location(f"selfcest_reward_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def output(d):
    return SimpleNamespace(response_ids=d.get("response_ids", []), response_mask=d["response_mask"], prompt_ids=d.get("prompt_ids", []),
                           extra_fields=d["extra_fields"])


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    modules = {name: load(name, path) for name, path in spec["modules"].items()}
    results = {}
    for case in spec["cases"]:
        m = modules[case["module"]]
        a = case["args"]
        if case["fn"] == "clone_accuracy_reward":
            root_answer = verl_loop.strip_thinking(a["loop_text"], a["markers"])
            root, clones = output(a["root_output"]), [output(c) for c in a["clone_rollouts"]]
            r = m.clone_accuracy_reward(root_answer, root, clones, root_text=a["root_text"], clone_texts=a["clone_texts"])
            r = {k: v for k, v in r.items() if k != "answer"}
        else:
            r = m.compute_score(a["data_source"], a["solution_str"], a["ground_truth"], a.get("extra_info"))
        results[case["id"]] = r
    json.dump({"results": results}, sys.stdout, allow_nan=False)


if __name__ == "__main__":
    main()
