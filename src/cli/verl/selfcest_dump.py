"""Log every root and clone sample of a SELFCEST verl run: one JSONL row each, one file per step.

Run it in place of `python -m verl.trainer.main_ppo`, with the same arguments:

    python selfcest_dump.py --config-path DIR --config-name config [overrides ...]

It starts verl's main_ppo unchanged but for one method of the trainer, RayPPOTrainer.
_log_rollout_data, which verl calls after each update when `trainer.rollout_data_dir` is set (the
export's config.yaml sets it to DIR/rollouts). verl's own method writes `<step>.jsonl` with
input, output, gts, score and step only: it drops the fields that tie a clone to its root. This
one writes, for every sample of the batch, root and clone alike, verl's five fields and

    request_id, parent_request_id, clone_label, actor_role, clone_depth, clone_objective,
    uid, sample_index, data_source, response_mask_tokens (the sum of the sample's response_mask:
    the tokens the model generated), response_tokens (its response length, tool responses
    included), num_turns, tool_json_repair_count, reward_extra_info (the reward's parts)

read from the batch's own fields (batch.batch["response_mask"], batch.non_tensor_batch[...]),
where the tool agent loop put them (agent_loop.py, _postprocess: every extra field of a sample
becomes a non-tensor column). `npm run cli -- import-verl --in DIR/rollouts` reads the files.

Why the trainer's logger and not a wrapper around the reward function: the reward runs inside the
agent-loop workers, per episode, before the trainer's step is known and before the loop subtracts
its json-repair penalty; the logger sees the whole batch with its step, the final score of each
sample and the decoded texts. The reward's parts reach the batch because selfcest_reward.py
writes them into each sample's extra fields (its CONFIG logParts); a reward that does not
(the reference's clone_reward_2.py) leaves reward_extra_info out, and the reader shows the parts
as missing.

The patch is applied inside verl's TaskRunner, a Ray actor, so it reaches the process that owns
the trainer: main_ppo.run_ppo takes the TaskRunner class to start, and this file passes a
subclass whose run() installs the patch first. Standard library only besides verl itself.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

# Non-tensor columns written as they are (when the batch has them), under the same names.
FIELDS = ("request_id", "parent_request_id", "clone_label", "actor_role", "clone_depth", "clone_objective", "uid",
          "sample_index", "data_source", "tool_json_repair_count", "reward_debug_json_repair_penalty")
# What selfcest_reward.py writes into a sample's extra fields.
PARTS_FIELD = "selfcest_reward"


def _plain(v: Any) -> Any:
    """A JSON value for numpy and torch scalars and arrays, dicts and lists of them; other objects as text."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "tolist"):  # numpy arrays and scalars, torch tensors
        return _plain(v.tolist())
    if hasattr(v, "item"):
        return _plain(v.item())
    return str(v)


def _row_sum(tensor: Any, i: int) -> float:
    """Sum of row i of a [batch, length] torch tensor or numpy array."""
    total = tensor[i].sum()
    return total.item() if hasattr(total, "item") else total


def _column(batch: Any, key: str, n: int) -> list[Any]:
    values = batch.non_tensor_batch.get(key)
    return [None] * n if values is None else [values[i] for i in range(n)]


def rows_of(batch: Any, tokenizer: Any, step: int, reward_extra_infos: dict[str, list[Any]] | None = None) -> list[dict[str, Any]]:
    """The rows of one step's batch: verl's DataProto (batch: tensors, non_tensor_batch: numpy object arrays)."""
    prompts = batch.batch["prompts"]
    responses = batch.batch["responses"]
    n = len(prompts)
    inputs = tokenizer.batch_decode(prompts, skip_special_tokens=True)
    outputs = tokenizer.batch_decode(responses, skip_special_tokens=True)
    mask = batch.batch["response_mask"]
    attention = batch.batch.get("attention_mask") if hasattr(batch.batch, "get") else None
    scores = batch.batch["token_level_scores"]
    columns = {k: _column(batch, k, n) for k in FIELDS}
    reward_models = _column(batch, "reward_model", n)
    parts = _column(batch, PARTS_FIELD, n)
    turns = _column(batch, "__num_turns__", n)
    prompt_length = prompts.shape[-1]
    rows = []
    for i in range(n):
        rm = reward_models[i] if isinstance(reward_models[i], dict) else {}
        row: dict[str, Any] = {
            "input": inputs[i],
            "output": outputs[i],
            "gts": _plain(rm.get("ground_truth")),
            "score": float(_row_sum(scores, i)),
            "step": int(step),
        }
        for k in FIELDS:
            if columns[k][i] is not None:
                row[k] = _plain(columns[k][i])
        row["response_mask_tokens"] = int(_row_sum(mask, i))
        if attention is not None:
            row["response_tokens"] = int(_plain(attention[i][prompt_length:].sum()))
        if turns[i] is not None:
            row["num_turns"] = _plain(turns[i])
        if isinstance(parts[i], dict):
            row["reward_extra_info"] = _plain(parts[i])
        for k, v in (reward_extra_infos or {}).items():
            if len(v) == n and k not in row:
                row[k] = _plain(v[i])
        rows.append(row)
    return rows


def write_step(rows: list[dict[str, Any]], rollout_data_dir: str, step: int) -> str:
    """`<step>.jsonl` under the folder, written to a temporary name and renamed (a killed run leaves no half file)."""
    os.makedirs(rollout_data_dir, exist_ok=True)
    path = os.path.join(rollout_data_dir, f"{step}.jsonl")
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, allow_nan=False))
            f.write("\n")
    os.replace(tmp, path)
    return path


def log_rollout_data(self: Any, batch: Any, reward_extra_infos_dict: dict[str, list[Any]], timing_raw: dict[str, float], rollout_data_dir: str) -> None:
    """RayPPOTrainer._log_rollout_data's replacement (same signature): every sample, roots and clones, with their links."""
    import time

    started = time.perf_counter()
    path = write_step(rows_of(batch, self.tokenizer, self.global_steps, reward_extra_infos_dict), rollout_data_dir, self.global_steps)
    timing_raw["dump_rollout_generations"] = timing_raw.get("dump_rollout_generations", 0.0) + time.perf_counter() - started
    print(f"selfcest_dump: wrote {path}")


def install() -> None:
    """Patch verl's trainer in this process."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    RayPPOTrainer._log_rollout_data = log_rollout_data


def main() -> None:
    """verl's main_ppo (its Hydra command line), its TaskRunner patched before the trainer starts."""
    import ray
    from verl.trainer import main_ppo

    stock_run_ppo = main_ppo.run_ppo

    class DumpingTaskRunner(main_ppo.TaskRunner):
        def run(self, config):
            install()
            return super().run(config)

    def run_ppo(config, task_runner_class=None):
        if not config.trainer.get("rollout_data_dir"):
            raise SystemExit("selfcest_dump: trainer.rollout_data_dir is not set: give trainer.rollout_data_dir=<folder> (the export's config.yaml sets it)")
        return stock_run_ppo(config, task_runner_class=task_runner_class or ray.remote(num_cpus=1)(DumpingTaskRunner))

    main_ppo.run_ppo = run_ppo
    main_ppo.main()


if __name__ == "__main__":
    main()
