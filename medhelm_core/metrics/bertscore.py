"""BERTScore with the bert-score package, on a model that is on this machine, never downloaded.

The scores are bert-score's own: the same tokenizer and model loading (``bert_score.utils.get_tokenizer``,
``get_model``), the same idf weights (``get_idf_dict``) and the same greedy matching
(``bert_cos_score_idf``), so they equal ``bert_score.score(cands, refs, model_type=<folder>,
num_layers=N, idf=...)``. What this module adds is loading a model once per process, offline
(``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` unless already set), on the GPU when there is one.

Texts are cut at the model's maximum length (512 word pieces for MiniLM), as bert-score does.
torch and bert-score take seconds to import, so they are imported here only when a model is loaded.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from medhelm_core.errors import ValidationError
from medhelm_core.metrics.spec import BertScoreSpec, bertscore_spec

__all__ = ["BertScore", "BertScoreModel", "bertscore", "default_device"]


@dataclass(frozen=True)
class BertScore:
    """BERTScore of one candidate against its reference (raw, not rescaled)."""

    precision: float
    recall: float
    f1: float


def _offline() -> None:
    # Set before transformers or huggingface_hub is imported: they read these once, at import.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def default_device() -> str:
    """``cuda`` when torch sees a GPU, else ``cpu``."""
    _offline()
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@lru_cache(maxsize=2)
def _load(path: str, num_layers: int, device: str) -> tuple[Any, Any]:
    """Tokenizer and model, loaded once per process and kept (about 90 MB for MiniLM)."""
    _offline()
    from bert_score.utils import get_model, get_tokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # its loading bar would garble the CLI's progress bar
    try:
        tokenizer = get_tokenizer(path, use_fast=False)  # bert_score.score's default
        model = get_model(path, num_layers)
    except (OSError, ValueError, AssertionError) as exc:
        raise ValidationError(f"cannot load BERTScore model {path}: {exc}") from exc
    model.to(device)
    _restore_empty_text_encoding(tokenizer)
    return tokenizer, model


def _restore_empty_text_encoding(tokenizer: Any) -> None:
    """bert-score 0.3.13 encodes an empty text as ``build_inputs_with_special_tokens([])``, a tokenizer
    method that transformers 5 removed, so it crashes on an empty output or reference. Give this tokenizer
    that method back (the special tokens alone, which is what it returned), so an empty text scores 0,
    as bert-score says it does."""
    if hasattr(tokenizer, "build_inputs_with_special_tokens"):
        return
    specials = list(tokenizer.encode("", add_special_tokens=True))
    tokenizer.build_inputs_with_special_tokens = lambda ids, *_: [*specials[:1], *ids, *specials[1:]]


class BertScoreModel:
    """A BERTScore model and layer, loaded and ready to score many pairs.

    Parameters
    ----------
    spec : BertScoreSpec
        From :func:`medhelm_core.metrics.bertscore_spec`.
    device : str, optional
        ``cuda`` or ``cpu``; by default the GPU when there is one.

    Examples
    --------
    >>> from medhelm_core.metrics import bertscore_spec
    >>> scorer = BertScoreModel(bertscore_spec())
    >>> [round(s.f1, 2) for s in scorer.score(["no fever"], ["no fever"])]
    [1.0]
    """

    def __init__(self, spec: BertScoreSpec, device: str | None = None) -> None:
        self.spec = spec
        self.device = device or default_device()
        self._tokenizer, self._model = _load(spec.path, spec.num_layers, self.device)

    def idf_weights(self, corpus: Sequence[str]) -> dict[int, float]:
        """bert-score's idf weights over ``corpus`` (one document per entry, duplicates counted)."""
        from bert_score.utils import get_idf_dict

        # nthreads=0: the same counts without a process pool (forking a process that holds torch, or
        # a Streamlit server, is asking for trouble).
        return get_idf_dict(list(corpus), self._tokenizer, nthreads=0)

    def score(
        self,
        candidates: Sequence[str],
        references: Sequence[str],
        *,
        idf_weights: dict[int, float] | None = None,
        batch_size: int = 64,
    ) -> list[BertScore]:
        """Score each candidate against the reference at the same position.

        With ``spec.idf`` and no ``idf_weights``, the weights come from ``references``, as in
        ``bert_score.score(..., idf=True)``. ``batch_size`` is bert-score's: texts per forward pass.
        """
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        if not candidates:
            return []
        from bert_score.utils import bert_cos_score_idf

        if self.spec.idf:
            weights = idf_weights if idf_weights is not None else self.idf_weights(references)
        else:
            weights = defaultdict(lambda: 1.0)
            weights[self._tokenizer.sep_token_id] = 0
            weights[self._tokenizer.cls_token_id] = 0
        preds = bert_cos_score_idf(
            self._model,
            list(references),
            list(candidates),
            self._tokenizer,
            weights,
            batch_size=batch_size,
            device=self.device,
        ).cpu()
        return [BertScore(p, r, f) for p, r, f in preds.tolist()]


def bertscore(
    candidates: Sequence[str],
    references: Sequence[str],
    *,
    model: str | None = None,
    layer: int | None = None,
    idf: bool = False,
    batch_size: int = 64,
) -> list[BertScore]:
    """BERTScore of each candidate against its reference, with the bundled MiniLM unless told otherwise.

    Examples
    --------
    >>> scores = bertscore(["The patient has a fever."], ["Patient is febrile."])
    >>> 0 < scores[0].f1 < 1
    True
    """
    return BertScoreModel(bertscore_spec(model, layer, idf)).score(candidates, references, batch_size=batch_size)
