"""ROUGE-L of this engine against Google's rouge-score in one run, and BERTScore pairs per second on CPU.

ROUGE-L: ``--pairs`` synthetic clinical-note pairs of 500 to 2,000 tokens (a reference note and an edited
copy as the model's output: words dropped, substituted and inserted, so the LCS is long), scored with the
stemmer on (as HELM). The engine scores every pair; rouge-score's pure-Python LCS takes about half a
second per pair at this size, so by default it scores the first ``--baseline-pairs`` pairs only, and the
speed-up is per pair on that subset. Every pair rouge-score scored is checked to be equal (F, P and R, to
the last bit) before any figure is printed. ROUGE-Lsum is timed the same way on the first
``--lsum-pairs`` pairs split into 20-token lines.

BERTScore: ``--bert-pairs`` pairs of about 200 word pieces, every text unique (bert-score embeds each distinct
text once, so repeated texts would flatter it), with the bundled all-MiniLM-L6-v2 at layer 6 on CPU.

    .venv/bin/python benchmarks/metrics.py                        # 2,000 pairs, baseline on the first 100
    .venv/bin/python benchmarks/metrics.py --baseline-pairs 2000 --lsum-pairs 50  # full baseline, ~20 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

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


def bench_rouge(pairs: list[tuple[str, str]], baseline_pairs: int, lsum_pairs: int) -> dict:
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

    theirs_lsum = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=True)
    split = [(lines(ref), lines(out)) for ref, out in pairs[:lsum_pairs]]
    t0 = time.perf_counter()
    mine_lsum = [ours.rouge_lsum(ref, out) for ref, out in split]
    lsum_engine = time.perf_counter() - t0
    t0 = time.perf_counter()
    want_lsum = [theirs_lsum.score(ref, out)["rougeLsum"] for ref, out in split]
    lsum_baseline = time.perf_counter() - t0
    for k, (mine, expected) in enumerate(zip(mine_lsum, want_lsum, strict=True)):
        assert (mine.precision, mine.recall, mine.fmeasure) == (expected.precision, expected.recall,
                                                                 expected.fmeasure), f"rougeLsum pair {k}"
    result["rougeLsum"] = {
        "pairs": len(split),
        "engine_seconds": round(lsum_engine, 3),
        "baseline_seconds": round(lsum_baseline, 2),
        "speedup": round(lsum_baseline / lsum_engine, 1),
        "equal_pairs": len(split),
    }
    return result


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
    parser.add_argument("--lsum-pairs", type=int, default=20)
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
        "rougeL": bench_rouge(pairs, min(args.baseline_pairs, args.pairs), min(args.lsum_pairs, args.pairs)),
        "bertscore": bench_bertscore(args.bert_pairs, rng, words, weights) if args.bert_pairs else None,
    }
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
    s = r["rougeLsum"]
    print(f"ROUGE-Lsum, first {s['pairs']} pairs in 20-token lines: engine {s['engine_seconds']:.2f} s, "
          f"rouge-score {s['baseline_seconds']:.2f} s, {s['speedup']}x, equal on all")
    b = figures["bertscore"]
    if b:
        print(f"BERTScore, {b['pairs']} unique pairs of about {b['word_pieces_per_text']} word pieces, {b['model']}, "
              f"CPU ({b['torch_threads']} threads): {b['pairs_per_second']} pairs/s "
              f"({b['seconds']} s; model load {b['load_seconds']} s)")


if __name__ == "__main__":
    main()
