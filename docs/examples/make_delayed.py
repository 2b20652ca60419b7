"""Write docs/examples/predictions.csv and labels.csv: a model's scores logged when made,
and their labels logged up to 30 minutes later (2% never come). Seeded; run from the
repository's root: ``python docs/examples/make_delayed.py``. From event 2 000 on the
model misses more positives (recall falls from about 0.85 to about 0.55)."""

import csv
import math
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
rng = random.Random(7)
preds, labels = [], []
t = 1_717_200_000.0
for i in range(4000):
    t += rng.expovariate(1 / 2.0)                 # a prediction every 2 s on average
    y = rng.random() < 0.3
    shift = 1.6 if (y and i >= 2000) else 0.0     # the model degrades on positives
    logit = (1.8 if y else -1.2) - shift + rng.gauss(0, 1.2)
    score = round(1 / (1 + math.exp(-logit)), 4)
    pid = f"p{i:05d}"
    preds.append((round(t, 3), pid, score))
    if rng.random() >= 0.02:
        labels.append((round(t + rng.uniform(60, 1800), 3), pid, int(y)))
labels.sort()
with open(HERE / "predictions.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["ts", "id", "score"])
    w.writerows(preds)
with open(HERE / "labels.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["ts", "id", "label"])
    w.writerows(labels)
