"""SELFCEST Playground's episode reward, as a reward function for verl.

The same reward as the playground's trainer (src/core/rl/reward.ts, episodeReward):

    R = s - P(root generated; rootTau, rootRho, rootPmax)
          - max over rounds P(longest clone of the round; cloneTau, cloneRho, clonePmax)
          - max(0, callRate * calls - callFree)
          - budgetRate * sum over clones max(0, budget - generated)
          - tokenRate * (generated tokens, root and every clone)

with P(n; tau, rho, pmax) = 0 for n <= tau, else pmax * (1 - exp(-(n - tau) / rho)), and
s = 1 for an exact answer, else (with partialCredit) 0.2 / log2(2 + |A - B| / sqrt(2 + max(|A|, |B|))).
Each clone is credited r_clone = R, or 0 when a gate catches it (src/core/rl/advantage.ts, isGated).

Standard library only, deterministic, and every float is computed in the order of the
TypeScript, so the two agree to rounding (test/verl-reward.test.ts checks it on the project's
traces). The playground's export writes the run's settings into CONFIG below
(src/cli/verl/rewardFile.ts); nothing else in this file depends on the run.

CONFIG["recipe"] "reference" swaps in the reference's reward instead (SELFCEST's
examples/clone_agent_loop/clone_reward_2.py): the last integer of the loop's root answer (commas
ignored, 0.1 for a substring match), its partial credit 0.2 / log2(2 + |A - B| / sqrt(|2 + max(A, B)|)),
its penalties, the call penalty only where root_text is given, and a clone with no "answer:"
(any case) past formatMaxTokens tokens credited 0 (docs/FORMATS.md lists every difference).

How the tool agent loop calls it (verl/experimental/agent_loop/tool_agent_loop.py, _assign_rewards):
root_answer is the root's masked text after `</think>` and after the first final-answer marker
(`Answer:` …), stripped; root_text the whole masked text (what the model wrote, tool responses
left out); clone_texts each clone's masked text by request_id. The playground recipe reads the
root's answer from root_text (its last `Answer:` line, spawn calls removed) and, when that has
none, takes root_answer as the bare answer.

CONFIG["answers"] "last-integer" (what the export writes for a real model) reads the answer as the
reference does: the last integer of the root's `Answer:` line, else of the text the loop kept
after its final-answer markers, thousands separators dropped (`Answer: 1,234`, `The answer is
1234.`, `#### 1234`, `Answer: **1234**`); "exact" is the playground's own verdict (a canonical
integer, or the exact text).

The loop also calls clone_accuracy_reward at the end of each clone's own run, with no
reward_model; that call returns 0 quietly (the clone's reward comes from its root's call).

With CONFIG["logParts"], the reward's parts are also written into root_output.extra_fields
["selfcest_reward"] and each clone's extra_fields["selfcest_reward"]: the loop carries extra
fields into the training batch, where selfcest_dump.py logs them with each sample.

Entry points:
  clone_accuracy_reward(root_answer, root_output, clone_rollouts, root_text=None, clone_texts=None)
      the delegating episode (verl's clone reward interface); returns a dict with `reward`,
      `score` (= reward, as verl logs it), `clone_rewards` {request_id: r_clone} and the parts.
  compute_score(data_source, solution_str, ground_truth, extra_info=None)
      one sample without clones (the monolithic method); returns a dict with `score`.
"""

from __future__ import annotations

import math
import re
from typing import Any

# --- CONFIG (written by export-verl) ---
CONFIG = {
    "recipe": "playground",
    "task": "arithmetic",
    "rootTau": 64,
    "rootRho": 64,
    "rootPmax": 0.3,
    "cloneTau": 32,
    "cloneRho": 32,
    "clonePmax": 0.2,
    "callRate": 0.1,
    "callFree": 0.2,
    "budgetRate": 0,
    "tokenRate": 0,
    "partialCredit": True,
    "gating": True,
    "gateMode": "reference",
    "cloneMaxTokens": 128,
    "formatMaxTokens": 192,
    "answers": "exact",
    "logParts": True,
}
# --- end CONFIG ---

TASKS = ("arithmetic", "multihop")
GATE_MODES = ("reference", "protocol")
RECIPES = ("playground", "reference")
ANSWER_RULES = ("exact", "last-integer")

if CONFIG["task"] not in TASKS:
    raise ValueError(f"selfcest_reward: CONFIG task must be one of {TASKS} (got {CONFIG['task']!r})")
if CONFIG["recipe"] not in RECIPES:
    raise ValueError(f"selfcest_reward: CONFIG recipe must be one of {RECIPES} (got {CONFIG['recipe']!r})")
if CONFIG["answers"] not in ANSWER_RULES:
    raise ValueError(f"selfcest_reward: CONFIG answers must be one of {ANSWER_RULES} (got {CONFIG['answers']!r})")
if CONFIG["gateMode"] not in GATE_MODES:
    raise ValueError(f"selfcest_reward: CONFIG gateMode must be one of {GATE_MODES} (got {CONFIG['gateMode']!r})")

# The playground vocabulary's special tokens (src/core/tokenizer/vocab.ts, SPECIAL_TOKENS): each is
# one token, written `<name>` in text; every other character is one token.
SPECIAL_TOKENS = (
    "<pad>", "<eos>", "<root>", "<clone>", "<sep>", "<spawn>", "<join>", "<ret>", "<fail>",
    "<resume>", "<ans>", "<ctx>", "<b8>", "<b16>", "<b32>", "<b64>", "<b128>",
    "<unused0>", "<unused1>", "<unused2>", "<unk>",
)
_SPECIAL = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS))
# Its plain characters (CHAR_TOKENS): a text made of these and the special tokens is playground text.
CHAR_TOKENS = "0123456789abcdefghijklmnopqrstuvwxyz +-*()=?.,:#'_>\n"

ANSWER_MARKER = "Answer:"
TOOL_CALL = "<tool_call>"
# A spawn call the model wrote, closed or cut off by the length limit (its objectives are not the root's answer).
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>.*?(?:</tool_call>|$)", re.S)
# JS regexes: ASCII digits only, `$` at the very end (Python's `\d` and `$` are wider; fullmatch instead).
_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
_NATURAL = re.compile(r"(0|[1-9][0-9]*)")
_TURN = re.compile(r"turn(\d+)")


# ------------------------------------------------------------------------------------------
# Text


def playground_token_count(text: str) -> int:
    """Tokens of `text` in the playground tokenizer: a special token is one, any other character one."""
    return len(text) - sum(len(m.group(0)) - 1 for m in _SPECIAL.finditer(text))


def is_playground_text(text: str) -> bool:
    """Whether `text` is written in the playground's vocabulary (its token count then means something)."""
    return all(c in CHAR_TOKENS for c in _SPECIAL.sub("", text))


def _answer_block(text: str) -> str | None:
    """The playground's answer block: the last complete `<ans> ... <eos>`, as extractAnswer reads it."""
    end = text.rfind("<eos>")
    if end < 0:
        return None
    start = text.rfind("<ans>", 0, end)
    if start < 0:
        return None
    inner = text[start + len("<ans>"):end]
    return inner if inner and _SPECIAL.search(inner) is None else None


_TAGS = re.compile(r"<\|[^|]*\|>|</?[a-z_]+>")


def answer_text(text: str | None) -> str | None:
    """
    The answer a response gives (the same rule as the read-back, src/core/verl/readback.ts
    answerOf): the text after its last `Answer:` marker to the end of that line, chat-template
    tags (`<|im_end|>`, `</think>`) removed, stripped; else (playground text) its last answer
    block; else None.
    """
    if text is None:
        return None
    at = text.rfind(ANSWER_MARKER)
    if at >= 0:
        rest = text[at + len(ANSWER_MARKER):]
        end = rest.find("\n")
        answer = _TAGS.sub("", rest if end < 0 else rest[:end]).strip(_JS_SPACE)
    else:
        answer = _answer_block(text)
    return answer or None


def model_answer(root_answer: str | None, root_text: str | None) -> str | None:
    """
    The root's answer as the playground recipe reads it: from root_text (spawn calls removed) by
    answer_text; else from root_answer, the text the loop kept after the final-answer marker,
    as a bare answer (its first line, tags removed, stripped; answer_text where it still holds a marker).
    """
    if root_text is not None:
        answer = answer_text(_TOOL_CALL_BLOCK.sub("\n", root_text))
        if answer is not None:
            return answer
    if root_answer is None:
        return None
    if ANSWER_MARKER in root_answer or _answer_block(root_answer) is not None:
        return answer_text(root_answer)
    for line in root_answer.split("\n"):
        bare = _TAGS.sub("", line).strip(_JS_SPACE)
        if bare:
            return bare
    return None


def loose_answer(root_answer: str | None, root_text: str | None) -> str | None:
    """
    The answer text CONFIG answers "last-integer" reads its integer from: the root's `Answer:`
    line where it wrote one (model_answer), else the whole text the loop kept after its
    final-answer markers (`The answer is 42.`, `#### 42`), spawn calls left out.
    """
    if root_text is not None and answer_text(_TOOL_CALL_BLOCK.sub("\n", root_text)) is not None:
        return model_answer(root_answer, root_text)
    kept = root_answer if root_answer is not None else root_text
    return None if kept is None else _TOOL_CALL_BLOCK.sub("\n", kept)


def has_answer(text: str | None) -> bool:
    """Whether a clone's text holds an answer: an `Answer:` marker or a playground answer block."""
    return text is not None and (ANSWER_MARKER in text or _answer_block(text) is not None)


# ------------------------------------------------------------------------------------------
# Verdicts (src/core/tasks/*/index.ts, verify)

_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_JS_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_JS_RADIX = re.compile(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")


def js_number(text: str) -> float:
    """JavaScript's Number(text), which the verifiers apply to the truth."""
    s = text.strip(_JS_SPACE)
    if s == "":
        return 0.0
    if s in ("Infinity", "+Infinity"):
        return math.inf
    if s == "-Infinity":
        return -math.inf
    if _JS_DECIMAL.fullmatch(s):
        return float(s)
    if _JS_RADIX.fullmatch(s):
        try:
            return float(int(s, 0))
        except OverflowError:
            return math.inf
    return math.nan


def parse_integer_answer(answer: str | None) -> float | None:
    """parseIntegerAnswer: a canonical integer (optional minus, no leading zeros, not -0)."""
    if answer is None or _INTEGER.fullmatch(answer) is None or answer == "-0":
        return None
    return float(answer)  # as Number(): the nearest double, inf past the largest


def verdict(answer: str | None, truth: str) -> tuple[bool, float | None, float | None]:
    """(correct, value, truth value) for the configured task and answer rule."""
    if CONFIG["answers"] == "last-integer":
        # A real model's prose: the last integer, thousands separators dropped (the reference's reading).
        found, expected = _ref_int(answer or ""), _ref_int(truth)
        if found is None or expected is None:
            return False, None, js_number(truth)
        return found == expected, float(found), float(expected)
    if CONFIG["task"] == "arithmetic":
        value = parse_integer_answer(answer)
        return value is not None and answer == truth, value, js_number(truth)
    value = float(answer) if answer is not None and _NATURAL.fullmatch(answer) else None
    return answer == truth, value, js_number(truth)


# ------------------------------------------------------------------------------------------
# Reward (src/core/rl/reward.ts)


def _js_max(values: list[float]) -> float:
    """Math.max: NaN when any value is NaN (Python's max depends on the order)."""
    out = -math.inf
    for v in values:
        if math.isnan(v):
            return math.nan
        if v > out:
            out = v
    return out


def length_penalty(n: float, tau: float, rho: float, pmax: float) -> float:
    return 0.0 if n <= tau else pmax * (1 - math.exp(-(n - tau) / rho))


def partial_credit(a: float, b: float) -> float:
    try:
        return 0.2 / math.log2(2 + abs(a - b) / math.sqrt(2 + _js_max([abs(a), abs(b)])))
    except (ValueError, ZeroDivisionError, OverflowError):
        return math.nan


def episode_reward(correct: bool, value: float | None, truth_value: float | None, root_tokens: int,
                   longest_clone_per_round: list[int], calls: int, unused_budget: int, total_tokens: int) -> dict[str, float]:
    c = CONFIG
    score = 0.0
    if correct:
        score = 1.0
    elif c["partialCredit"] and value is not None and truth_value is not None:
        score = partial_credit(value, truth_value)
        if not math.isfinite(score):
            score = 0.0
    root_penalty = length_penalty(root_tokens, c["rootTau"], c["rootRho"], c["rootPmax"])
    clone_penalty = _js_max([0.0] + [length_penalty(n, c["cloneTau"], c["cloneRho"], c["clonePmax"]) for n in longest_clone_per_round])
    call_penalty = _js_max([0.0, c["callRate"] * calls - c["callFree"]])
    budget_penalty = c["budgetRate"] * unused_budget
    token_penalty = c["tokenRate"] * total_tokens
    return {
        "reward": score - root_penalty - clone_penalty - call_penalty - budget_penalty - token_penalty,
        "answer_score": score,
        "root_penalty": root_penalty,
        "clone_penalty": clone_penalty,
        "call_penalty": call_penalty,
        "budget_penalty": budget_penalty,
        "token_penalty": token_penalty,
    }


# ------------------------------------------------------------------------------------------
# verl's inputs


def _mask_tokens(mask: Any) -> int:
    """Generated tokens of a response: the sum of its 0/1 response_mask (list, numpy or torch)."""
    if mask is None:
        return 0
    if hasattr(mask, "tolist"):
        mask = mask.tolist()
    return sum(int(v) for v in mask)


def _truth(ground_truth: Any, where: str) -> str:
    if isinstance(ground_truth, (list, tuple)) and len(ground_truth) == 1:
        ground_truth = ground_truth[0]
    if ground_truth is None:
        raise ValueError(f"selfcest_reward: {where} is missing")
    if isinstance(ground_truth, bool) or not isinstance(ground_truth, (str, int)):
        raise TypeError(f"selfcest_reward: {where} must be a string or an integer (got {type(ground_truth).__name__})")
    return str(ground_truth)


def _is_gated(answered: bool, generated: int, budget: int, violation: Any) -> bool:
    """isGated for a clone: 'reference' = no answer and budget spent; 'protocol' = any violation."""
    if not CONFIG["gating"]:
        return False
    if CONFIG["gateMode"] == "protocol":
        return violation is not None
    return not answered and generated >= budget


def _stash(output: Any, parts: dict[str, Any]) -> None:
    """Parts of the reward into the sample's extra fields, which the loop carries into the batch (CONFIG logParts)."""
    extra = getattr(output, "extra_fields", None)
    if CONFIG["logParts"] and isinstance(extra, dict):
        extra["selfcest_reward"] = parts


def clone_accuracy_reward(root_answer: str | None, root_output: Any, clone_rollouts: list[Any],
                          root_text: str | None = None, clone_texts: dict[str, str] | None = None) -> dict[str, Any]:
    """
    The reward of one delegating episode and the credit of each clone, called as the tool agent
    loop calls it (module docstring). CONFIG recipe "reference" gives reference_clone_reward's.

    Rounds (for the clone penalty): clones grouped by the turn index of their `clone_label`
    (`turn<k>`); a clone without one (a name the model chose) is its own round. Calls: the
    `<tool_call>`s in root_text, else the rounds among the clones. A clone's budget is
    extra_fields["budget"], else CONFIG cloneMaxTokens; it answered when its text
    (clone_texts[request_id]) holds an answer or extra_fields["answer"] is set.
    """
    root_extra = getattr(root_output, "extra_fields", None) or {}
    if root_extra.get("reward_model") is None and (root_extra.get("clone_depth") or 0) > 0:
        # The loop also calls this at the end of each clone's own run, without a ground truth; the
        # clone's reward comes from its root's call (clone_rewards), so this one is quietly 0.
        return {"reward": 0.0, "score": 0.0, "clone_rewards": {}, "reason": "clone_own_call"}
    if CONFIG["recipe"] == "reference":
        return reference_clone_reward(root_answer, root_output, clone_rollouts, root_text, clone_texts)
    reward_model = root_extra.get("reward_model") or {}
    truth = _truth(reward_model.get("ground_truth"), 'root_output.extra_fields["reward_model"]["ground_truth"]')
    answer = loose_answer(root_answer, root_text) if CONFIG["answers"] == "last-integer" else model_answer(root_answer, root_text)
    correct, value, truth_value = verdict(answer, truth)
    root_tokens = _mask_tokens(getattr(root_output, "response_mask", None))

    texts = clone_texts or {}
    longest: dict[Any, int] = {}
    clones = []
    unused = 0
    clone_tokens = 0
    for i, clone in enumerate(clone_rollouts or []):
        extra = getattr(clone, "extra_fields", None) or {}
        request_id = extra.get("request_id")
        if request_id is None:
            raise ValueError(f'selfcest_reward: clone_rollouts[{i}].extra_fields["request_id"] is missing')
        label = extra.get("clone_label") or ""
        turn = _TURN.search(str(label))
        round_key: Any = ("turn", int(turn.group(1))) if turn else ("clone", i)
        generated = _mask_tokens(getattr(clone, "response_mask", None))
        budget = extra.get("budget")
        if budget is None:
            budget = CONFIG["cloneMaxTokens"]
        longest[round_key] = max(longest.get(round_key, 0), generated)
        unused += max(0, budget - generated)
        clone_tokens += generated
        answered = extra.get("answer") is not None or has_answer(texts.get(request_id))
        clones.append((clone, request_id, _is_gated(answered, generated, budget, extra.get("violation"))))

    calls = root_text.count(TOOL_CALL) if root_text is not None else len(longest)
    parts = episode_reward(correct, value, truth_value, root_tokens, list(longest.values()), calls, unused, root_tokens + clone_tokens)
    R = parts["reward"]
    clone_rewards: dict[Any, float] = {}
    for _, request_id, gated in clones:
        if request_id in clone_rewards:
            raise ValueError(f"selfcest_reward: two clones share the request_id {request_id!r}")
        clone_rewards[request_id] = 0.0 if gated else R
    result = {
        **parts,
        "score": R,
        "clone_rewards": clone_rewards,
        "correct": correct,
        "answer": answer,
        "root_generated_tokens": root_tokens,
        "calls": calls,
        "num_clones": len(clones),
        "gated_clones": sum(1 for _, _, gated in clones if gated),
        "ground_truth": truth,
    }
    _stash(root_output, {k: v for k, v in result.items() if k != "clone_rewards"})
    for clone, request_id, gated in clones:
        _stash(clone, {"reward": clone_rewards[request_id], "gated": gated})
    return result


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """
    The reward of one sample without clones (the monolithic method): no calls, no clones. The
    root's generated tokens are extra_info["response_tokens"], else solution_str's length in the
    playground tokenizer when it is playground text; a real model's text without a count has no
    known length, so it gets no root length penalty (root_generated_tokens None).
    """
    given = (extra_info or {}).get("response_tokens")
    text = solution_str or ""
    root_tokens = int(given) if given is not None else playground_token_count(text) if is_playground_text(text) else None
    known = 0 if root_tokens is None else root_tokens
    if CONFIG["recipe"] == "reference":
        return reference_score(text, ground_truth, known, root_tokens)
    truth = _truth(ground_truth, "ground_truth")
    answer = loose_answer(None, solution_str) if CONFIG["answers"] == "last-integer" else answer_text(solution_str)
    correct, value, truth_value = verdict(answer, truth)
    parts = episode_reward(correct, value, truth_value, known, [], 0, 0, known)
    return {
        **parts,
        "score": parts["reward"],
        "correct": correct,
        "root_generated_tokens": root_tokens,
        "calls": 0,
        "num_clones": 0,
        "gated_clones": 0,
        "ground_truth": truth,
    }


# ------------------------------------------------------------------------------------------
# The reference's recipe (SELFCEST's examples/clone_agent_loop/clone_reward_2.py, commit c37cc91e)

_REF_INT = re.compile(r"-?\d[\d,]*")
_REF_TURN = re.compile(r"turn(\d+)")


def _ref_int(text: str) -> int | None:
    """The last integer of `text`, commas dropped (the reference's _extract_int)."""
    found = _REF_INT.findall(text) if text else []
    if not found:
        return None
    try:
        return int(found[-1].replace(",", ""))
    except (TypeError, ValueError):
        return None


def _ref_penalty(tokens: int, threshold: int, ramp: int, pmax: float) -> float:
    if tokens <= threshold:
        return 0.0
    if ramp <= 0:
        return float(pmax)
    return float(pmax) * (1.0 - math.exp(-float(tokens - threshold) / float(ramp)))


def _ref_answer_score(root_answer: str, truth: Any) -> tuple[float, bool]:
    """(score, correct): exact last integer 1, else the reference's partial credit (if on); without integers 0.1 for a substring."""
    a, b = _ref_int(str(root_answer)), _ref_int(str(truth))
    if a is not None and b is not None:
        if a == b:
            return 1.0, True
        if not CONFIG["partialCredit"]:
            return 0.0, False
        return 0.2 / math.log2(2 + abs(a - b) / abs(2 + max(a, b)) ** 0.5), False
    answer_norm = str(root_answer).strip().replace(",", "")
    truth_norm = str(truth).strip().replace(",", "")
    return (0.1 if truth_norm and truth_norm in answer_norm else 0.0), False


def _ref_settings(root_extra: dict[str, Any], reward_model: dict[str, Any], key: str, default: dict[str, Any]) -> dict[str, Any]:
    """A penalty's settings: the row's own (extra fields, then reward_model), as the reference reads them; else CONFIG's."""
    return root_extra.get(key) or reward_model.get(key) or default


def reference_clone_reward(root_answer: str | None, root_output: Any, clone_rollouts: list[Any],
                           root_text: str | None = None, clone_texts: dict[str, str] | None = None) -> dict[str, Any]:
    """
    clone_reward_2.py's clone_accuracy_reward, with this file's CONFIG for its constants. Where
    the reference raises (2 + max(A, B) = 0, an integer past the largest float), the loop
    catches it and scores 0 for root and clones: so does this, saying why in `reference_error`.
    """
    root_extra = getattr(root_output, "extra_fields", None) or {}
    reward_model = root_extra.get("reward_model") or {}
    truth = reward_model.get("ground_truth")
    if isinstance(truth, list) and len(truth) == 1:
        truth = truth[0]
    if truth is None:
        return {"reward": 0.0, "clone_rewards": [], "reason": "missing_ground_truth"}
    if root_answer is None:
        root_answer = model_answer(None, root_text) or ""
    try:
        score, correct = _ref_answer_score(root_answer, truth)
    except (ZeroDivisionError, OverflowError, ValueError) as e:
        result = {"reward": 0.0, "score": 0.0, "clone_rewards": {}, "num_clones": len(clone_rollouts or []), "ground_truth": truth,
                  "recipe": "reference", "reference_error": f"{type(e).__name__}: {e}"}
        _stash(root_output, {k: v for k, v in result.items() if k != "clone_rewards"})
        return result
    answer_score = score
    c = CONFIG
    root_cfg = _ref_settings(root_extra, reward_model, "root_token_penalty", {"threshold": c["rootTau"], "ramp": c["rootRho"], "max_penalty": c["rootPmax"]})
    root_tokens = _mask_tokens(getattr(root_output, "response_mask", None))
    root_penalty = _ref_penalty(root_tokens, int(root_cfg.get("threshold", c["rootTau"])), int(root_cfg.get("ramp", c["rootRho"])), float(root_cfg.get("max_penalty", c["rootPmax"])))

    texts = clone_texts or {}
    clone_cfg = _ref_settings(root_extra, reward_model, "clone_token_penalty", {"threshold": c["cloneTau"], "ramp": c["cloneRho"], "max_penalty": c["clonePmax"]})
    format_cfg = _ref_settings(root_extra, reward_model, "clone_answer_format_penalty",
                               {"max_tokens": c["formatMaxTokens"], "penalty": 1.0 if c["gating"] else 0.0, "answer_prefix": ANSWER_MARKER})
    longest: dict[Any, int] = {}
    clones = []
    for clone in clone_rollouts or []:
        extra = getattr(clone, "extra_fields", None) or {}
        request_id = extra.get("request_id")
        label = extra.get("clone_label") or extra.get("clone_id") or ""
        turn = _REF_TURN.search(label) if label else None
        key = int(turn.group(1)) if turn else label or request_id or id(clone)
        tokens = _mask_tokens(getattr(clone, "response_mask", None))
        if tokens > longest.get(key, 0):
            longest[key] = tokens
        clones.append((clone, request_id, tokens))
    clone_max = float(clone_cfg.get("max_penalty", c["clonePmax"]))
    clone_penalty = 0.0
    if clone_max > 0 and longest:
        threshold, ramp = int(clone_cfg.get("threshold", c["cloneTau"])), int(clone_cfg.get("ramp", c["cloneRho"]))
        clone_penalty = max(_ref_penalty(int(n), threshold, ramp, clone_max) for n in longest.values())
    calls = root_text.count(TOOL_CALL) if root_text else 0
    call_penalty = max(0.0, calls * c["callRate"] - c["callFree"]) if root_text else 0.0
    score = score - root_penalty - clone_penalty - call_penalty

    format_on = float(format_cfg.get("penalty", 0.0)) > 0
    format_max = int(format_cfg.get("max_tokens", c["formatMaxTokens"]))
    prefix = str(format_cfg.get("answer_prefix", ANSWER_MARKER)).lower()
    clone_rewards: dict[Any, float] = {}
    gated_flags = []
    for clone, request_id, tokens in clones:
        gated = format_on and request_id in texts and prefix not in (texts[request_id] or "").lower() and tokens > format_max
        gated_flags.append(gated)
        if request_id is not None:
            clone_rewards[request_id] = 0.0 if gated else score
    result = {
        "reward": score,
        "clone_rewards": clone_rewards,
        "score": score,
        "num_clones": len(clones),
        "ground_truth": truth,
        "recipe": "reference",
        "answer_score": answer_score,
        "root_penalty": root_penalty,
        "clone_penalty": clone_penalty,
        "call_penalty": call_penalty,
        "budget_penalty": 0.0,
        "token_penalty": 0.0,
        "correct": correct,
        "root_generated_tokens": root_tokens,
        "calls": calls,
        "gated_clones": sum(gated_flags),
    }
    _stash(root_output, {k: v for k, v in result.items() if k != "clone_rewards"})
    for (clone, _, _), gated in zip(clones, gated_flags):
        _stash(clone, {"reward": 0.0 if gated else score, "gated": gated})
    return result


def reference_score(solution_str: str, ground_truth: Any, root_tokens: int, counted: int | None) -> dict[str, Any]:
    """One sample without clones under the reference's recipe: its answer score less its root length penalty."""
    truth = ground_truth[0] if isinstance(ground_truth, list) and len(ground_truth) == 1 else ground_truth
    if truth is None:
        return {"score": 0.0, "reward": 0.0, "reason": "missing_ground_truth"}
    answer = model_answer(None, solution_str) or solution_str
    try:
        answer_score, correct = _ref_answer_score(answer, truth)
    except (ZeroDivisionError, OverflowError, ValueError) as e:
        return {"score": 0.0, "reward": 0.0, "recipe": "reference", "reference_error": f"{type(e).__name__}: {e}"}
    c = CONFIG
    root_penalty = _ref_penalty(root_tokens, c["rootTau"], c["rootRho"], c["rootPmax"])
    reward = answer_score - root_penalty
    return {"reward": reward, "score": reward, "answer_score": answer_score, "root_penalty": root_penalty, "clone_penalty": 0.0,
            "call_penalty": 0.0, "budget_penalty": 0.0, "token_penalty": 0.0, "correct": correct, "root_generated_tokens": counted,
            "calls": 0, "num_clones": 0, "gated_clones": 0, "ground_truth": truth, "recipe": "reference"}


__all__ = ["CONFIG", "clone_accuracy_reward", "compute_score", "answer_text", "model_answer", "playground_token_count", "reference_clone_reward"]
