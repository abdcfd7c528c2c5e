"""Vectorised bootstrap ICC against the strongest baseline, a numpy loop doing the same BCa work, and against a
naive loop that calls pingouin once per resample, in one run.

All sides draw the same resamples (same seed, same index matrix) and compute ICC(3,k) with a BCa interval.
The numpy loop is what a careful user writes without the engine: a Python loop over resamples and jackknife
samples with a vectorised numpy ANOVA in each, and the same BCa formulas. The naive side is
scipy.stats.bootstrap with a pingouin call per resample and per jackknife sample. The script checks that the
intervals agree before it prints the times and their ratios.

At large sizes the naive loop takes minutes (5,000 items: 2,000 resamples + 5,000 jackknife samples,
each a pingouin call), so ``--naive-resamples N`` times it on the first N resamples and the first N
jackknife samples only, checks those N + N ICCs against the engine's, and scales each part to its full
count. The vectorised side is always the whole BCa bootstrap.

    .venv/bin/python benchmarks/agreement.py                 # MedHELM size: 56 items x 2 raters, B = 2000
    .venv/bin/python benchmarks/agreement.py --items 300 --raters 5
    .venv/bin/python benchmarks/agreement.py --items 5000 --raters 4 --naive-resamples 20   # the issue's target
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings

import numpy as np
import pandas as pd
import pingouin as pg
from scipy import stats

from medhelm_core.agreement import bootstrap_icc
from medhelm_core.agreement.bootstrap import bootstrap_distribution, jackknife_distribution
from medhelm_core.agreement.icc import ICC_TYPES, PINGOUIN_NAMES

# The targets for 5,000 items x 4 raters and 2,000 resamples.
TARGET_RATIO = 100
TARGET_SECONDS = 2.0


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


def numpy_icc3k(x: np.ndarray) -> float:
    """ICC(3,k) of a complete items x raters matrix from its two-way ANOVA, in plain numpy."""
    n, k = x.shape
    grand = x.mean()
    ss_rows = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(axis=0) - grand) ** 2).sum()
    ss_err = ((x - grand) ** 2).sum() - ss_rows - ss_cols
    ms_rows, ms_err = ss_rows / (n - 1), ss_err / ((n - 1) * (k - 1))
    return float((ms_rows - ms_err) / ms_rows)


def numpy_bca(x: np.ndarray, n_resamples: int, seed: int, confidence: float = 0.95) -> tuple[float, float]:
    """The strongest baseline: the same BCa work as the engine (the same resamples from the same seed, the
    jackknife, Efron & Tibshirani's levels with ties counting half, numpy's quantiles), written as a plain loop
    over resamples and left-out items with a vectorised numpy ANOVA in each; no pingouin, no scipy.bootstrap."""
    n = x.shape[0]
    idx = np.random.default_rng(seed).integers(0, n, (n_resamples, n))
    theta = numpy_icc3k(x)
    boot = np.array([numpy_icc3k(x[i]) for i in idx])
    keep = np.ones(n, dtype=bool)
    jack = np.empty(n)
    for i in range(n):
        keep[i] = False
        jack[i] = numpy_icc3k(x[keep])
        keep[i] = True
    share = ((boot < theta).sum() + (boot <= theta).sum()) / (2 * boot.size)
    z0 = stats.norm.ppf(share)
    u = (n - 1) * (jack.mean() - jack)
    a_hat = (u**3).sum() / n**3 / ((u**2).sum() / n**2) ** 1.5 / 6
    z = stats.norm.ppf((1 - confidence) / 2)
    levels = [stats.norm.cdf(z0 + (z0 + zz) / (1 - a_hat * (z0 + zz))) for zz in (z, -z)]
    low, high = np.quantile(boot, levels)
    return float(low), float(high)


def naive_scaled(x: np.ndarray, n_resamples: int, n_timed: int, seed: int) -> tuple[float, float]:
    """The naive loop timed on ``n_timed`` resamples and jackknife samples, scaled to the whole BCa.

    Returns the estimated seconds and the largest difference between pingouin and the engine on the
    resamples and jackknife samples that were timed (the same ones: same seed, same draw order).
    """
    n = x.shape[0]
    idx = np.random.default_rng(seed).integers(0, n, (n_timed, n))
    start = time.perf_counter()
    boot = np.array([pingouin_icc3k(x[i]) for i in idx])
    boot_s = time.perf_counter() - start
    n_jack = min(n_timed, n)
    start = time.perf_counter()
    jack = np.array([pingouin_icc3k(np.delete(x, i, axis=0)) for i in range(n_jack)])
    jack_s = time.perf_counter() - start
    ours_boot = bootstrap_distribution(x, ["ICC3k"], n_resamples, seed)["ICC3k"][:n_timed]
    ours_jack = jackknife_distribution(x, ["ICC3k"])["ICC3k"][:n_jack]
    diff = float(max(np.abs(boot - ours_boot).max(), np.abs(jack - ours_jack).max()))
    return boot_s / n_timed * n_resamples + jack_s / n_jack * n, diff


def engine_seconds(x: np.ndarray, forms: list[str] | tuple[str, ...], args: argparse.Namespace) -> float:
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        bootstrap_icc(x, icc_types=forms, n_resamples=args.resamples, method="bca", seed=args.seed)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=56, help="items (MedHELM's pooled jury figure used 56)")
    parser.add_argument("--raters", type=int, default=2)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of the vectorised side (median kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--naive-resamples",
        type=int,
        default=None,
        help="time the pingouin loop on this many resamples (and jackknife samples) and scale (default: run it all)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()
    if args.naive_resamples is not None and args.naive_resamples < 1:
        parser.error("--naive-resamples must be at least 1")
    warnings.filterwarnings("ignore")  # pingouin 0.7 warns about a pandas deprecation on every call

    x = rated_matrix(args.items, args.raters, args.seed)
    fast = bootstrap_icc(x, icc_types=["ICC3k"], n_resamples=args.resamples, method="bca", seed=args.seed).iloc[0]
    fast_s = engine_seconds(x, ["ICC3k"], args)
    all_forms_s = engine_seconds(x, ICC_TYPES, args)

    start = time.perf_counter()
    np_low, np_high = numpy_bca(x, args.resamples, args.seed)
    numpy_s = time.perf_counter() - start
    numpy_diff = max(abs(fast["ci_low"] - np_low), abs(fast["ci_high"] - np_high))
    if numpy_diff > 1e-9:
        raise SystemExit(f"vectorised and numpy-loop intervals differ by {numpy_diff:.3g}")

    scaled = args.naive_resamples is not None and args.naive_resamples < args.resamples
    pingouin_icc3k(x)  # warm-up: pingouin's first call pays for lazy imports, which the loop should not
    if scaled:
        naive_s, diff = naive_scaled(x, args.resamples, args.naive_resamples, args.seed)
        what = f"ICCs of the {args.naive_resamples} timed resamples and jackknife samples"
    else:
        start = time.perf_counter()
        low, high = naive_bca(x, args.resamples, args.seed)
        naive_s = time.perf_counter() - start
        diff = max(abs(fast["ci_low"] - low), abs(fast["ci_high"] - high))
        what = "intervals"
    if diff > 1e-9:
        raise SystemExit(f"vectorised and naive {what} differ by {diff:.3g}")
    result = {
        "items": args.items,
        "raters": args.raters,
        "resamples": args.resamples,
        "method": "bca",
        "vectorised_s": round(fast_s, 4),
        "vectorised_all_six_forms_s": round(all_forms_s, 4),
        "numpy_loop_s": round(numpy_s, 3),
        "ratio_numpy_loop": round(numpy_s / fast_s, 1),
        "naive_pingouin_s": round(naive_s, 2),
        "naive_scaled_from": args.naive_resamples if scaled else None,
        "ratio": round(naive_s / fast_s, 1),
        "ci": [round(fast["ci_low"], 4), round(fast["ci_high"], 4)],
        "max_difference": diff,
        "targets_met": bool(naive_s / fast_s >= TARGET_RATIO and fast_s < TARGET_SECONDS),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pingouin": pg.__version__,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"bootstrap ICC(3,k), BCa, {args.items} items x {args.raters} raters, {args.resamples} resamples")
    print(f"  vectorised (medhelm_core.agreement): {fast_s * 1000:8.1f} ms  (median of {args.repeats})")
    print(f"  the same, all six ICC forms:         {all_forms_s * 1000:8.1f} ms")
    print(f"  numpy loop, same BCa work:           {numpy_s * 1000:8.1f} ms  (strongest baseline: "
          f"{numpy_s / fast_s:.1f}x the engine; same interval, max difference {numpy_diff:.1e})")
    how = f"timed on {args.naive_resamples} resamples + jackknife samples, scaled" if scaled else "run in full"
    print(f"  naive loop, pingouin per resample:   {naive_s * 1000:8.1f} ms  ({how})")
    if scaled:
        print(
            f"  same ICCs on the timed samples (max difference {diff:.1e}); interval [{fast['ci_low']:.4f}, "
            f"{fast['ci_high']:.4f}]"
        )
    else:
        print(f"  same interval: [{fast['ci_low']:.4f}, {fast['ci_high']:.4f}] (max difference {diff:.1e})")
    print(f"  ratio numpy loop / vectorised: {numpy_s / fast_s:.1f}x (the strongest baseline)")
    print(
        f"  ratio pingouin loop / vectorised: {naive_s / fast_s:.0f}x (target >= {TARGET_RATIO}x, under "
        f"{TARGET_SECONDS:g} s)"
    )


if __name__ == "__main__":
    main()
