"""What SELFCEST's verl fork does around the clone reward, restated for the tests (no verl here).

Read from SuffixAutomata/SELFCEST at commit c37cc91e:
  verl/experimental/agent_loop/tool_agent_loop.py  _strip_thinking, _assign_rewards, run (the
      reward of each sample), _truncate_tool_response_text, _resolve_clone_label
  verl/experimental/agent_loop/agent_loop.py       _postprocess (padding, masks, non-tensor columns)
Each function says which part it restates; none of verl's code is copied.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

# clone.final_answer_markers when the config gives none (_load_clone_runtime_config).
DEFAULT_MARKERS = ["</think>", "Final Answer:", "final answer:", "Answer:", "Result:", "OUTPUT:"]


def strip_thinking(text: str, markers: list[str]) -> str:
    """_strip_thinking: after the last </think>, then after the first occurrence of each marker in turn; else the last non-empty line."""
    if not text:
        return ""
    kept = text.split("</think>")[-1] if "</think>" in text else text
    for marker in markers:
        if marker in kept:
            kept = kept.split(marker, 1)[-1]
    kept = kept.strip()
    if kept:
        return kept
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def masked_ids(output: Any) -> list[int]:
    """The ids of a response the model generated (response_mask 1), as _assign_rewards decodes them."""
    if output.response_mask and output.response_ids:
        return [t for t, m in zip(output.response_ids, output.response_mask) if m]
    return list(output.response_ids)


def assign_rewards(reward_fn: Callable[..., Any], root: Any, clones: list[Any], decode: Callable[[list[int]], str],
                   markers: list[str], json_repair_penalty: float = 0.0) -> tuple[float, dict[str, float] | None, dict[str, Any]]:
    """
    _assign_rewards: the reward function called as the loop calls it, its value read as the loop
    reads it, and the json-repair penalty taken off. Returns (root reward, clone rewards by
    request_id or None, the arguments it passed).
    """
    root_text = decode(masked_ids(root))
    root_answer = strip_thinking(root_text, markers)
    clone_texts = {}
    for clone in clones:
        rid = clone.extra_fields.get("request_id")
        if rid is not None:
            clone_texts[rid] = decode(masked_ids(clone))
    args = {"root_answer": root_answer, "root_text": root_text, "clone_texts": clone_texts}
    try:
        value = reward_fn(root_answer, root, clones, root_text=root_text, clone_texts=clone_texts)
    except TypeError:
        try:
            value = reward_fn(root_answer, root, clones)
        except Exception:  # noqa: BLE001 - the loop logs and scores 0
            value = 0.0
    except Exception:  # noqa: BLE001
        value = 0.0
    clone_rewards = None
    if isinstance(value, dict):
        raw = value.get("clone_rewards")
        if isinstance(raw, dict):
            clone_rewards = {}
            for k, v in raw.items():
                try:
                    clone_rewards[str(k)] = float(v)
                except Exception:  # noqa: BLE001
                    continue
        elif isinstance(raw, list):
            clone_rewards = {}
            if len(raw) == len(clones):
                for clone, v in zip(clones, raw):
                    rid = clone.extra_fields.get("request_id")
                    if rid is not None:
                        clone_rewards[str(rid)] = float(v)
        value = value["reward"] if "reward" in value else value.get("score", value)
    try:
        reward = float(value)
    except Exception:  # noqa: BLE001
        reward = 0.0
    repairs = int(root.extra_fields.get("tool_json_repair_count", 0) or 0)
    if json_repair_penalty and repairs:
        reward -= float(json_repair_penalty) * repairs
    return reward, clone_rewards, args


def sample_rewards(root: Any, clones: list[Any], reward: float, clone_rewards: dict[str, float] | None) -> None:
    """run(): the root gets the reward; a clone its entry in clone_rewards, else the root's."""
    root.reward_score = reward
    for clone in clones:
        mapped = clone_rewards.get(str(clone.extra_fields.get("request_id"))) if clone_rewards else None
        clone.reward_score = mapped if mapped is not None else reward


def truncate(text: str, limit: int | None, side: str) -> str:
    """_truncate_tool_response_text: left keeps the head, right the tail, anything else both ends."""
    if not text or not limit or len(text) <= limit:
        return text or ""
    if side == "left":
        return text[:limit] + "...(truncated)"
    if side == "right":
        return "(truncated)..." + text[-limit:]
    half = limit // 2
    return text[:half] + "...(truncated)..." + text[-half:]


def clone_label(name: str | None, turn: int, index: int) -> str:
    """_resolve_clone_label: the name the root gave the clone, else turn<T>_clone<I>."""
    return name or f"turn{turn}_clone{index}"


def output(prompt_ids: list[int], response_ids: list[int], response_mask: list[int], extra_fields: dict[str, Any], num_turns: int) -> Any:
    """An AgentLoopOutput as the reward function and _postprocess see it (attributes)."""
    return SimpleNamespace(prompt_ids=prompt_ids, response_ids=response_ids, response_mask=response_mask,
                           extra_fields=extra_fields, num_turns=num_turns, reward_score=None)


def postprocess(outputs: list[Any], prompt_length: int, response_length: int, pad_id: int, uids: list[str], backend: Any) -> Any:
    """
    _postprocess and the trainer's union: prompts left-padded, responses and masks right-padded,
    attention masks, rm scores at the last response token as token_level_scores, and every extra
    field as a numpy object column (plus uid and __num_turns__). `backend` makes the arrays:
    torch (as verl) or numpy.
    """
    import numpy as np

    n = len(outputs)
    prompts = [[pad_id] * (prompt_length - len(o.prompt_ids)) + list(o.prompt_ids) for o in outputs]
    responses = [list(o.response_ids) + [pad_id] * (response_length - len(o.response_ids)) for o in outputs]
    response_attention = [[1] * len(o.response_ids) + [0] * (response_length - len(o.response_ids)) for o in outputs]
    prompt_attention = [[0] * (prompt_length - len(o.prompt_ids)) + [1] * len(o.prompt_ids) for o in outputs]
    masks = [list(o.response_mask) + [0] * (response_length - len(o.response_mask)) for o in outputs]
    masks = [[m * a for m, a in zip(mr, ar)] for mr, ar in zip(masks, response_attention)]
    scores = [[0.0] * response_length for _ in outputs]
    for i, o in enumerate(outputs):
        scores[i][sum(response_attention[i]) - 1] = float(o.reward_score)
    tensor = backend.tensor if hasattr(backend, "tensor") else backend.array
    batch = {
        "prompts": tensor(prompts),
        "responses": tensor(responses),
        "response_mask": tensor(masks),
        "attention_mask": tensor([p + r for p, r in zip(prompt_attention, response_attention)]),
        "input_ids": tensor([p + r for p, r in zip(prompts, responses)]),
        "token_level_scores": tensor(scores),
    }
    non_tensor = {"__num_turns__": np.array([o.num_turns for o in outputs], dtype=np.int32)}
    keys = {k for o in outputs for k in o.extra_fields}
    for k in keys:
        column = np.empty(n, dtype=object)
        column[:] = [o.extra_fields.get(k) for o in outputs]
        non_tensor[k] = column
    uid = np.empty(n, dtype=object)
    uid[:] = uids
    non_tensor["uid"] = uid
    return SimpleNamespace(batch=batch, non_tensor_batch=non_tensor, meta_info={})
