"""Vectorised bootstrap ICC against a naive loop that calls pingouin once per resample, in one run.

Both sides draw the same resamples (same seed, same index matrix) and compute ICC(3,k) with a BCa
interval; the naive side is scipy.stats.bootstrap with a pingouin call per resample and per jackknife
sample. The script checks that the two intervals agree before it prints the times and their ratio.

    .venv/bin/python benchmarks/agreement.py                 # MedHELM size: 56 items x 2 raters, B = 2000
    .venv/bin/python benchmarks/agreement.py --items 200 --raters 3 --resamples 2000
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings

import numpy as np
import pandas as pd
import pingouin as pg
from scipy import stats

from medhelm_core.agreement import PINGOUIN_NAMES, bootstrap_icc


def rated_matrix(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 3 + rng.normal(size=(n, 1)) + rng.normal(scale=0.3, size=(1, k)) + rng.normal(scale=1.2, size=(n, k))


def pingouin_icc3k(x: np.ndarray) -> float:
    n, k = x.shape
    long = pd.DataFrame({"item": np.repeat(np.arange(n), k), "rater": np.tile(np.arange(k), n), "score": x.ravel()})
    table = pg.intraclass_corr(long, "item", "rater", "score")
    return float(table.set_index(table["Type"].map(PINGOUIN_NAMES)).loc["ICC3k", "ICC"])


def naive_bca(x: np.ndarray, n_resamples: int, seed: int) -> tuple[float, float]:
    """What one would write without the engine: scipy's bootstrap calling pingouin once per resample.

    scipy draws the same (B, n) indices from the same seed as the engine, and its BCa jackknife calls
    pingouin once per left-out item.
    """
    n = x.shape[0]
    res = stats.bootstrap(
        (np.arange(n),),
        lambda i: pingouin_icc3k(x[i]),
        vectorized=False,
        method="BCa",
        n_resamples=n_resamples,
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=56, help="items (MedHELM's pooled jury figure used 56)")
    parser.add_argument("--raters", type=int, default=2)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of the vectorised side (median kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # pingouin 0.7 warns about a pandas deprecation on every call

    x = rated_matrix(args.items, args.raters, args.seed)
    fast = bootstrap_icc(x, icc_types=["ICC3k"], n_resamples=args.resamples, method="bca", seed=args.seed).iloc[0]
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        bootstrap_icc(x, icc_types=["ICC3k"], n_resamples=args.resamples, method="bca", seed=args.seed)
        times.append(time.perf_counter() - start)
    fast_s = statistics.median(times)

    start = time.perf_counter()
    low, high = naive_bca(x, args.resamples, args.seed)
    naive_s = time.perf_counter() - start

    diff = max(abs(fast["ci_low"] - low), abs(fast["ci_high"] - high))
    if diff > 1e-9:
        raise SystemExit(f"vectorised and naive intervals differ by {diff:.3g}")
    result = {
        "items": args.items,
        "raters": args.raters,
        "resamples": args.resamples,
        "method": "bca",
        "vectorised_s": round(fast_s, 4),
        "naive_pingouin_s": round(naive_s, 2),
        "ratio": round(naive_s / fast_s, 1),
        "ci": [round(fast["ci_low"], 4), round(fast["ci_high"], 4)],
        "max_ci_difference": diff,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pingouin": pg.__version__,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"bootstrap ICC(3,k), BCa, {args.items} items x {args.raters} raters, {args.resamples} resamples")
    print(f"  vectorised (medhelm_core.agreement): {fast_s * 1000:8.1f} ms  (median of {args.repeats})")
    print(f"  naive loop, pingouin per resample:   {naive_s * 1000:8.1f} ms")
    print(f"  same interval: [{fast['ci_low']:.4f}, {fast['ci_high']:.4f}] (max difference {diff:.1e})")
    print(f"  ratio naive / vectorised: {naive_s / fast_s:.0f}x")


if __name__ == "__main__":
    main()
