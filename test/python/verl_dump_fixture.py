"""Writes a SELFCEST verl run's dump as the shipped hook writes it, from reference-shaped batches.

Usage: verl_dump_fixture.py SPEC.json  ->  prints {"episodes": [...]} (what each root should read back as)

SPEC: {"reward": exported selfcest_reward.py, "dump": selfcest_dump.py, "out": folder for <step>.jsonl,
       "task": "arithmetic" | "multihop", "steps", "prompts", "group", "seed",
       "markers": the loop's final_answer_markers, "json_repair_penalty", "summary_max_length",
       "summary_truncate_side", "backend": "torch" | "numpy", "log_parts": the reward's CONFIG logParts}

Episodes are model-like text from a real Hugging Face tokenizer (a byte-level BPE trained here on
the episodes' own text, chat-template tokens special, the tool tags plain added tokens as in Qwen):
spawn_clone calls as hermes <tool_call> JSON, the tool responses the loop injects (response_mask
0), clones with and without `Answer:`, names the root chose for its clones, two-round episodes,
roots that answer directly, wrong answers and no answers; the share of right answers grows with
the step. Each episode is scored by the exported reward called as the loop calls it
(verl_loop.assign_rewards), batched as the loop batches it (verl_loop.postprocess), and logged by
selfcest_dump.log_rollout_data on a trainer-shaped object (tokenizer, global_steps).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import random
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).parent))
import verl_loop  # noqa: E402

SYSTEM = ("You may call spawn_clone(objectives[], shared_context[]) to hand subtasks to clones of yourself. "
          "End with a line 'Answer: <integer>'.")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loop_outputs(encode, task, question, truth, segments, clone_texts):
    """
    A scripted episode as the loop hands it to the reward: the root's output (its segments
    encoded, generated ones masked 1 and injected ones 0) and one output per clone (objective,
    text), linked by request ids, under the ground truth `truth`.
    """
    ids, mask = [], []
    for text, generated in segments:
        piece = encode(text)
        ids += piece
        mask += [generated] * len(piece)
    root_id = uuid.uuid4().hex
    model = {"style": "rule", "ground_truth": truth}
    extra = {"request_id": root_id, "parent_request_id": None, "actor_role": "root", "clone_depth": 0, "data_source": f"selfcest_{task}",
             "reward_model": model, "extra_info": {"index": 0}}
    root = verl_loop.output(encode(chat(SYSTEM, question)), ids, mask, extra, 4)
    clones = []
    for i, (objective, text) in enumerate(clone_texts):
        piece = encode(text)
        clones.append(verl_loop.output(encode(clone_prompt(objective)), piece, [1] * len(piece), {
            "request_id": uuid.uuid4().hex, "parent_request_id": root_id, "actor_role": "clone", "clone_depth": 1,
            "clone_label": verl_loop.clone_label(None, 0, i), "clone_objective": objective, "reward_model": model}, 2))
    return root, clones


def chat(system, user):
    return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def clone_prompt(objective, context_text=None):
    user = objective if context_text is None else f"{objective}\n\n{context_text}"
    return chat("You are a helper clone spawned by a root agent. Denote a concise final answer with \"Answer:\".", user)


class Episode:
    """One root rollout: its segments (text, generated?) and its clones (objective, label, text)."""

    def __init__(self):
        self.prompt = ""
        self.segments = []  # (text, 1 generated | 0 injected)
        self.clones = []  # dicts: objective, label, text, answered
        self.answer = None
        self.repairs = 0


def arithmetic_problem(rng):
    n = rng.randint(3, 7)
    terms = [str(rng.randint(1, 60))]
    for _ in range(n - 1):
        terms.append(rng.choice("+-*"))
        terms.append(str(rng.randint(1, 60)))
    expr = "".join(terms)
    return expr, eval(expr)  # noqa: S307 - digits and + - * only


def split_terms(expr):
    """Top-level additive chunks with their signs: '3+4*5-6' -> ['3', '+4*5', '-6']."""
    chunks, cur = [], ""
    for ch in expr:
        if ch in "+-" and cur:
            chunks.append(cur)
            cur = ch
        else:
            cur += ch
    chunks.append(cur)
    return chunks


def rambling(rng, words=260):
    vocab = ["let", "me", "think", "about", "the", "terms", "again", "carefully", "and", "then", "sum", "them"]
    return " ".join(rng.choice(vocab) for _ in range(words))


def build_episode(rng, problem_rng, task, skill, cfg):
    """A rollout of the problem `problem_rng` draws (the same for a prompt's group), its behaviour drawn by `rng`."""
    ep = Episode()
    if task == "arithmetic":
        expr, truth = arithmetic_problem(problem_rng)
        ep.prompt = chat(SYSTEM, f"Calculate the value of {expr}.")
        chunks = split_terms(expr)
        parts = [(c.lstrip("+"), eval(c)) for c in chunks]  # noqa: S307
        objectives = [(f"Compute {c.lstrip('+')}", v) for c, v in parts]
        context = None
    else:
        values = {f"v{i}": problem_rng.randint(0, 99) for i in range(4)}
        keys = list(values)
        truth = sum(values.values())
        context = {k: f"{k} = {v}" for k, v in values.items()}
        ep.prompt = chat(SYSTEM, f"What is {' + '.join(keys)}? The values are in the chunks {', '.join(keys)}.")
        objectives = [(f"Find the value of {k}", values[k]) for k in keys]
    right = rng.random() < skill
    final = truth if right else truth + rng.choice([-3, -1, 1, 2, 10])
    style = rng.random()
    if style < 0.2:  # answers directly
        ep.segments.append((f"Working it out directly: {final}.\nAnswer: {final}<|im_end|>", 1))
        ep.answer = str(final)
        return ep, str(truth)
    if style < 0.27:  # runs out of room without an answer
        ep.segments.append((rambling(rng, 40) + "<|im_end|>", 1))
        return ep, str(truth)
    rounds = 2 if style > 0.85 and len(objectives) >= 3 else 1
    named = rng.random() < 0.3
    per_round = [objectives[: len(objectives) // 2 + 1], objectives[len(objectives) // 2 + 1:]] if rounds == 2 else [objectives]
    for turn, objs in enumerate(per_round):
        if not objs:
            continue
        labels = [verl_loop.clone_label(f"part_{chr(97 + turn)}{i}" if named else None, turn, i) for i in range(len(objs))]
        if named:
            args = {"objectives": [{"objective": o, "name": labels[i]} for i, (o, _) in enumerate(objs)]}
        else:
            args = {"objectives": [o for o, _ in objs]}
        if context is not None:
            args["shared_context"] = [o.split()[-1] for o, _ in objs]
        call = json.dumps({"name": "spawn_clone", "arguments": args})
        if rng.random() < 0.05:
            ep.repairs += 1  # the loop repaired this call's JSON
        ep.segments.append((("I will split this." if turn == 0 else "Now the rest.") + f"\n<tool_call>\n{call}\n</tool_call><|im_end|>", 1))
        lines = []
        for i, (objective, value) in enumerate(objs):
            fails = rng.random() < 0.12
            if fails:
                text = rambling(rng) + "<|im_end|>"
            else:
                shown = value if rng.random() < skill + 0.2 else value + 1
                text = f"{objective.split(' ', 2)[-1]} gives {shown}.\nAnswer: {shown}<|im_end|>"
            visible = verl_loop.strip_thinking(text.replace("<|im_end|>", ""), cfg["markers"])
            summary = verl_loop.truncate(visible, cfg["summary_max_length"], cfg["summary_truncate_side"])
            lines.append(f"{labels[i]}: {summary}")
            ctx = None if context is None else "Shared context (expanded from keys):\n\n" + f"[{objective.split()[-1]}]\n{context[objective.split()[-1]]}"
            ep.clones.append({"objective": objective, "label": labels[i], "text": text, "turn": turn, "prompt": clone_prompt(objective, ctx), "answered": not fails})
        ep.segments.append(("\n<|im_start|>user\n<tool_response>\n" + "\n".join(lines) + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n", 0))
    if rng.random() < 0.06:
        ep.segments.append(("I could not combine the parts.<|im_end|>", 1))
    else:
        ep.segments.append((f"Combining the parts gives {final}.\nAnswer: {final}<|im_end|>", 1))
        ep.answer = str(final)
    return ep, str(truth)


def tokenizer_for(texts):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")


def main():
    spec = json.loads(Path(sys.argv[1]).read_text())
    rng = random.Random(spec["seed"])
    reward = load("fixture_reward", spec["reward"])
    # A reward that does not write its parts into the samples (as the reference's own does not).
    reward.CONFIG["logParts"] = spec.get("log_parts", True)
    dump = load("fixture_dump", spec["dump"])
    backend = __import__(spec.get("backend", "numpy"))
    cfg = {"markers": spec["markers"], "summary_max_length": spec["summary_max_length"], "summary_truncate_side": spec["summary_truncate_side"]}

    steps = []
    for step in range(1, spec["steps"] + 1):
        skill = 0.25 + 0.6 * (step - 1) / max(1, spec["steps"] - 1)
        prompts = []
        for p in range(spec["prompts"]):
            problem_seed = rng.random()
            group = [build_episode(random.Random(rng.random()), random.Random(problem_seed), spec["task"], skill, cfg) for _ in range(spec["group"])]
            prompts.append((f"{step}-{p}", group))
        steps.append((step, prompts))

    texts = [seg for _, prompts in steps for _, group in prompts for ep, _ in group for seg in [ep.prompt] + [s for s, _ in ep.segments] + [c["text"] for c in ep.clones] + [c["prompt"] for c in ep.clones]]
    tok = tokenizer_for(texts)
    encode = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    decode = lambda ids: tok.decode(ids, skip_special_tokens=True)  # noqa: E731

    summary = []
    for step, prompts in steps:
        outputs, uids = [], []
        for index, (uid, group) in enumerate(prompts):
            for ep, truth in group:
                extra_info = {"index": index, "task": spec["task"]}
                reward_model = {"style": "rule", "ground_truth": truth}
                data_source = f"selfcest_{spec['task']}"
                response_ids, mask = [], []
                for text, generated in ep.segments:
                    ids = encode(text)
                    response_ids += ids
                    mask += [generated] * len(ids)
                root_id = uuid.uuid4().hex
                root_extra = {"clone_depth": 0, "clone_allow_tools": True, "reward_model": reward_model, "data_source": data_source,
                              "extra_info": extra_info, "sample_index": index, "turn_scores": [], "tool_rewards": [],
                              "parent_request_id": None, "actor_role": "root", "request_id": root_id}
                if ep.clones:
                    root_extra["tool_json_total_calls"] = len({c["turn"] for c in ep.clones})
                if ep.repairs:
                    root_extra["tool_json_repair_count"] = ep.repairs
                root = verl_loop.output(encode(ep.prompt), response_ids, mask, root_extra, 2 * len({c["turn"] for c in ep.clones}) + 2)
                clones = []
                for c in ep.clones:
                    ids = encode(c["text"])
                    clones.append(verl_loop.output(encode(c["prompt"]), ids, [1] * len(ids), {
                        "clone_depth": 1, "clone_allow_tools": False, "parent_request_id": root_id, "clone_label": c["label"],
                        "reward_model": reward_model, "data_source": data_source, "extra_info": extra_info, "turn_scores": [],
                        "tool_rewards": [], "actor_role": "clone", "request_id": uuid.uuid4().hex, "clone_id": uuid.uuid4().hex,
                        "clone_objective": c["objective"], "reward_extra_info": {}}, 2))
                value, clone_rewards, args = verl_loop.assign_rewards(reward.clone_accuracy_reward, root, clones, decode, spec["markers"], spec["json_repair_penalty"])
                verl_loop.sample_rewards(root, clones, value, clone_rewards)
                outputs += [root, *clones]
                uids += [uid] * (1 + len(clones))
                summary.append({
                    "request_id": root_id, "step": step, "truth": truth, "answer": ep.answer, "reward": root.reward_score,
                    "root_answer": args["root_answer"], "generated": sum(mask),
                    "clones": [{"request_id": cl.extra_fields["request_id"], "label": c["label"], "objective": c["objective"], "answered": c["answered"],
                                "reward": cl.reward_score, "generated": len(cl.response_ids)} for c, cl in zip(ep.clones, clones)],
                })
        longest_prompt = max(len(o.prompt_ids) for o in outputs)
        longest_response = max(len(o.response_ids) for o in outputs)
        batch = verl_loop.postprocess(outputs, longest_prompt + 3, longest_response + 5, tok.pad_token_id, uids, backend)
        trainer = SimpleNamespace(tokenizer=tok, global_steps=step)
        with contextlib.redirect_stdout(sys.stderr):
            dump.log_rollout_data(trainer, batch, {}, {}, spec["out"])
    json.dump({"episodes": summary}, sys.stdout)


if __name__ == "__main__":
    main()
