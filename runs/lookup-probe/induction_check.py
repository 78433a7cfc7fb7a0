"""Session 9 diagnostic: can this GPT learn induction (content-based copying) at all? Random distinct
letters of a random length (6-20), then the same again; loss on the repeat. Prints step, loss, accuracy, seconds.
    /usr/bin/python3 runs/lookup-probe/induction_check.py 2e-3
"""
import sys, time, random, torch, torch.nn.functional as F
sys.path.insert(0, __import__('os').path.join(__import__('os').path.dirname(__file__), '..', '..', 'test', 'python'))
import lookup_probe as lp
torch.manual_seed(1); rng = random.Random(1)
model = lp.GPT(*lp.PRESETS['small'])
opt = torch.optim.AdamW(model.parameters(), lr=float(sys.argv[1]) if len(sys.argv) > 1 else 2e-3, betas=(0.9, 0.99), weight_decay=0.01)
V = len(lp.VOCAB); L = 12
def batch(n):
    # random letter sequence of length L, then repeated: loss on the repeat (tokens after the first of the repeat)
    W = 2 * 20 + 2
    ids = torch.zeros(n, W, dtype=torch.long); tgt = torch.full((n, W), -100, dtype=torch.long)
    for i in range(n):
        Li = rng.randint(6, 20)
        seq = rng.sample([lp.ID[c] for c in lp.LETTERS], Li)  # distinct letters: each has one successor
        row = [lp.ID['<clone>']] + seq + [lp.ID['<sep>']] + seq
        ids[i, :len(row)] = torch.tensor(row)
        for j in range(Li + 2, len(row) - 1):
            tgt[i, j] = row[j + 1]
    return ids, tgt
t0 = time.time()
for step in range(1, 1501):
    ids, tgt = batch(96)
    logits = model(ids)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), tgt[:, :-1].reshape(-1), ignore_index=-100)
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
    if step % 100 == 0:
        with torch.no_grad():
            ids, tgt = batch(200)
            pred = model(ids)[:, :-1].argmax(-1); m = tgt[:, :-1] != -100
            acc = ((pred == tgt[:, :-1]) & m).sum().item() / m.sum().item()
        print(step, round(loss.item(), 3), round(acc, 3), round(time.time() - t0), flush=True)
