"""The lookup probe table: one row per probe file (PyTorch `torch-*.jsonl`, this project's `*.jsonl`):
its last reading, its best finds, and the step it reached the target (or where it stopped)."""
import glob, json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
for path in sorted(glob.glob(os.path.join(here, "*.jsonl"))):
    rows, result, cfg = [], None, {}
    for line in open(path):
        try:
            o = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "result" in o or o.get("kind") == "result":
            result = o
        elif o.get("kind") == "config":
            cfg = o
        elif "step" in o:
            rows.append(o)
    if not rows:
        continue
    f = lambda r: r.get("found", r.get("foundAccuracy"))
    m = lambda r: r.get("missing", r.get("missingAccuracy"))
    last = rows[-1]
    best = max(rows, key=f)
    reached = result.get("stepsToTarget") if result else None
    state = f"reached at {reached}" if reached else ("not reached" if result else "stopped")
    print(f"| {os.path.basename(path)[:-6]} | {last['step']} | {f(last)*100:.1f} / {m(last)*100:.1f} | {f(best)*100:.1f} at {best['step']} | {state} |")
