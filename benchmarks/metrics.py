"""ROUGE-L and ROUGE-Lsum of this engine against Google's rouge-score in one run, apart and together, the
install sizes (lean and with BERTScore), and BERTScore pairs per second on CPU when it is installed.

ROUGE-L: ``--pairs`` synthetic clinical-note pairs of 500 to 2,000 tokens (a reference note and an edited
copy as the model's output: words dropped, substituted and inserted, so the LCS is long), scored with the
stemmer on (as HELM). The engine scores every pair; rouge-score's pure-Python LCS takes about half a
second per pair at this size, so by default it scores the first ``--baseline-pairs`` pairs only, and the
speed-up is per pair on that subset. Every pair rouge-score scored is checked to be equal (F, P and R, to
the last bit) before any figure is printed.

ROUGE-L vs ROUGE-Lsum: the first ``--lsum-pairs`` pairs split into 20-token lines (so ROUGE-Lsum has
sentences to take the union over), scored by ROUGE-L alone, ROUGE-Lsum alone and both together (each text
tokenized once), in CPU time (least of 5 rounds, the three taking turns in each: on a shared machine wall
time also counts other jobs);
rouge-score scores the first ``--lsum-baseline-pairs`` of them the same three ways, and every score is
checked equal. ROUGE-Lsum's kernel is compiled by numba, and that is timed apart: the first call in a new
process with an empty cache (it compiles, as after an install) and in the next process (it loads the cache).

BERTScore: ``--bert-pairs`` pairs of about 200 word pieces, every text unique (bert-score embeds each distinct
text once, so repeated texts would flatter it), with the bundled all-MiniLM-L6-v2 at layer 6 on CPU; skipped
with the install hint on a lean install.

    .venv/bin/python benchmarks/metrics.py                        # 2,000 pairs, baseline on the first 100
    .venv/bin/python benchmarks/metrics.py --baseline-pairs 2000 --lsum-baseline-pairs 50  # ~25 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import install_size
import numpy as np

from medhelm_core.metrics import BERTSCORE_INSTALL, bertscore_available

TARGET_RATIO = 20

CORE = (
    "patient reports denies history of chest pain shortness breath fever cough nausea vomiting abdominal "
    "headache dizziness fatigue weight loss appetite sleep medication dose daily twice mg tablet oral "
    "prescribed started stopped increased decreased blood pressure heart rate temperature oxygen saturation "
    "examination reveals normal abnormal tenderness swelling left right upper lower extremity bilateral "
    "assessment plan follow up weeks months days return emergency department referral cardiology "
    "neurology imaging ct mri x ray ultrasound laboratory results hemoglobin glucose creatinine sodium "
    "potassium diabetes hypertension asthma copd infection antibiotic therapy treatment symptoms onset "
    "duration severity worsening improving chronic acute mild moderate severe family social smoking alcohol "
    "the a an and or with without for in on at to from by is was were has had have been no not this that"
).split()
SUFFIXES = ("", "", "", "s", "ed", "ing", "ly", "ation")


def vocabulary(rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    """Clinical words with inflections (so the stemmer has work), numbers and rare terms; Zipf weights."""
    words = [w + s for w in CORE for s in SUFFIXES] + [str(n) for n in range(200)] + [f"term{n}" for n in range(800)]
    words = list(dict.fromkeys(words))
    rng.shuffle(words)
    weights = 1.0 / np.arange(1, len(words) + 1) ** 1.05
    return words, weights / weights.sum()


def note_pair(rng: np.random.Generator, words: list[str], weights: np.ndarray) -> tuple[str, str]:
    """A reference note of 500-2,000 tokens and an edited copy of it within the same range."""
    n = int(rng.integers(500, 2001))
    ref = list(rng.choice(words, size=n, p=weights))
    out: list[str] = []
    for token in ref:
        roll = rng.random()
        if roll < 0.18:
            continue  # dropped
        if roll < 0.32:
            out.append(str(rng.choice(words, p=weights)))  # substituted
        else:
            out.append(token)
        if rng.random() < 0.12:
            out.append(str(rng.choice(words, p=weights)))  # inserted
    out = out[:2000]
    while len(out) < 500:
        out.append(str(rng.choice(words, p=weights)))
    return " ".join(ref), " ".join(out)


def lines(text: str, width: int = 20) -> str:
    tokens = text.split()
    return "\n".join(" ".join(tokens[i : i + width]) for i in range(0, len(tokens), width))


def bench_rouge(pairs: list[tuple[str, str]], baseline_pairs: int) -> dict:
    from rouge_score import rouge_scorer

    from medhelm_core.metrics import RougeScorer

    ours = RougeScorer(use_stemmer=True)
    theirs = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    t0 = time.perf_counter()
    engine_scores = [ours.rouge_l(ref, out) for ref, out in pairs]
    engine_seconds = time.perf_counter() - t0

    subset = pairs[:baseline_pairs]
    t0 = time.perf_counter()
    baseline_scores = [theirs.score(ref, out)["rougeL"] for ref, out in subset]
    baseline_seconds = time.perf_counter() - t0
    for k, (mine, expected) in enumerate(zip(engine_scores, baseline_scores, strict=False)):
        got = (mine.precision, mine.recall, mine.fmeasure)
        want = (expected.precision, expected.recall, expected.fmeasure)
        assert got == want, f"pair {k}: engine {got} != rouge-score {want}"

    tokens = [len(ours.tokenize(ref)) + len(ours.tokenize(out)) for ref, out in pairs]
    lengths = [n for ref, out in pairs for n in (len(ours.tokenize(ref)), len(ours.tokenize(out)))]
    per_pair_engine = engine_seconds / len(pairs)
    per_pair_baseline = baseline_seconds / len(subset)
    result = {
        "pairs": len(pairs),
        "tokens_per_text": [min(lengths), int(np.mean(lengths)), max(lengths)],
        "tokens_total": int(sum(tokens)),
        "engine_seconds": round(engine_seconds, 3),
        "engine_pairs_per_second": round(len(pairs) / engine_seconds, 1),
        "baseline_pairs": len(subset),
        "baseline_seconds": round(baseline_seconds, 2),
        "baseline_seconds_for_all_pairs": round(per_pair_baseline * len(pairs), 1)
        if len(subset) < len(pairs) else round(baseline_seconds, 2),
        "speedup_per_pair": round(per_pair_baseline / per_pair_engine, 1),
        "equal_pairs": len(subset),
    }

    return result


def _cpu_best(works: dict[str, Callable[[], object]], rounds: int = 5) -> dict[str, float]:
    """Least CPU seconds of each work over ``rounds`` rounds, each round running every work once: the engine
    is single-threaded, and on a shared machine CPU time is what it costs (wall time also counts other jobs'
    turns); taking turns within a round exposes every work to the same load, so their ratios hold."""
    best = dict.fromkeys(works, float("inf"))
    for _ in range(rounds):
        for name, work in works.items():
            t0 = time.process_time()
            work()
            best[name] = min(best[name], time.process_time() - t0)
    return best


def bench_rouge_lines(pairs: list[tuple[str, str]], baseline_pairs: int) -> dict:
    """ROUGE-L, ROUGE-Lsum and both together on the same texts in 20-token lines, engine and rouge-score.

    The engine's three calls are ``rouge_l``, ``rouge_lsum`` and ``score`` (both, each text tokenized once);
    rouge-score's are ``RougeScorer(['rougeL'])``, ``(['rougeLsum'])`` and ``(['rougeL', 'rougeLsum'])``.
    """
    from rouge_score import rouge_scorer

    from medhelm_core.metrics import RougeScorer

    split = [(lines(ref), lines(out)) for ref, out in pairs]
    ours = RougeScorer(use_stemmer=True)
    for ref, out in split[:5]:
        ours.score(ref, out)  # nltk imported and the stem cache warm, as after the first items of a study
    engine = _cpu_best({
        "rougeL": lambda: [ours.rouge_l(ref, out) for ref, out in split],
        "rougeLsum": lambda: [ours.rouge_lsum(ref, out) for ref, out in split],
        "both": lambda: [ours.score(ref, out) for ref, out in split],
    })
    subset = split[:baseline_pairs]
    baseline, expected = {}, {}
    for name, types in (("rougeL", ["rougeL"]), ("rougeLsum", ["rougeLsum"]), ("both", ["rougeL", "rougeLsum"])):
        theirs = rouge_scorer.RougeScorer(types, use_stemmer=True)
        t0 = time.process_time()
        expected[name] = [theirs.score(ref, out) for ref, out in subset]
        baseline[name] = time.process_time() - t0
    for k, (ref, out) in enumerate(subset):
        mine = ours.score(ref, out)
        for name in ("rougeL", "rougeLsum"):
            want = expected["both"][k][name]
            got = mine[name]
            assert (got.precision, got.recall, got.fmeasure) == (want.precision, want.recall, want.fmeasure), (
                f"{name} pair {k}: engine {got} != rouge-score {want}")
            assert expected[name][k][name] == want
    per_pair = {name: engine[name] / len(split) for name in engine}
    return {
        "pairs": len(split),
        "baseline_pairs": len(subset),
        "engine_ms_per_pair": {name: round(1000 * v, 2) for name, v in per_pair.items()},
        "baseline_ms_per_pair": {name: round(1000 * baseline[name] / len(subset), 1) for name in baseline},
        "speedup": {name: round(baseline[name] / len(subset) / per_pair[name], 1) for name in baseline},
        "lsum_over_l": round(per_pair["rougeLsum"] / per_pair["rougeL"], 2),
        "both_over_l": round(per_pair["both"] / per_pair["rougeL"], 2),
        "baseline_lsum_over_l": round(baseline["rougeLsum"] / baseline["rougeL"], 2),
        "equal_pairs": len(subset),
    }


FIRST_CALL = """
import time
import numpy as np
import medhelm_core.metrics  # a process that scores has imported the package already
t0 = time.process_time()
from medhelm_core.metrics.union_lcs import LINE_BREAK, summary_hits
t1 = time.process_time()
summary_hits(np.array([1, 2, LINE_BREAK, 2, 1]), np.array([2, LINE_BREAK, 1]))
print(t1 - t0, time.process_time() - t1)
"""


def bench_first_call() -> dict:
    """CPU seconds of ROUGE-Lsum's first call in a new process, apart from the timings above (which are
    warm): importing the kernel's module (numba), then compiling the kernel (an empty cache, as after an
    install or an edit of union_lcs.py) or loading it from numba's disk cache (every later process). Each
    run is a fresh interpreter with a cache directory of its own (``NUMBA_CACHE_DIR``), so the tree's cache
    is neither used nor touched."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        runs = [subprocess.run([sys.executable, "-c", FIRST_CALL], env=env, capture_output=True, text=True,
                               check=True).stdout.split() for _ in range(2)]
    (import_cold, compile_seconds), (import_warm, load_seconds) = [[float(x) for x in run] for run in runs]
    return {
        "import_seconds": round(min(import_cold, import_warm), 2),
        "compile_seconds": round(compile_seconds, 2),
        "cached_load_seconds": round(load_seconds, 2),
    }


def bench_bertscore(n_pairs: int, rng: np.random.Generator, words: list[str], weights: np.ndarray) -> dict:
    from medhelm_core.metrics import bertscore_spec
    from medhelm_core.metrics.bertscore import BertScoreModel

    refs = [" ".join(rng.choice(words, size=90, p=weights)) + f" case {k}" for k in range(n_pairs)]
    cands = [" ".join(rng.choice(words, size=90, p=weights)) + f" answer {k}" for k in range(n_pairs)]
    assert len(set(refs) | set(cands)) == 2 * n_pairs, "every text must be unique"
    t0 = time.perf_counter()
    model = BertScoreModel(bertscore_spec(), device="cpu")
    load_seconds = time.perf_counter() - t0
    word_pieces = [len(model._tokenizer.encode(t)) for t in refs[:20] + cands[:20]]
    t0 = time.perf_counter()
    scores = model.score(cands, refs)
    seconds = time.perf_counter() - t0
    assert len(scores) == n_pairs
    import torch

    return {
        "pairs": n_pairs,
        "word_pieces_per_text": int(np.mean(word_pieces)),
        "model": "bundled all-MiniLM-L6-v2, layer 6, idf off",
        "load_seconds": round(load_seconds, 2),
        "seconds": round(seconds, 2),
        "pairs_per_second": round(n_pairs / seconds, 2),
        "torch_threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--baseline-pairs", type=int, default=100)
    parser.add_argument("--lsum-pairs", type=int, default=200,
                        help="Pairs in 20-token lines for ROUGE-L vs ROUGE-Lsum vs both (engine).")
    parser.add_argument("--lsum-baseline-pairs", type=int, default=20,
                        help="Of those, how many rouge-score also scores (about 2 s per pair for all three).")
    parser.add_argument("--bert-pairs", type=int, default=64)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    words, weights = vocabulary(rng)
    pairs = [note_pair(rng, words, weights) for _ in range(args.pairs)]
    figures = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "rougeL": bench_rouge(pairs, min(args.baseline_pairs, args.pairs)),
        "rouge_lines": bench_rouge_lines(pairs[: args.lsum_pairs], min(args.lsum_baseline_pairs, args.lsum_pairs)),
        "lsum_first_call": bench_first_call(),
        "bertscore": None,
        "install": install_size.measure(),
    }
    if args.bert_pairs and bertscore_available():
        figures["bertscore"] = bench_bertscore(args.bert_pairs, rng, words, weights)
    elif args.bert_pairs:
        figures["bertscore"] = {"skipped": BERTSCORE_INSTALL}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    r = figures["rougeL"]
    print(figures["machine"])
    print(f"ROUGE-L, {r['pairs']} pairs of {r['tokens_per_text'][0]}-{r['tokens_per_text'][2]} tokens "
          f"(mean {r['tokens_per_text'][1]}), stemmer on:")
    print(f"  engine      {r['engine_seconds']:>9.2f} s for all {r['pairs']} pairs "
          f"({r['engine_pairs_per_second']} pairs/s)")
    extrapolated = ""
    if r["baseline_pairs"] < r["pairs"]:
        extrapolated = f", so about {r['baseline_seconds_for_all_pairs']:.0f} s for all"
    which = f"all {r['pairs']}" if r["baseline_pairs"] == r["pairs"] else f"the first {r['baseline_pairs']}"
    print(f"  rouge-score {r['baseline_seconds']:>9.2f} s for {which} pairs{extrapolated}")
    verdict = "meets" if r["speedup_per_pair"] >= TARGET_RATIO else "MISSES"
    print(f"  speed-up    {r['speedup_per_pair']:>9.1f}x per pair ({verdict} the {TARGET_RATIO}x target); "
          f"equal on all {r['equal_pairs']} pairs rouge-score scored")
    x = figures["rouge_lines"]
    e, b0, sp = x["engine_ms_per_pair"], x["baseline_ms_per_pair"], x["speedup"]
    print(f"ROUGE-L vs ROUGE-Lsum, the first {x['pairs']} pairs in 20-token lines (CPU ms per pair; rouge-score on "
          f"the first {x['baseline_pairs']}, equal on all):")
    for name, label in (("rougeL", "ROUGE-L alone"), ("rougeLsum", "ROUGE-Lsum alone"), ("both", "both together")):
        print(f"  {label:<17} engine {e[name]:>7.2f}   rouge-score {b0[name]:>8.1f}   {sp[name]:>6.1f}x")
    verdict = "meets" if x["lsum_over_l"] <= 2 else "MISSES"
    print(f"  ROUGE-Lsum costs {x['lsum_over_l']}x ROUGE-L in the engine ({verdict} the 2x target; rouge-score: "
          f"{x['baseline_lsum_over_l']}x); both together {x['both_over_l']}x")
    f = figures["lsum_first_call"]
    print(f"  first ROUGE-Lsum of a process (CPU s, apart from the above): import numba {f['import_seconds']}, "
          f"then compile {f['compile_seconds']} (once per install) or load the cached kernel "
          f"{f['cached_load_seconds']}")
    i = figures["install"]
    print(f"Install: lean (-e .) {i['lean_mb']:.0f} MB, full (-e '.[bertscore]') {i['full_mb']:.0f} MB: lean is "
          f"{i['lean_share_of_full']:.0%} of full (benchmarks/install_size.py)")
    b = figures["bertscore"]
    if b and "skipped" in b:
        print(f"BERTScore: skipped. {b['skipped']}")
    elif b:
        print(f"BERTScore, {b['pairs']} unique pairs of about {b['word_pieces_per_text']} word pieces, {b['model']}, "
              f"CPU ({b['torch_threads']} threads): {b['pairs_per_second']} pairs/s "
              f"({b['seconds']} s; model load {b['load_seconds']} s)")


if __name__ == "__main__":
    main()
