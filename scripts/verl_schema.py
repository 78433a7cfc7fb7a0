"""Writes the key paths and value types of SELFCEST's verl fork config (test/fixtures/verl-config-schema.json).

Usage: python3 scripts/verl_schema.py GIT_DIR COMMIT > test/fixtures/verl-config-schema.json

GIT_DIR is a clone of SuffixAutomata/SELFCEST (for example the one `fetch` mirrors). Read at
COMMIT: verl/trainer/config/_generated_ppo_trainer.yaml (every key verl's ppo_trainer defines,
with its default's type) and examples/clone_agent_loop/configs/*.yaml (the keys the fork's own
clone recipes add, such as rollout.multi_turn.clone.*). test/verl-export.test.ts checks every key
an export writes against this, so the check runs without verl installed.
"""

import json
import subprocess
import sys

import yaml


def show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True).stdout


def kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        # An interpolation (${...}) takes its type from the key it names: any.
        return "null" if v.startswith("${") else "str"
    if isinstance(v, list):
        return "list"
    return "map"


def flatten(node, prefix, out):
    for k, v in node.items():
        path = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.setdefault(path, "map")
            flatten(v, path, out)
        else:
            # A key first seen as null keeps its first non-null type.
            if out.get(path) in (None, "null"):
                out[path] = kind(v)


def main():
    git_dir, commit = sys.argv[1], sys.argv[2]
    full = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit], check=True, capture_output=True, text=True).stdout.strip()
    base_file = "verl/trainer/config/_generated_ppo_trainer.yaml"
    base: dict = {}
    flatten(yaml.safe_load(show(git_dir, full, base_file)), "", base)
    listing = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "--name-only", full, "examples/clone_agent_loop/configs/"],
                             check=True, capture_output=True, text=True).stdout.split()
    recipes: dict = {}
    for f in sorted(listing):
        if f.endswith(".yaml"):
            flatten(yaml.safe_load(show(git_dir, full, f)), "", recipes)
    added = {k: v for k, v in recipes.items() if k not in base and not k.startswith(("hydra", "defaults"))}
    json.dump({"repository": "SuffixAutomata/SELFCEST", "commit": full, "ppo_trainer": base_file, "ppo_trainer_keys": base,
               "clone_recipes": [f for f in sorted(listing) if f.endswith(".yaml")], "clone_recipe_keys": added}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
