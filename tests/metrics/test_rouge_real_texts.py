"""ROUGE-L and ROUGE-Lsum equal rouge-score on real clinical texts: the demo study's outputs and references,
the MedHELM validation study's answers (multi-section clinical notes, one against another of the same
instance) and a HELM run's completions against their references."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from itertools import combinations

import pytest
from conftest import REPO
from rouge_score import rouge_scorer

from medhelm_core.metrics import RougeScorer

csv.field_size_limit(10_000_000)


def _demo_pairs() -> list[tuple[str, str]]:
    lines = (REPO / "annotations" / "demo" / "items.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [(row["reference"], row["output"]) for row in rows if row.get("reference")]


def _validation_pairs(limit: int) -> list[tuple[str, str]]:
    answers: dict[tuple[str, str], list[str]] = defaultdict(list)
    with open(REPO / "annotations" / "medhelm_validation" / "item_texts.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            answers[(row["dataset_name"], row["instance_id"])].append(row["answer"])
    pairs = [pair for texts in answers.values() for pair in combinations(texts, 2)]
    return pairs[:limit]


def _helm_pairs() -> list[tuple[str, str]]:
    run = next((REPO / "tests" / "data" / "helm_medication_qa" / "runs" / "TEST").iterdir())
    states = json.loads((run / "scenario_state.json").read_text())["request_states"]
    return [(s["instance"]["references"][0]["output"]["text"], s["result"]["completions"][0]["text"])
            for s in states]


@pytest.mark.parametrize("use_stemmer", [True, False], ids=["stemmer", "no-stemmer"])
def test_real_clinical_texts_score_as_rouge_score_does(use_stemmer):
    pairs = _demo_pairs() + _validation_pairs(40) + _helm_pairs()
    assert len(pairs) > 50
    assert sum("\n" in reference for reference, _ in pairs) > 20  # many summaries of several lines
    ours = RougeScorer(use_stemmer=use_stemmer)
    theirs = rouge_scorer.RougeScorer(["rougeL", "rougeLsum"], use_stemmer=use_stemmer)
    for k, (reference, prediction) in enumerate(pairs):
        expected = theirs.score(reference, prediction)
        got = ours.score(reference, prediction)
        assert got["rougeL"] == ours.rouge_l(reference, prediction)
        assert got["rougeLsum"] == ours.rouge_lsum(reference, prediction)
        for name in ("rougeL", "rougeLsum"):
            want = expected[name]
            assert (got[name].precision, got[name].recall, got[name].fmeasure) == (
                want.precision, want.recall, want.fmeasure), f"pair {k}, {name}"
