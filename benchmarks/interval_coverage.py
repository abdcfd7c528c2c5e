"""How often each confidence interval the product prints covers its true value: a simulation study.

Every interval comes from the product's own code (``icc.f_intervals``, ``intervals.gci_batch``,
``incomplete.icc1_unbalanced``, ``robust.scale_agreement``, ``bootstrap.bootstrap_records``), run on studies
drawn from the model each interval is for, with a known true value. The ANOVA-based intervals are computed
for all replicates at once (a batch of sums of squares); the bootstrap ones replicate by replicate.

Rows marked "not printed" are the intervals the product used before and no longer prints, kept in the
table to show why: McGraw & Wong's F interval for ICC(A,·) and the item bootstrap (BCa).

    .venv/bin/python benchmarks/interval_coverage.py                   # the table of docs/benchmarks.md (about 5 min)
    .venv/bin/python benchmarks/interval_coverage.py --replicates 200 --sizes 100 --json
    .venv/bin/python benchmarks/interval_coverage.py --check            # exit 1 unless every printed interval covers
                                                               # 93-97% at 100 items

The suite runs :func:`coverage_table` small (fixed seed, few replicates, loose bounds), so that a change
that breaks an interval's coverage fails CI.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from medhelm_core.agreement.bootstrap import bootstrap_records
from medhelm_core.agreement.icc import f_intervals, sums_of_squares_batch
from medhelm_core.agreement.incomplete import icc1_unbalanced
from medhelm_core.agreement.intervals import gci_batch
from medhelm_core.agreement.robust import scale_agreement

#: what "covers" means at 100 items for an interval the product prints
TARGET = (0.93, 0.97)
Float = np.ndarray


@dataclass(frozen=True)
class Scenario:
    """One data-generating model: its label and the parameters of the two-way model or the rating table."""

    label: str
    sb: float = 1.0  # SD of the items' true scores
    sc: float = 0.0  # SD of the rater effects (random raters) or the spread of the fixed biases
    se: tuple[float, float] = (0.5, 0.5)  # error SD of each rater


@dataclass(frozen=True)
class Interval:
    """One interval the product prints (or printed): the form, the design it is used for, and how it is got."""

    name: str
    form: str
    design: str
    method: str
    printed: bool
    scenarios: tuple[Scenario, ...]
    run: Callable[[Scenario, int, int, np.random.Generator, bool], Float]
    expensive: bool = False


def _two_way(s: Scenario, n: int, reps: int, rng: np.random.Generator, raters: str) -> tuple[Float, dict]:
    b = rng.normal(0, s.sb, (reps, n, 1))
    e = rng.normal(0, 1, (reps, n, 2)) * np.array(s.se)
    c = rng.normal(0, s.sc, (reps, 1, 2)) if raters == "random" else np.array([-s.sc / 2, s.sc / 2])
    vb, ve = s.sb**2, float(np.mean(np.square(s.se)))
    # McGraw & Wong's rater variance: sigma_c^2 for random raters, theta^2 = sum (c_j - c)^2 / (k - 1) when fixed.
    vc = s.sc**2 if raters == "random" else float(np.var([-s.sc / 2, s.sc / 2], ddof=1))
    truth = {"ICC2": vb / (vb + vc + ve), "ICC2k": vb / (vb + (vc + ve) / 2)}
    return b + c + e, truth


def _hits(low: Float, high: Float, truth: float) -> Float:
    return (low <= truth) & (truth <= high)


def consistency_z(form: str) -> Callable[[Scenario, int, int, np.random.Generator, bool], Float]:
    """ICC(C,1) / ICC(C,k) of two z-scored sides with the F interval (MedHELM's protocol; pairs, LOCO)."""

    def run(s: Scenario, n: int, reps: int, rng: np.random.Generator, _: bool) -> Float:
        x, _ = _two_way(s, n, reps, rng, "random")
        z = (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, ddof=1, keepdims=True)
        vb = s.sb**2
        rho = vb / np.sqrt((vb + s.se[0] ** 2) * (vb + s.se[1] ** 2))
        truth = rho if form == "ICC3" else 2 * rho / (1 + rho)
        low, high = f_intervals(sums_of_squares_batch(z))[form]
        return _hits(low, high, truth)

    return run


def absolute_gci(form: str, raters: str) -> Callable[[Scenario, int, int, np.random.Generator, bool], Float]:
    """ICC(A,1) / ICC(A,k) on the raw scale with the generalized interval, raters random or fixed."""

    def run(s: Scenario, n: int, reps: int, rng: np.random.Generator, _: bool) -> Float:
        x, truth = _two_way(s, n, reps, rng, raters)
        out = []
        for start in range(0, reps, 250):  # blocks keep the draws (reps x 5,000) within memory
            part = x[start : start + 250]
            low, high = gci_batch(sums_of_squares_batch(part), part.mean(axis=1), raters, seed=rng)[form]
            out.append(_hits(low, high, truth[form]))
        return np.concatenate(out)

    return run


def absolute_f(form: str, raters: str) -> Callable[[Scenario, int, int, np.random.Generator, bool], Float]:
    """McGraw & Wong's F interval of ICC(A,·) (pingouin's): what the product printed before."""

    def run(s: Scenario, n: int, reps: int, rng: np.random.Generator, _: bool) -> Float:
        x, truth = _two_way(s, n, reps, rng, raters)
        low, high = f_intervals(sums_of_squares_batch(x))[form]
        return _hits(low, high, truth[form])

    return run


def absolute_item_bootstrap(form: str) -> Callable[[Scenario, int, int, np.random.Generator, bool], Float]:
    """The item bootstrap (BCa) of ICC(A,·) with raters drawn at random: the full protocol's old headline."""

    def run(s: Scenario, n: int, reps: int, rng: np.random.Generator, small: bool) -> Float:
        x, truth = _two_way(s, n, reps, rng, "random")
        resamples = 400 if small else 1000
        return np.array([
            _hits(*(lambda r: (r["ci_low"], r["ci_high"]))(bootstrap_records(x[i], [form], resamples, "bca",
                                                                             seed=i)[0]), truth[form])
            for i in range(reps)
        ])

    return run


def one_way_unbalanced(s: Scenario, n: int, reps: int, rng: np.random.Generator, _: bool) -> Float:
    """ICC(1) over every clinician: items rated by 2 or 3 clinicians (as MedHELM's), F interval with k0."""
    truth = s.sb**2 / (s.sb**2 + s.se[0] ** 2)
    hits = np.empty(reps, dtype=bool)
    for r in range(reps):
        k = rng.choice([2, 3], n, p=[0.7, 0.3])
        item = np.repeat(np.arange(n), k)
        score = rng.normal(0, s.sb, n)[item] + rng.normal(0, s.se[0], item.size)
        frame = pd.DataFrame({"item_id": item, "rater_id": np.arange(item.size) % 17, "score": score})
        frame = frame.drop_duplicates(["item_id", "rater_id"])
        row = icc1_unbalanced(frame).iloc[0]
        hits[r] = row["ci_low"] <= truth <= row["ci_high"]
    return hits


def _cells(rho: float, cuts: Sequence[float]) -> Float:
    """A 5 x 5 table of (clinician, jury) level probabilities: a bivariate normal with correlation ``rho`` cut
    at ``cuts`` (the outer edges at +-8 SD stand for infinity)."""
    from scipy import stats

    edges = np.array([-8.0, *cuts, 8.0])
    cdf = stats.multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]]).cdf
    grid = np.array([[cdf([a, b]) for b in edges] for a in edges])
    p = np.clip(grid[1:, 1:] - grid[:-1, 1:] - grid[1:, :-1] + grid[:-1, :-1], 0, None).ravel()
    return p / p.sum()


def scale_method(method: str) -> Callable[[Scenario, int, int, np.random.Generator, bool], Float]:
    """Gwet's AC2 and the quadratic-weighted kappa of two raters on the 1-5 scale, BCa over items."""

    def run(s: Scenario, n: int, reps: int, rng: np.random.Generator, small: bool) -> Float:
        cells = _cells(s.sb, (-1.6, -1.0, -0.3, 0.4) if s.sc else (-1.0, -0.3, 0.3, 1.0))
        truth_table = scale_agreement(*_pairs(np.round(cells * 1e6).astype(int)), n_resamples=0).set_index("method")
        truth = float(truth_table.loc[method, "estimate"])
        hits = np.empty(reps, dtype=bool)
        for r in range(reps):
            counts = rng.multinomial(n, cells)
            row = scale_agreement(*_pairs(counts), n_resamples=500 if small else 2000, seed=r).set_index("method")
            hits[r] = row.loc[method, "ci_low"] <= truth <= row.loc[method, "ci_high"]
        return hits

    return run


def _pairs(counts: Float) -> tuple[Float, Float]:
    levels = np.repeat(np.arange(25), counts)
    return levels // 5 + 1.0, levels % 5 + 1.0


RANDOM = (Scenario("rater SD 0.5 of item SD 1", 1.0, 0.5), Scenario("rater SD 0.3", 1.0, 0.3),
          Scenario("ICC 0.2, rater SD 0.3", 0.5, 0.3, (1.0, 1.0)), Scenario("no rater effect", 1.0, 0.0))
FIXED = (Scenario("jury 1 point lenient", 1.0, 1.0), Scenario("jury 0.5 lenient, noisier", 1.0, 0.5, (0.5, 0.9)),
         Scenario("ICC 0.2, 0.5 lenient", 0.5, 0.5, (1.0, 1.0)), Scenario("no bias", 1.0, 0.0))
PAIRS = (Scenario("rho 0.8", 1.0, 0.3), Scenario("unequal noise", 1.0, 0.3, (0.5, 1.0)),
         Scenario("rho 0.2", 0.5, 0.3, (1.0, 1.0)))
ONE_WAY = (Scenario("ICC 0.8", 1.0, 0.0, (0.5, 0.5)), Scenario("ICC 0.2", 0.5, 0.0, (1.0, 1.0)))
SCALE = (Scenario("rho 0.6, skewed to the top", 0.6, 1.0), Scenario("rho 0.3, spread", 0.3, 0.0))

INTERVALS: tuple[Interval, ...] = (
    Interval("ICC(C,k) z-scored pair", "ICC3k", "two sides z-scored (MedHELM; pairs, judges, LOCO)", "F", True,
             PAIRS, consistency_z("ICC3k")),
    Interval("ICC(C,1) z-scored pair", "ICC3", "two sides z-scored", "F", True, PAIRS, consistency_z("ICC3")),
    Interval("ICC(A,1) clinician pair", "ICC2", "two clinicians drawn at random", "GCI (raters random)", True,
             RANDOM, absolute_gci("ICC2", "random")),
    Interval("ICC(A,k) clinician pair", "ICC2k", "two clinicians drawn at random", "GCI (raters random)", True,
             RANDOM, absolute_gci("ICC2k", "random")),
    Interval("ICC(A,1) jury beside clinicians", "ICC2", "jury and mean clinician, fixed", "GCI (raters fixed)", True,
             FIXED, absolute_gci("ICC2", "fixed")),
    Interval("ICC(A,k) jury beside clinicians", "ICC2k", "jury and mean clinician, fixed", "GCI (raters fixed)",
             True, FIXED, absolute_gci("ICC2k", "fixed")),
    Interval("ICC(1) every clinician", "ICC1_unbalanced", "2-3 clinicians per item, differing", "F with k0", True,
             ONE_WAY, one_way_unbalanced, expensive=True),
    Interval("AC2 on the scale", "AC2", "two raters, 1-5 scale", "BCa (multinomial)", True, SCALE,
             scale_method("AC2"), expensive=True),
    Interval("kappa on the scale", "kappa_qw", "two raters, 1-5 scale", "BCa (multinomial)", True, SCALE,
             scale_method("kappa_qw"), expensive=True),
    Interval("ICC(A,1), McGraw & Wong", "ICC2", "two clinicians drawn at random", "F (Satterthwaite)", False,
             RANDOM, absolute_f("ICC2", "random")),
    Interval("ICC(A,1), McGraw & Wong", "ICC2", "jury and mean clinician, fixed", "F (Satterthwaite)", False,
             FIXED, absolute_f("ICC2", "fixed")),
    Interval("ICC(A,1), item bootstrap", "ICC2", "two clinicians drawn at random", "BCa (items)", False,
             RANDOM[:2], absolute_item_bootstrap("ICC2"), expensive=True),
)


def _cases(sizes: Sequence[int], small: bool) -> Iterator[tuple[Interval, Scenario, int]]:
    for interval in INTERVALS:
        if small and not interval.printed:
            continue
        scenarios = interval.scenarios[:1] if small else interval.scenarios
        for scenario in scenarios:
            for n in sizes:
                yield interval, scenario, n


def coverage_table(replicates: int = 2000, sizes: Sequence[int] = (30, 100), seed: int = 0,
                   small: bool = False) -> pd.DataFrame:
    """Coverage of every interval in every scenario and size: one row each.

    ``small`` runs only the printed intervals, on their first scenario, with fewer bootstrap resamples and
    replicates (a quarter for the bootstrap-based ones): what the test suite runs.
    """
    rows = []
    for i, (interval, scenario, n) in enumerate(_cases(sizes, small)):
        rng = np.random.default_rng([seed, i])
        reps = max(40, replicates // 4) if (small and interval.expensive) else replicates
        start = time.perf_counter()
        hits = interval.run(scenario, n, reps, rng, small)
        rows.append({"interval": interval.name, "design": interval.design, "method": interval.method,
                     "printed": interval.printed, "scenario": scenario.label, "items": n, "replicates": reps,
                     "coverage": float(np.mean(hits)), "seconds": round(time.perf_counter() - start, 2)})
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    """The docs table: per interval and size, the lowest and highest coverage over its scenarios."""
    grouped = table.groupby(["interval", "design", "method", "printed", "items"], sort=False)["coverage"]
    summary = grouped.agg(["min", "max"]).reset_index()
    wide = summary.pivot_table(index=["interval", "design", "method", "printed"], columns="items",
                               values=["min", "max"], sort=False)
    lines = ["| interval | design | method | printed | " + " | ".join(f"{n} items" for n in sorted(table["items"]
                                                                                           .unique())) + " |",
             "|---|---|---|---|" + "---:|" * table["items"].nunique()]
    for key, row in wide.iterrows():
        cells = [f"{row[('min', n)]:.1%} to {row[('max', n)]:.1%}" for n in sorted(table["items"].unique())]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {'yes' if key[3] else 'no (was)'} | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines)


def failures(table: pd.DataFrame, bounds: tuple[float, float] = TARGET, items: int = 100) -> pd.DataFrame:
    """The printed intervals whose coverage at ``items`` falls outside ``bounds``."""
    at = table[table["printed"] & (table["items"] == items)]
    return at[(at["coverage"] < bounds[0]) | (at["coverage"] > bounds[1])]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 100])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--small", action="store_true", help="printed intervals only, first scenario each")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every printed interval covers 93-97%%")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    table = coverage_table(args.replicates, args.sizes, args.seed, args.small)
    if args.json:
        print(json.dumps(table.to_dict("records")))
    else:
        print(markdown(table))
        print(f"\n{args.replicates} replicates per cell (a quarter of them for the small run's bootstrap cells), "
              f"seed {args.seed}, {time.perf_counter() - start:.0f} s")
    bad = failures(table) if 100 in args.sizes else table.iloc[0:0]
    if args.check and not bad.empty:
        print(bad.to_string(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
