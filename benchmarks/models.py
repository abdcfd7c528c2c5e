"""The whole Models table (means of every source with bootstrap intervals over instances, paired differences,
rankings with tau-b intervals, swap probabilities and win rates, clinician-anchored PPI++ estimates and the
ratings still needed) against a straightforward pandas loop, in one run.

The study: 10 models x 10,000 instances (4 benchmarks) x 3 criteria; a jury of 3 judges on every item (the jury
mean and each judge), ROUGE-L and BERTScore on every item, clinicians on 2,000 items drawn at random.

- **engine**: :func:`medhelm_core.figures.model_figures.model_figures` from the per-item scores, 2,000
  resamples (median of the runs);
- **pandas loop**: what one would write without it, for the same bootstrap means: per resample, repeat each
  resampled instance's rows and ``groupby(...).mean()`` per model, benchmark, source and criterion (and the
  pooled means), then the intervals. It is timed on the first ``--naive-resamples`` resamples (the same
  instances as the engine draws) and scaled to 2,000; the script stops unless its means equal the engine's
  to 1e-9 on those resamples. It does only the means: the engine's time includes everything else too.

    .venv/bin/python benchmarks/models.py                        # the issue's target
    .venv/bin/python benchmarks/models.py --repeat 5 --naive-resamples 50 --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np
import pandas as pd

from medhelm_core.agreement.bootstrap import resample_counts
from medhelm_core.figures.model_figures import ModelOptions, model_figures
from medhelm_core.model_scores import item_scores, resample_means
from medhelm_core.model_scores.anchored import ppi

TARGET_SECONDS = 3.0
TARGET_RATIO = 50
CRITERIA = ("accuracy", "completeness", "clarity")
JUDGES = ("openai/judge-a", "anthropic/judge-b", "meta/judge-c")


def study(models: int, instances: int, benchmarks: int, rated: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-item scores (the engine's input) and the rating design of a synthetic study."""
    rng = np.random.default_rng(seed)
    n = models * instances
    bench = np.repeat(np.arange(instances) % benchmarks, models)
    items = pd.DataFrame({"item_id": np.arange(n), "benchmark": [f"bench_{b}" for b in bench],
                          "instance_id": np.repeat([f"i{i}" for i in range(instances)], models),
                          "model": np.tile([f"model_{m:02d}" for m in range(models)], instances)})
    quality = (3.2 + 0.08 * np.tile(np.arange(models), instances) + np.repeat(rng.normal(0, 0.6, instances), models)
               + rng.normal(0, 0.5, n))
    is_rated = np.zeros(n, dtype=bool)
    is_rated[rng.choice(n, rated, replace=False)] = True
    parts = []
    for c in CRITERIA:
        clin = np.clip(np.round(quality[is_rated] + rng.normal(0, 0.4, rated)), 1, 5)
        parts.append(pd.DataFrame({"item_id": items["item_id"][is_rated].to_numpy(), "rater_id": "clin",
                                   "rater_kind": "clinician", "criterion": c, "score": clin}))
        verdicts = []
        for j in JUDGES:
            score = np.clip(np.round(quality + 0.3 + rng.normal(0, 0.6, n)), 1, 5)
            verdicts.append(score)
            parts.append(pd.DataFrame({"item_id": items["item_id"], "rater_id": j, "rater_kind": "judge",
                                       "criterion": c, "score": score}))
        parts.append(pd.DataFrame({"item_id": items["item_id"], "rater_id": "jury", "rater_kind": "jury",
                                   "criterion": c, "score": np.mean(verdicts, axis=0)}))
    for metric in ("rougeL_f", "bertscore_f1"):
        parts.append(pd.DataFrame({"item_id": items["item_id"], "rater_id": metric, "rater_kind": "metric",
                                   "criterion": "composite", "score": np.clip((quality - 1) / 4 + rng.normal(0, .2, n),
                                                                                0, 1)}))
    long = pd.concat(parts, ignore_index=True)
    design = items.assign(rated=is_rated, assigned=True, drawn=False)
    start = time.perf_counter()
    scores = item_scores(long, items, CRITERIA)
    study.item_scores_seconds = time.perf_counter() - start  # reported beside the engine, not inside it
    return scores, design


def engine_run(scores: pd.DataFrame, design: pd.DataFrame, n_resamples: int, seed: int) -> float:
    start = time.perf_counter()
    model_figures(scores, design, ModelOptions(n_resamples=n_resamples, seed=seed), criteria=CRITERIA)
    return time.perf_counter() - start


def naive_means(scores: pd.DataFrame, design: pd.DataFrame, n_resamples: int, n_timed: int,
                seed: int) -> tuple[float, pd.DataFrame]:
    """The pandas loop on the first ``n_timed`` of ``n_resamples`` resamples (drawn as the engine draws them):
    seconds taken, and the pooled means of each resample (model, source, criterion, resample, mean)."""
    items = design[["item_id", "benchmark", "instance_id", "model"]]
    rng = np.random.default_rng(seed)
    counts = {}
    for bench in sorted(items["benchmark"].unique()):
        codes, uniques = pd.factorize(items.loc[items["benchmark"] == bench, "instance_id"])
        draws = np.concatenate(list(resample_counts(len(uniques), n_resamples, rng)))
        counts[bench] = pd.DataFrame(draws[:n_timed].T, index=uniques)
    cells = items.groupby(["model", "benchmark"]).size().rename("n_cell").reset_index()
    frame = scores.merge(cells, on=["model", "benchmark"])
    scored = frame.groupby(["model", "benchmark", "source", "criterion"])["score"].transform("size")
    frame = frame.assign(w=frame["n_cell"] / scored)  # each scored item stands for its cell's items (Hajek)
    out = []
    start = time.perf_counter()
    for r in range(n_timed):
        drawn = pd.concat([pd.DataFrame({"benchmark": b, "instance_id": c.index, "times": c[r].to_numpy()})
                           for b, c in counts.items()])
        sample = frame.merge(drawn[drawn["times"] > 0], on=["benchmark", "instance_id"])
        sample = sample.assign(wt=sample["w"] * sample["times"], wx=sample["w"] * sample["times"] * sample["score"])
        per_bench = sample.groupby(["model", "benchmark", "source", "criterion"])[["wt", "wx"]].sum()
        _ = per_bench["wx"] / per_bench["wt"]
        pooled = sample.groupby(["model", "source", "criterion"])[["wt", "wx"]].sum()
        out.append((pooled["wx"] / pooled["wt"]).rename("mean").reset_index().assign(resample=r))
    seconds = time.perf_counter() - start
    return seconds, pd.concat(out, ignore_index=True)


def check_same(scores: pd.DataFrame, design: pd.DataFrame, naive: pd.DataFrame, n_resamples: int, seed: int) -> float:
    """The largest difference between the loop's pooled means and the engine's on the resamples both computed."""
    items = design[["item_id", "benchmark", "instance_id", "model"]]
    r = resample_means(scores, items, n_resamples=n_resamples, seed=seed)
    worst = 0.0
    for key, group in naive.groupby(["model", "source", "criterion"]):
        column = r.column(key[0], "pooled", key[1], key[2])
        engine = r.resamples[group["resample"].to_numpy(), column]
        worst = max(worst, float(np.max(np.abs(engine - group["mean"].to_numpy()))))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--benchmarks", type=int, default=4)
    parser.add_argument("--rated", type=int, default=2_000)
    parser.add_argument("--resamples", type=int, default=2_000)
    parser.add_argument("--naive-resamples", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    scores, design = study(args.models, args.instances, args.benchmarks, args.rated, args.seed)
    ppi()  # imported once per process (1.5 s: numba, scikit-learn, statsmodels), not part of the timing
    engine_run(scores, design, 10, args.seed)  # warm up
    times = [engine_run(scores, design, args.resamples, args.seed) for _ in range(args.repeat)]
    engine = statistics.median(times)
    timed, naive = naive_means(scores, design, args.resamples, args.naive_resamples, args.seed)
    worst = check_same(scores, design, naive, args.resamples, args.seed)
    if worst > 1e-9:
        raise SystemExit(f"the pandas loop and the engine disagree by {worst:.3g}")
    naive_total = timed / args.naive_resamples * args.resamples
    result = {
        "models": args.models, "instances": args.instances, "benchmarks": args.benchmarks,
        "items": args.models * args.instances, "rated": args.rated, "resamples": args.resamples,
        "engine_seconds": round(engine, 3), "engine_runs": [round(t, 3) for t in times],
        "pandas_loop_seconds_scaled": round(naive_total, 1), "pandas_loop_timed_resamples": args.naive_resamples,
        "ratio": round(naive_total / engine, 1), "max_abs_difference": worst,
        "target_met": engine < TARGET_SECONDS and naive_total / engine >= TARGET_RATIO,
        "item_scores_seconds": round(study.item_scores_seconds, 2), "load_average": os.getloadavg()[0],
        "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{args.models} models x {args.instances:,} instances x {len(CRITERIA)} criteria, {args.rated:,} rated, "
          f"{args.resamples:,} resamples")
    print(f"engine (whole Models table): {engine:.2f} s (runs: {', '.join(f'{t:.2f}' for t in times)})")
    print(f"pandas loop (bootstrap means only): {naive_total:.1f} s, scaled from {args.naive_resamples} resamples "
          f"({timed:.2f} s); same means to {worst:.1e}")
    print(f"(before it: item_scores, the long table to a score per item and source, {study.item_scores_seconds:.2f} s;"
          f" load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"ratio {naive_total / engine:.0f}x; target: under {TARGET_SECONDS:g} s and at least {TARGET_RATIO}x: "
          f"{'met' if result['target_met'] else 'NOT met'}")


if __name__ == "__main__":
    main()
