"""An independent lookup probe in PyTorch (issue 12): the drills of src/core/eval/lookupProbe.ts,
written again from their description, on a GPT-2 of the project's preset shapes, trained from
fresh weights with AdamW. It runs far faster than tfjs wasm on this machine, so it maps which
representations learn; the project's own `probe-lookup` then confirms the chosen ones.

    /usr/bin/python3 test/python/lookup_probe.py --preset small --size 3 --names 2 --layout last --steps 2000

Prints one JSON line per held-out reading and a last line with steps to target. Drill
distribution: distinct names; a right-hand side is a number 0-99, or 40% of the time another
name; half the drills ask a name the chunk assigns, half one it does not (half of those, when
there is one, a name that appears only on a right-hand side). Vocabulary: the project's ids are
not needed, only a consistent one (special tokens, then one token per character).
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SPECIAL = ["<pad>", "<clone>", "<sep>", "<ans>", "<eos>"]
CHARS = list("0123456789abcdefghijklmnopqrstuvwxyz =?.")
VOCAB = SPECIAL + CHARS
ID = {t: i for i, t in enumerate(VOCAB)}
# The project's presets, and two shapes beside `small` for the model lever (not presets yet).
PRESETS = {"tiny": (2, 64, 4), "small": (4, 128, 4), "small-8h": (4, 128, 8), "deep": (8, 128, 4)}
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def encode(text):
    out, i = [], 0
    while i < len(text):
        if text[i] == "<":
            j = text.index(">", i)
            out.append(ID[text[i : j + 1]])
            i = j + 1
        else:
            out.append(ID[text[i]])
            i += 1
    return out


RHS_NAMES = 0.4  # --rhs-names: how often a right-hand side is another name
SEP = "="  # --sep: what stands between a name and its value in the chunk (and the restated lookup)
MAX_VALUE = 99  # --max-value: numbers on a right-hand side are 0..MAX_VALUE


def drill(rng, size, names, layout, found, filler=0, fixed=False):
    used = {"no"} if names == 2 else set()

    def fresh():
        while True:
            v = "".join(rng.choice(LETTERS) for _ in range(names))
            if v not in used:
                used.add(v)
                return v

    assigned = [fresh() for _ in range(size)]
    rhs_names, rhs = [], []
    for _ in assigned:
        if rng.random() < RHS_NAMES:
            v = fresh()
            rhs_names.append(v)
            rhs.append(v)
        else:
            # Fixed width: every value two digits, so every assignment is 6 characters.
            rhs.append(str(rng.randint(10, 99) if fixed else rng.randint(0, MAX_VALUE)))
    parts = [f"{v}{SEP}{r}." for v, r in zip(assigned, rhs)]
    # Noise (--noise): NOISE characters of #*_+ in words of 2-5 among the assignments, as the
    # multihop task's filler option writes them (no letter or digit, so never a name or a value).
    left = NOISE
    while left > 0:
        n = min(left, rng.randint(2, 5))
        parts.insert(rng.randint(0, len(parts)), "".join(rng.choice("#*_+") for _ in range(n)))
        left -= n
    # Filler: words of 3-6 letters (never a name, never before '='), placed among the assignments.
    for _ in range(filler):
        parts.insert(rng.randint(0, len(parts)), "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 6))))
    chunk = " ".join(parts)
    if found:
        i = rng.randrange(size)
        q, a = assigned[i], rhs[i]
    else:
        q = rng.choice(rhs_names) if rhs_names and rng.random() < 0.5 else fresh()
        a = "none"
    prompt = f"<clone>{chunk} {q}?<sep>" if layout == "last" else f"<clone>{q}? {chunk}<sep>"
    return prompt, a


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.h = h

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.h)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        y = att.softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, n_layer, d, h, n_pos=256):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(len(VOCAB), d), nn.Embedding(n_pos, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.T


COT = False
SHORT_MISS = False  # --short-miss
NOISE = 0  # --noise


def target(prompt, answer):
    """What the clone writes: the answer block, or with --cot first the lookup restated
    (`=q=value`, as the monolithic teacher's chain writes each hop) and then the block."""
    if not COT:
        return f"<ans>{answer}<eos>"
    q = prompt.split("<clone>")[1].split("?")[0].split(" ")[-1] if prompt.endswith("?<sep>") else prompt.split("<clone>")[1].split("?")[0]
    # With the name right before its value (--sep ''), the restatement is the name then the value:
    # the token before the value is the asked name itself, as in the chunk.
    if SEP == "":
        # --short-miss: a miss restates the name alone (`q<ans>none<eos>`), as the multihop task's clone does.
        return f"{q}{'' if SHORT_MISS and answer == 'none' else answer}<ans>{answer}<eos>"
    return f"={q}{SEP}{answer}<ans>{answer}<eos>"


def recall_drill(rng, size, names, fixed=False):
    """A recall row (--recall): the chunk, then every assignment restated in a shuffled order
    (`=v=rhs` each). Each right-hand side is a lookup, so one row carries `size` of them; the
    clone's single question carries one. A training aid, never a clone context of an episode."""
    prompt, _ = drill(rng, size, names, "last", True, 0, fixed)
    chunk = prompt[len("<clone>") :].rsplit(" ", 1)[0]
    pairs = [part.rstrip(".").split("=") for part in chunk.split(" ")]
    rng.shuffle(pairs)
    return f"<clone>{chunk}<sep>", "!" + "".join(f"={v}={r}" for v, r in pairs) + "<eos>"


def query_drill(rng, size, names, queries, miss, fixed=False):
    """A dense row (--queries): the clone's exchange repeated over one chunk. The chunk and a
    first question as the clone gets them (`<clone>chunk q?<sep>`), its answer block, then
    `queries - 1` more questions, each `q?<sep>` and its block. One row carries `queries`
    lookups in the very format the readings ask; a training aid, the clone's context asks once."""
    prompt, _ = drill(rng, size, names, "last", True, 0, fixed)
    chunk = prompt[len("<clone>") :].rsplit(" ", 1)[0]
    pairs = [part.rstrip(".").split("=") for part in chunk.split(" ")]
    taken = {v for v, _ in pairs} | {r for _, r in pairs} | {"no"}
    asked = []
    for _ in range(queries):
        if rng.random() < miss:
            while True:
                q = "".join(rng.choice(LETTERS) for _ in range(names))
                if q not in taken:
                    break
            asked.append((q, "none"))
        else:
            asked.append(tuple(rng.choice(pairs)))
    q0, a0 = asked[0]
    rest = "".join(f"{q}?<sep><ans>{a}<eos>" for q, a in asked[1:])
    return f"<clone>{chunk} {q0}?<sep>", f"!<ans>{a0}<eos>{rest}"


def batch_of(drills, prompt_weight=0.0):
    # An answer starting with "!" is the whole target text (a recall row).
    rows = [(encode(p), encode(a[1:] if a.startswith("!") else target(p, a))) for p, a in drills]
    width = max(len(p) + len(t) for p, t in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    tgt = torch.full((len(rows), width), -100, dtype=torch.long)
    w = torch.zeros(len(rows), width)
    for i, (p, t) in enumerate(rows):
        seq = p + t
        ids[i, : len(seq)] = torch.tensor(seq)
        # Predict each answer token from the one before it (weight 1) and, with prompt_weight,
        # each prompt token after the first from the ones before it.
        for j in range(1, len(seq)):
            tgt[i, j - 1] = seq[j]
            w[i, j - 1] = 1.0 if j >= len(p) else prompt_weight
    tgt[w == 0] = -100
    return ids, tgt, w


@torch.no_grad()
def row_ok(model, drills):
    ids, tgt, w = batch_of(drills)
    pred = model(ids).argmax(-1)
    mask = tgt != -100
    return ((pred == tgt) | ~mask).all(dim=1)


def accuracy(model, drills):
    return row_ok(model, drills).float().mean().item()


def found_breakdown(model, drills):
    """Finds by where the asked assignment stands in the chunk (0 = first) and by what its
    right-hand side is (a number or a name): which lookups a plateau gets right."""
    ok = row_ok(model, drills).tolist()
    by_pos, by_kind = {}, {}
    for (prompt, answer), good in zip(drills, ok):
        body = prompt[len("<clone>") :].split("<sep>")[0]
        q = body.rsplit(" ", 1)[1].rstrip("?") if prompt.endswith("?<sep>") else body.split("?")[0]
        names = [part[: len(part.split(SEP)[0]) if SEP else 1] for part in body.split(" ") if part.endswith(".")]
        pos = names.index(q) if q in names else -1
        kind = "number" if answer.isdigit() else "name"
        for table, key in ((by_pos, str(pos)), (by_kind, kind)):
            n, k = table.get(key, (0, 0))
            table[key] = (n + 1, k + (1 if good else 0))
    fmt = lambda t: {k: round(v[1] / v[0], 3) for k, v in sorted(t.items())}
    return {"foundByPosition": fmt(by_pos), "foundByKind": fmt(by_kind)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", choices=list(PRESETS), default="small")
    ap.add_argument("--size", type=int, default=3)
    ap.add_argument("--names", type=int, choices=[1, 2], default=2)
    ap.add_argument("--layout", choices=["last", "first"], default="last")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=96)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-n", type=int, default=200)
    ap.add_argument("--target", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cot", action="store_true", help="the clone restates the lookup (=q=value) before its answer")
    ap.add_argument("--prompt-loss", type=float, default=0.0, help="weight of next-token loss on prompt tokens (answer tokens: 1)")
    ap.add_argument("--fixed", action="store_true", help="values 10-99 only: every assignment the same width")
    ap.add_argument("--filler", type=int, default=0, help="filler words among the chunk's assignments")
    ap.add_argument("--mix", action="store_true", help="train on chunk sizes 1..size drawn uniformly (held out: size)")
    ap.add_argument("--recall", type=float, default=0.0, help="fraction of training rows that are recall rows (every assignment restated)")
    ap.add_argument("--rhs-names", type=float, default=0.4, help="how often a right-hand side is another name (0: numbers only)")
    ap.add_argument("--miss", type=float, default=0.5, help="fraction of training drills whose name the chunk does not assign")
    ap.add_argument("--state", default="", help="file to save the run in at every reading and to resume from when it exists (append the output: >>)")
    ap.add_argument("--queries", type=int, default=0, help="dense training rows: the clone's question and answer repeated this many times over one chunk")
    ap.add_argument("--max-value", type=int, default=99, help="numbers on a right-hand side are 0..MAX (9: one token)")
    ap.add_argument("--sep", default="=", help="between a name and its value in the chunk; '' puts the value right after the name (one-letter names), and the restated lookup (--cot) writes the name then the value")
    ap.add_argument("--noise", type=int, default=0, help="filler characters (#*_+, words of 2-5) among each chunk's assignments, as multihop's filler option")
    ap.add_argument("--short-miss", action="store_true", help="with --sep '' and --cot, a miss restates the name alone (q<ans>none), as the multihop task's clone writes it")
    a = ap.parse_args()
    global COT, RHS_NAMES, MAX_VALUE, SEP, SHORT_MISS, NOISE
    COT, RHS_NAMES, MAX_VALUE, SEP, SHORT_MISS, NOISE = a.cot, a.rhs_names, a.max_value, a.sep, a.short_miss, a.noise
    if NOISE > 0:
        # The filler characters join the vocabulary only for runs that use them, so that the
        # earlier runs' model shape (and so their seeded initialisation) stays as it was.
        VOCAB.extend("#*_+")
        ID.update({t: i for i, t in enumerate(VOCAB)})
    if a.short_miss and (SEP != "" or not COT):
        sys.exit("--short-miss goes with --sep '' and --cot")
    if SEP == "" and (a.queries > 0 or a.recall > 0):
        sys.exit("--sep '' does not take --queries or --recall rows")
    if SEP == "" and a.names != 1:
        sys.exit("--sep '' needs one-letter names (--names 1): a longer name would run into its value")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    erng = random.Random(f"eval-{a.seed}")
    found = [drill(erng, a.size, a.names, a.layout, True, a.filler, a.fixed) for _ in range(a.eval_n)]
    missing = [drill(erng, a.size, a.names, a.layout, False, a.filler, a.fixed) for _ in range(a.eval_n)]
    held = set(found + missing)
    model = GPT(*PRESETS[a.preset])
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.99), weight_decay=0.01)
    trng = random.Random(f"train-{a.seed}")
    t0 = time.time()
    reached = None
    first = 1
    if a.state and os.path.exists(a.state):
        # Resume: weights, optimizer, the drill stream and torch's generator, as saved at a reading.
        saved = torch.load(a.state, weights_only=False)
        # A flag added after the run was saved must be at its default to continue it.
        now = {k: v for k, v in vars(a).items() if k != "steps"}
        added = {k: v for k, v in now.items() if k not in saved["args"]}
        if any(v != ap.get_default(k) for k, v in added.items()) or saved["args"] != {k: v for k, v in now.items() if k in saved["args"]}:
            sys.exit(f"--state {a.state} was saved by a run with other flags: {saved['args']}")
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        trng.setstate(saved["trng"])
        torch.set_rng_state(saved["torch"])
        first = saved["step"] + 1
        t0 -= saved["sec"]
        print(json.dumps({"resumed": saved["step"]}), flush=True)
    for step in range(first, a.steps + 1):
        drills = []
        while len(drills) < a.batch:
            size = trng.randint(1, a.size) if a.mix else a.size
            if a.queries > 0:
                drills.append(query_drill(trng, size, a.names, a.queries, a.miss, a.fixed))
                continue
            if a.recall > 0 and trng.random() < a.recall:
                drills.append(recall_drill(trng, size, a.names, a.fixed))
                continue
            d = drill(trng, size, a.names, a.layout, trng.random() >= a.miss, a.filler, a.fixed)
            if d not in held:
                drills.append(d)
        ids, tgt, w = batch_of(drills, a.prompt_loss)
        for g in opt.param_groups:
            g["lr"] = a.lr * min(1.0, step / max(1, a.warmup))
        per = F.cross_entropy(model(ids).view(-1, len(VOCAB)), tgt.view(-1).clamp(min=0), reduction="none")
        loss = (per * w.view(-1)).sum() / w.view(-1).sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % a.eval_every == 0:
            fa, ma = accuracy(model, found), accuracy(model, missing)
            print(json.dumps({"step": step, "loss": round(loss.item(), 4), "found": fa, "missing": ma, **found_breakdown(model, found), "sec": round(time.time() - t0, 1)}), flush=True)
            if a.state:
                state = {"args": {k: v for k, v in vars(a).items() if k != "steps"}, "model": model.state_dict(), "opt": opt.state_dict(), "trng": trng.getstate(), "torch": torch.get_rng_state(), "step": step, "sec": time.time() - t0}
                torch.save(state, a.state + ".tmp")
                os.replace(a.state + ".tmp", a.state)
            if fa >= a.target and ma >= a.target:
                reached = step
                break
    print(json.dumps({"result": vars(a), "stepsToTarget": reached}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
