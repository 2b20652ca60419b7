"""Make ``checkout.jsonl.gz``: the bundled log of ``scenarios/checkout_log.toml``.

A payment-fraud model's log over two days: 12 000 payments from three countries,
ISO-8601 event times (UTC, ``Z``), a weight (the payment amount band, so that large
payments count more), labels known at logging time. At 2024-03-02T00:00:00Z a
fraud ring starts in "br" whose fraud the model scores low: recall in "br" falls,
elsewhere nothing changes. Seeded: running this script again writes the same file.

    python scenarios/data/make_checkout.py
"""

import datetime as dt
import gzip
import json
from pathlib import Path

import numpy as np

SEED = 2024
N = 12_000
START = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)
RING = dt.datetime(2024, 3, 2, tzinfo=dt.timezone.utc)


def main(path=Path(__file__).with_name("checkout.jsonl.gz")):
    rng = np.random.default_rng(SEED)
    secs = np.sort(rng.uniform(0, 2 * 86400, N))
    country = rng.choice(["br", "de", "us"], N, p=[0.3, 0.3, 0.4])
    fraud = rng.random(N) < 0.08
    ring = (country == "br") & (secs >= (RING - START).total_seconds())
    # the ring's fraud looks like ordinary payments to the model
    margin = np.where(fraud & ~ring, 2.5, np.where(fraud & ring, -1.5, -2.5))
    score = np.round(1 / (1 + np.exp(-(margin + rng.standard_normal(N)))), 3)
    weight = rng.choice([1.0, 2.0, 5.0], N, p=[0.7, 0.2, 0.1])
    with gzip.GzipFile(path, "wb", mtime=0) as raw:  # mtime=0: byte-identical output
        for i in range(N):
            ts = START + dt.timedelta(seconds=float(secs[i]))
            row = {"ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                   "id": f"pay-{i + 1:05d}", "country": str(country[i]),
                   "label": bool(fraud[i]), "score": float(score[i]), "weight": float(weight[i])}
            raw.write((json.dumps(row) + "\n").encode())
    return path


if __name__ == "__main__":
    print(main())
