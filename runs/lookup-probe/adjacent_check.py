"""Session 9 diagnostic: lookups over K assignments, always found, values 0-99, with a separator between
name and value (argv 2, e.g. "=") or none (""): the restated lookup then writes the name and the value, so
the token before the value is the asked name, as in standard induction. Prints K, sep, step, loss, accuracy.
    /usr/bin/python3 runs/lookup-probe/adjacent_check.py 3 ""
"""
import sys, time, random, torch, torch.nn.functional as F
sys.path.insert(0, __import__('os').path.join(__import__('os').path.dirname(__file__), '..', '..', 'test', 'python'))
import lookup_probe as lp
K = int(sys.argv[1]); SEP = sys.argv[2] if len(sys.argv) > 2 else ''
torch.manual_seed(1); rng = random.Random(1)
model = lp.GPT(*lp.PRESETS['small'])
opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.99), weight_decay=0.01)
def drill(r):
    names = r.sample(lp.LETTERS, K)
    vals = [str(r.randint(0, 99)) for _ in names]
    i = r.randrange(K)
    chunk = " ".join(f"{n}{SEP}{v}." for n, v in zip(names, vals))
    return f"<clone>{chunk} {names[i]}?<sep>", f"{names[i]}{SEP}{vals[i]}<ans>{vals[i]}<eos>"
def batch(r, n):
    rows = [(lp.encode(p), lp.encode(t)) for p, t in (drill(r) for _ in range(n))]
    W = max(len(p) + len(t) for p, t in rows)
    ids = torch.zeros(n, W, dtype=torch.long); tgt = torch.full((n, W), -100, dtype=torch.long)
    for i, (p, t) in enumerate(rows):
        s = p + t; ids[i, :len(s)] = torch.tensor(s)
        for j in range(len(p), len(s)): tgt[i, j - 1] = s[j]
    return ids, tgt
er = random.Random('eval'); E = batch(er, 400)
t0 = time.time()
for step in range(1, 4001):
    ids, tgt = batch(rng, 96)
    loss = F.cross_entropy(model(ids).reshape(-1, len(lp.VOCAB)), tgt.reshape(-1), ignore_index=-100)
    for g in opt.param_groups: g['lr'] = 2e-3 * min(1, step / 50)
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
    if step % 250 == 0:
        with torch.no_grad():
            ids, tgt = E; pred = model(ids).argmax(-1); m = tgt != -100
            acc = (((pred == tgt) | ~m).all(1)).float().mean().item()
        print(K, repr(SEP), step, round(loss.item(), 3), round(acc, 3), round(time.time() - t0), flush=True)
        if acc >= 0.95: break
