"""Calls exported selfcest_reward.py files on verl-shaped inputs (test/verl-reward.test.ts).

Usage: verl_reward_check.py CASES.json  ->  prints {"results": {case id: the function's dict}}

CASES.json: {"modules": {name: path of an exported reward file},
             "cases": [{"id", "module", "fn": "clone_accuracy_reward" | "compute_score", "args": {...}}]}
Root and clone outputs arrive as plain dicts and are passed as objects with attributes, as
verl's AgentLoopOutput is.
"""

import importlib.util
import json
import sys
from types import SimpleNamespace


def load(name, path):
    spec = importlib.util.spec_from_file_location(f"selfcest_reward_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def output(d):
    return SimpleNamespace(response_mask=d["response_mask"], prompt_ids=d.get("prompt_ids", []), extra_fields=d["extra_fields"])


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    modules = {name: load(name, path) for name, path in spec["modules"].items()}
    results = {}
    for case in spec["cases"]:
        m = modules[case["module"]]
        a = case["args"]
        if case["fn"] == "clone_accuracy_reward":
            r = m.clone_accuracy_reward(a["root_answer"], output(a["root_output"]), [output(c) for c in a["clone_rollouts"]],
                                        root_text=a.get("root_text"), clone_texts=a.get("clone_texts"))
        else:
            r = m.compute_score(a["data_source"], a["solution_str"], a["ground_truth"], a.get("extra_info"))
        results[case["id"]] = r
    json.dump({"results": results}, sys.stdout, allow_nan=False)


if __name__ == "__main__":
    main()
