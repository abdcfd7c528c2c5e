"""What the Models page, ``medhelm models`` and the report all show about the models: one computation
(:func:`model_figures`, pure; :func:`study_model_figures` reads the study first), its tables as strings
for display, and plain sentences on what the data can and cannot tell.

The statistics are :mod:`medhelm_core.model_scores`; this module only chooses what to compute, says what is
missing (one model, no clinician ratings for a model, no jury, ratings that are not a random sample), and
formats figures with :mod:`medhelm_core.format` (``n/a``, never a NaN printed as a number).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlmodel import Session

from medhelm_core.agreement.contract import COMPOSITE
from medhelm_core.agreement.scopes import POOLED
from medhelm_core.db.models import RunSource, Study
from medhelm_core.errors import NotEnoughRatingsError, ValidationError
from medhelm_core.format import interval, intervals, number
from medhelm_core.model_scores import (
    CLINICIANS,
    JURY,
    Rankings,
    anchored_differences,
    clinician_anchored,
    item_scores,
    model_differences,
    model_means,
    model_rankings,
    ratings_needed,
    resample_means,
    sampling_status,
)
from medhelm_core.model_scores.anchored import (
    ANCHORED_COLUMNS,
    ANCHORED_DIFFERENCE_COLUMNS,
    CENSUS,
    NEEDED_COLUMNS,
    NOT_RANDOM,
)
from medhelm_core.model_scores.scores import aligned_ids

#: how a source is named on the page and in the report
SOURCE_LABELS = {CLINICIANS: "clinicians", JURY: "jury", "rougeL_f": "ROUGE-L", "bertscore_f1": "BERTScore F1"}
ANCHORED = "clinician-anchored"


def source_label(source: str) -> str:
    """How a source is named for a reader (a judge keeps its model name).

    Examples
    --------
    >>> source_label("rougeL_f"), source_label("openai/gpt-4o")
    ('ROUGE-L', 'openai/gpt-4o')
    """
    return SOURCE_LABELS.get(source, source)


@dataclass(frozen=True)
class ModelOptions:
    """What the model figures cover and how they are computed (enough to recompute them from the bundle)."""

    jury_run_id: int | None = None
    benchmarks: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    n_resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95
    #: the clinician-scale interval half-width the "how many more ratings" table plans for
    half_width: float = 0.1

    def __post_init__(self) -> None:
        if self.n_resamples < 0:
            raise ValidationError(f"n_resamples must be 0 or more, got {self.n_resamples}")
        if not 0 < self.confidence < 1:
            raise ValidationError(f"confidence must lie strictly between 0 and 1, got {self.confidence}")
        if not self.half_width > 0:
            raise ValidationError(f"the half-width must be above 0, got {self.half_width}")
        object.__setattr__(self, "benchmarks", tuple(self.benchmarks))
        object.__setattr__(self, "models", tuple(self.models))


@dataclass
class ModelFigures:
    """Every model figure of a study, for one set of options (picklable, so pages can cache it)."""

    options: ModelOptions
    criteria: tuple[str, ...]
    scale: tuple[float, float]
    jury_label: str
    recorded_jury: bool
    #: :func:`~medhelm_core.model_scores.item_scores`: the exact input of every other table
    scores: pd.DataFrame
    #: one row per item: benchmark, instance, model and how it came to be rated or not
    design: pd.DataFrame
    means: pd.DataFrame
    differences: pd.DataFrame
    rankings: Rankings
    status: pd.DataFrame
    anchored: pd.DataFrame
    anchored_differences: pd.DataFrame
    needed: pd.DataFrame
    #: what is missing or degenerate, said plainly (one model, no clinician ratings, no jury ...)
    messages: list[str] = field(default_factory=list)

    @property
    def jury_note(self) -> str:
        """Which jury run the scores come from, in a sentence; a recorded run says that no judge was called."""
        if self.recorded_jury:
            return (f"Recorded jury scores: {self.jury_label} was imported from elsewhere; no judges were called by "
                    "this app.")
        return f"Jury: {self.jury_label}."

    @property
    def models(self) -> list[str]:
        """The models, sorted."""
        return sorted(self.design["model"].unique())

    @property
    def benchmarks(self) -> list[str]:
        """The benchmarks, sorted."""
        return sorted(self.design["benchmark"].unique())

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by name (the data bundle's ``model_*`` files and ``medhelm models --json``)."""
        return {
            "model_item_scores": self.scores,
            "model_design": self.design,
            "model_means": self.means,
            "model_differences": self.differences,
            "model_ranks": self.rankings.ranks,
            "model_tau": self.rankings.tau,
            "model_swaps": self.rankings.swaps,
            "model_win_rates": self.rankings.win_rates,
            "model_sampling": self.status,
            "model_anchored": self.anchored,
            "model_anchored_differences": self.anchored_differences,
            "model_ratings_needed": self.needed,
        }


def _filtered(frame: pd.DataFrame, options: ModelOptions) -> pd.DataFrame:
    if options.benchmarks:
        frame = frame[frame["benchmark"].isin(options.benchmarks)]
    if options.models:
        frame = frame[frame["model"].isin(options.models)]
    return frame.reset_index(drop=True)


def model_figures(scores: pd.DataFrame, design: pd.DataFrame, options: ModelOptions | None = None, *,
                  criteria: tuple[str, ...] = (), scale: tuple[float, float] = (1, 5), jury_label: str = "",
                  recorded_jury: bool = False) -> ModelFigures:
    """Compute every model figure from the per-item scores and the rating design (pure; no database).

    Parameters
    ----------
    scores : pandas.DataFrame
        :func:`~medhelm_core.model_scores.item_scores` of the study's items.
    design : pandas.DataFrame
        :func:`~medhelm_core.frames.rating_design_frame`: every item (``item_id``, ``benchmark``,
        ``instance_id``, ``model``) and ``rated``, ``assigned``, ``drawn``.
    options : ModelOptions, optional
        Benchmarks and models to keep, resamples, seed, confidence, half-width to plan for.
    criteria, scale, jury_label, recorded_jury
        The rubric's criteria and scale and which jury run the scores come from, for the display.

    Returns
    -------
    ModelFigures

    Raises
    ------
    NotEnoughRatingsError
        When there is no item, or no score of any kind, to describe.

    Examples
    --------
    >>> items = pd.DataFrame({"item_id": range(4), "benchmark": "b", "instance_id": [0, 0, 1, 1],
    ...                       "model": ["m1", "m2"] * 2})
    >>> long = pd.DataFrame({"item_id": range(4), "rater_id": "jury", "rater_kind": "jury",
    ...                      "criterion": "accuracy", "score": [4.0, 3.0, 5.0, 3.0]})
    >>> figs = model_figures(item_scores(long, items), items.assign(rated=False, assigned=False, drawn=False),
    ...                      ModelOptions(n_resamples=100))
    >>> figs.messages[0][:60]
    'No clinician ratings yet: the scores below are the jury and '
    """
    options = options or ModelOptions()
    design = _filtered(design, options)
    if design.empty:
        raise NotEnoughRatingsError("no items to describe (import items, or widen the benchmark and model filters)")
    items = design[["item_id", "benchmark", "instance_id", "model"]]
    ids, item_ids = aligned_ids(scores["item_id"], items["item_id"])
    scores = scores[ids.isin(item_ids)].assign(item_id=ids).reset_index(drop=True)
    if scores.empty:
        raise NotEnoughRatingsError("no clinician ratings, jury verdicts or metric scores yet: nothing to say about "
                                    "the models")
    resampled = resample_means(scores, items, n_resamples=options.n_resamples, seed=options.seed)
    status = sampling_status(design)
    has_jury = (scores["source"] == JURY).any()
    has_clinicians = (scores["source"] == CLINICIANS).any()
    anchored = clinician_anchored(scores, status, options.confidence) if has_jury and has_clinicians else \
        pd.DataFrame(columns=ANCHORED_COLUMNS)
    needed = ratings_needed(scores, status, options.half_width, options.confidence) if has_jury and has_clinicians \
        else pd.DataFrame(columns=NEEDED_COLUMNS)
    figures = ModelFigures(
        options=options,
        criteria=tuple(criteria) or tuple(c for c in scores["criterion"].drop_duplicates() if c != COMPOSITE),
        scale=scale,
        jury_label=jury_label,
        recorded_jury=recorded_jury,
        scores=scores,
        design=design,
        means=model_means(resampled, options.confidence),
        differences=model_differences(resampled, confidence=options.confidence),
        rankings=model_rankings(resampled, confidence=options.confidence),
        status=status,
        anchored=anchored,
        anchored_differences=anchored_differences(anchored, options.confidence) if not anchored.empty else
        pd.DataFrame(columns=ANCHORED_DIFFERENCE_COLUMNS),
        needed=needed,
    )
    figures.messages = _messages(figures, has_jury, has_clinicians)
    return figures


def _names(values: list[str], limit: int = 4) -> str:
    shown = ", ".join(values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _messages(figures: ModelFigures, has_jury: bool, has_clinicians: bool) -> list[str]:
    messages = []
    models = figures.models
    if len(models) == 1:
        messages.append(f"Only one model ({models[0]}): there is nothing to rank or compare; its scores are below.")
    if not has_clinicians:
        messages.append("No clinician ratings yet: the scores below are the jury and the metrics alone, with nothing "
                        "to anchor them on the clinicians.")
    else:
        rated = set(figures.scores.loc[figures.scores["source"] == CLINICIANS, "model"])
        unrated = [m for m in models if m not in rated]
        if unrated:
            messages.append(f"No clinician ratings for {_names(unrated)}: no clinician or clinician-anchored score "
                            "for them, and they are left out of the comparison with the clinicians' order.")
    if not has_jury:
        messages.append("No jury scores: the clinician-anchored scores need the jury's score of every item (run the "
                        "jury on the Jury page).")
    status = figures.status
    wrong = status[status["status"] == NOT_RANDOM]
    if len(wrong):
        cells = [f"{m} on {b}" for m, b in zip(wrong["model"], wrong["benchmark"], strict=True)]
        messages.append(f"The rated items of {_names(cells)} were not assigned by this app (imported ratings), so "
                        "they may not be a random sample of the model's items: no clinician-anchored score there. "
                        "Assign the remaining items here to rate a random sample.")
    if has_clinicians and len(status) and (status["status"] == CENSUS).all():
        messages.append("Every item is rated by clinicians: the clinician-anchored score is the clinicians' own mean "
                        "and the jury cannot narrow it; the intervals say how much the items themselves leave open.")
    return messages


def study_model_figures(session: Session, study: Study, options: ModelOptions | None = None) -> ModelFigures:
    """Read a study (its items but gold ones, every score, the rating design) and compute its model figures.

    Examples
    --------
    >>> figs = study_model_figures(session, study, ModelOptions(half_width=0.2))  # doctest: +SKIP
    >>> reading(figs)  # doctest: +SKIP
    """
    from medhelm_core.frames import model_items_frame, model_scores_long, rating_design_frame
    from medhelm_core.rubric import rubric_spec

    options = options or ModelOptions()
    items = model_items_frame(session, study)
    long, run = model_scores_long(session, study, options.jury_run_id, items)
    rubric = rubric_spec(session, study.rubric_id)
    criteria = tuple(c.name for c in rubric.criteria)
    scale = (min(c.scale_min for c in rubric.criteria), max(c.scale_max for c in rubric.criteria))
    design = rating_design_frame(session, study, items)
    label = "no jury run" if run is None else f"jury run {run.id}: {run.name}"
    recorded = run is not None and run.source == RunSource.recorded
    return model_figures(item_scores(long, items, criteria), design, options, criteria=criteria, scale=scale,
                         jury_label=label, recorded_jury=recorded)


def _pooled(frame: pd.DataFrame, criterion: str) -> pd.DataFrame:
    return frame[(frame["benchmark"] == POOLED) & (frame["criterion"] == criterion)]


def reading(figures: ModelFigures, criterion: str = COMPOSITE) -> list[str]:
    """What the figures can and cannot tell, in plain sentences (the page's opening, the CLI's and the report's).

    It says how many items the clinicians rated, how wide the models' intervals are on the scale, how many
    pairs of models the clinicians tell apart, whether the jury's order of the models is known to match the
    clinicians', and how much the jury adds on the clinicians' scale.
    """
    out = []
    scores = figures.scores
    clin = scores[(scores["source"] == CLINICIANS) & (scores["criterion"] == criterion)]
    models = figures.models
    low, high = figures.scale
    if not clin.empty:
        per_model = clin.groupby("model")["item_id"].nunique().reindex(models, fill_value=0)
        means = _pooled(figures.means, criterion)
        clin_means = means[means["source"] == CLINICIANS]
        widths = (clin_means["ci_high"] - clin_means["ci_low"]).dropna()
        sentence = (f"{clin['item_id'].nunique()} items rated by clinicians ({_count_range(per_model)} per model, "
                    f"{len(models)} models).")
        if len(widths):
            sentence += (f" The clinicians' 95% intervals of the models' {criterion} means are "
                         f"{number(widths.median(), 2)} points wide (median) on the {number(low, 0)}-"
                         f"{number(high, 0)} scale.")
        out.append(sentence)
        diffs = _pooled(figures.differences, criterion)
        clin_diffs = diffs[diffs["source"] == CLINICIANS]
        if len(clin_diffs):
            apart = int(clin_diffs["verdict"].str.endswith("higher").sum())
            out.append(f"Of the {len(clin_diffs)} pairs of models, the clinicians' paired intervals tell {apart} apart"
                       f"{'' if apart else ': no model is shown better than another'}.")
    tau = figures.rankings.tau
    jury_tau = tau[(tau["source"] == JURY) & (tau["criterion"] == criterion)]
    if len(jury_tau):
        row = jury_tau.iloc[0]
        if np.isfinite(row["tau_b"]):
            text = (f"Kendall's tau-b between the jury's and the clinicians' order of the {int(row['n_models'])} "
                    f"models: {number(row['tau_b'], 2)} (95% CI {interval(row['ci_low'], row['ci_high'])})")
            if np.isfinite(row["ci_low"]) and row["ci_low"] <= 0 <= row["ci_high"]:
                text += ": these data cannot say whether the jury orders the models as the clinicians do."
            elif np.isfinite(row["ci_low"]) and row["ci_low"] > 0:
                text += ": the jury's order agrees with the clinicians' beyond chance."
            else:
                text += "."
            out.append(text)
        else:
            out.append(f"The jury's order cannot be compared with the clinicians': {row['note']}.")
    status = figures.status
    if len(status) and (status["status"] == CENSUS).all():
        out.append("Every item is already rated, so more ratings of these items cannot narrow the intervals: telling "
                   "these models apart takes more items.")
    anchored = _pooled(figures.anchored, criterion)
    usable = anchored.dropna(subset=["anchored_low"])
    if len(usable):
        gain = (usable["n_effective"] / usable["n_rated"]).replace([np.inf, -np.inf], np.nan).dropna()
        if len(gain) and (figures.status["status"] != CENSUS).any():
            out.append(f"With the jury, the clinician-anchored scores are worth {number(gain.median(), 1)} times the "
                       "clinician ratings they rest on (median over models; 1 means the jury adds nothing).")
    return out


def _count_range(counts: pd.Series) -> str:
    low, high = int(counts.min()), int(counts.max())
    return str(low) if low == high else f"{low} to {high}"


def _fmt(values: pd.Series, digits: int = 2) -> list[str]:
    return [number(v, digits) for v in values]


def means_display(means: pd.DataFrame, criterion: str = COMPOSITE, benchmark: str = POOLED) -> pd.DataFrame:
    """Each model's mean by every source, with the interval, as strings (one row per model and source)."""
    rows = means[(means["criterion"] == criterion) & (means["benchmark"] == benchmark)]
    return pd.DataFrame({
        "model": rows["model"],
        "source": rows["source"].map(source_label),
        "mean": _fmt(rows["mean"]),
        "95% CI": intervals(rows["ci_low"], rows["ci_high"]),
        "items": rows["n_items"].astype(str),
        "note": rows["note"],
    }).reset_index(drop=True)


def anchored_display(anchored: pd.DataFrame, criterion: str = COMPOSITE, benchmark: str = POOLED) -> pd.DataFrame:
    """The clinician-anchored table as strings: per model, clinicians alone, the jury alone, clinician-anchored."""
    rows = anchored[(anchored["criterion"] == criterion) & (anchored["benchmark"] == benchmark)]
    return pd.DataFrame({
        "model": rows["model"],
        "rated / items": [f"{r} / {n}" for r, n in zip(rows["n_rated"], rows["n_items"], strict=True)],
        "clinicians": _fmt(rows["clinician_mean"]),
        "clinicians 95% CI": intervals(rows["clinician_low"], rows["clinician_high"]),
        "jury": _fmt(rows["jury_mean"]),
        "jury 95% CI": intervals(rows["jury_low"], rows["jury_high"]),
        ANCHORED: _fmt(rows["anchored"]),
        f"{ANCHORED} 95% CI": intervals(rows["anchored_low"], rows["anchored_high"]),
        "effective ratings": [number(v, 0) for v in rows["n_effective"]],
        "lambda": _fmt(rows["lam"]),
        "note": rows["note"],
    }).reset_index(drop=True)


def differences_display(differences: pd.DataFrame, criterion: str = COMPOSITE, benchmark: str = POOLED,
                        source: str | None = None) -> pd.DataFrame:
    """Paired differences between models as strings."""
    rows = differences[(differences["criterion"] == criterion) & (differences["benchmark"] == benchmark)]
    if source is not None:
        rows = rows[rows["source"] == source]
    return pd.DataFrame({
        "model A": rows["model_a"], "model B": rows["model_b"], "source": rows["source"].map(source_label),
        "A - B": _fmt(rows["difference"]), "95% CI": intervals(rows["ci_low"], rows["ci_high"]),
        "paired instances": rows["n_paired"].astype(str), "reading": rows["verdict"], "note": rows["note"],
    }).reset_index(drop=True)


def anchored_differences_display(table: pd.DataFrame, criterion: str = COMPOSITE,
                                 benchmark: str = POOLED) -> pd.DataFrame:
    """Clinician-anchored differences between models (beside the clinicians-only ones) as strings."""
    rows = table[(table["criterion"] == criterion) & (table["benchmark"] == benchmark)]
    return pd.DataFrame({
        "model A": rows["model_a"], "model B": rows["model_b"],
        f"A - B, {ANCHORED}": _fmt(rows["difference"]), "95% CI": intervals(rows["ci_low"], rows["ci_high"]),
        "reading": rows["verdict"], "A - B, clinicians": _fmt(rows["clinician_difference"]),
        "clinicians 95% CI": intervals(rows["clinician_low"], rows["clinician_high"]), "note": rows["note"],
    }).reset_index(drop=True)


def tau_display(tau: pd.DataFrame, criterion: str = COMPOSITE) -> pd.DataFrame:
    """Kendall's tau-b of each source against the clinicians' order, as strings."""
    rows = tau[tau["criterion"] == criterion]
    return pd.DataFrame({
        "source": rows["source"].map(source_label), "tau-b": _fmt(rows["tau_b"]),
        "95% CI": intervals(rows["ci_low"], rows["ci_high"]), "models": rows["n_models"].astype(str),
        "note": rows["note"],
    }).reset_index(drop=True)


def win_rates_display(win_rates: pd.DataFrame, criterion: str = COMPOSITE,
                      sources: tuple[str, ...] = (CLINICIANS, JURY)) -> pd.DataFrame:
    """HELM's mean win rate by each of ``sources``, side by side (one row per model), as strings."""
    rows = win_rates[(win_rates["criterion"] == criterion) & win_rates["source"].isin(sources)]
    models = sorted(rows["model"].unique())
    out: dict[str, Any] = {"model": models}
    for source in sources:
        part = rows[rows["source"] == source].set_index("model").reindex(models)
        label = source_label(source)
        out[f"win rate, {label}"] = _fmt(part["win_rate"])
        out[f"{label} 95% CI"] = intervals(part["ci_low"], part["ci_high"])
    return pd.DataFrame(out)


def needed_display(needed: pd.DataFrame, criterion: str = COMPOSITE) -> pd.DataFrame:
    """How many more clinician ratings each model needs, with and without the jury, as strings."""
    rows = needed[needed["criterion"] == criterion]
    return pd.DataFrame({
        "model": rows["model"],
        "rated / items": [f"{r} / {n}" for r, n in zip(rows["n_rated"], rows["n_items"], strict=True)],
        "half-width now (clinicians)": _fmt(rows["half_width_now"]),
        "more ratings, clinicians alone": [number(v, 0) for v in rows["more_without_jury"]],
        "more ratings, with the jury": [number(v, 0) for v in rows["more_with_jury"]],
        "PPI correlation": _fmt(rows["ppi_corr"]),
        "note": rows["note"],
    }).reset_index(drop=True)


def status_display(status: pd.DataFrame) -> pd.DataFrame:
    """Per model and benchmark: how many items, how many rated, and whether they are a random sample."""
    return pd.DataFrame({
        "model": status["model"], "benchmark": status["benchmark"],
        "rated / items": [f"{r} / {n}" for r, n in zip(status["n_rated"], status["n_items"], strict=True)],
        "drawn by 'rate these next'": status["n_drawn"].astype(str), "sample": status["status"],
        "note": status["note"],
    })


def json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A table as JSON-ready records: NaN and infinities become null, numpy scalars plain Python.

    Examples
    --------
    >>> json_records(pd.DataFrame({"a": [1.5, float("nan")], "b": ["x", "y"]}))
    [{'a': 1.5, 'b': 'x'}, {'a': None, 'b': 'y'}]
    """
    records = []
    for row in frame.to_dict("records"):
        clean = {}
        for key, value in row.items():
            if isinstance(value, (np.generic,)):
                value = value.item()
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            clean[key] = value
        records.append(clean)
    return records


__all__ = [
    "ANCHORED",
    "ModelFigures",
    "ModelOptions",
    "anchored_differences_display",
    "anchored_display",
    "differences_display",
    "json_records",
    "means_display",
    "model_figures",
    "needed_display",
    "reading",
    "source_label",
    "status_display",
    "study_model_figures",
    "tau_display",
    "win_rates_display",
]
