"""Make ``labels_stop.jsonl.gz``: the bundled log of ``scenarios/labels_stop.toml``.

A fraud model scores a payment every minute for ten days (14 400 predictions, ids
``pay-00001``...). Its scores are calibrated (the label is drawn with the score as its
probability) and its chargebacks come back one to three days later. The label feed
breaks on day 4: no label row is written after it. On day 6 a bad deploy (a feature
that stops being filled) squeezes the scores: the model sees most fraud as an
ordinary payment (labels still drawn from the scores the model would have given).
Prediction rows ``{ts, id, score}`` and label rows ``{ts, id, label}`` in one file, in
time order. Seeded: running this script again writes the same file.

    python scenarios/data/make_labels_stop.py
"""

import gzip
import json
from pathlib import Path

import numpy as np

SEED = 34
N = 14_400
START = 1_700_000_000
STEP = 60  # seconds between predictions
LABELS_STOP = START + 4 * 86400  # the label feed breaks
DEPLOY = START + 6 * 86400  # the bad deploy


def main(path=Path(__file__).with_name("labels_stop.jsonl.gz")):
    rng = np.random.default_rng(SEED)
    ts = START + STEP * np.arange(N)
    margin = rng.normal(-1.2, 1.6, N)
    truth = 1 / (1 + np.exp(-margin))  # the calibrated score, before the deploy
    fraud = rng.random(N) < truth
    broken = ts >= DEPLOY
    # after the deploy the model loses most of its margin: scores squeezed towards 0.15
    score = np.where(broken, 1 / (1 + np.exp(-(0.25 * margin - 1.5))), truth)
    score = np.round(score, 4)
    delay = rng.uniform(86400, 3 * 86400, N)
    rows = [(float(ts[i]), 0, {"ts": int(ts[i]), "id": f"pay-{i + 1:05d}",
                               "score": float(score[i])}) for i in range(N)]
    for i in range(N):
        t = float(ts[i] + delay[i])
        if t < LABELS_STOP:
            rows.append((t, 1, {"ts": round(t, 1), "id": f"pay-{i + 1:05d}",
                                "label": bool(fraud[i])}))
    rows.sort(key=lambda r: (r[0], r[1]))
    with gzip.GzipFile(path, "wb", mtime=0) as raw:  # mtime=0: byte-identical output
        for _, _, row in rows:
            raw.write((json.dumps(row, separators=(",", ":")) + "\n").encode())
    return len(rows)


if __name__ == "__main__":
    print(main(), "rows")
