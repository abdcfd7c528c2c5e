"""The jury's verdicts as frames: each verdict flattened to one row per criterion, and the jury mean.

One flattening (:func:`judge_scores_frame`) and one mean (:func:`jury_means`) serve the agreement engine,
the dashboard (which adds each judge as a rater), the comparison of jury versions and the jury's results
page. The jury score of an item and criterion is the mean over the run's surviving (``ok``) judges, with
``n_judges`` saying how many it rests on; an item with no surviving judge has no jury score, never a
default. A failed verdict is kept as one row with no criterion and a NaN score: counted, never averaged.

A jury run with repeated samples (``JuryConfig.samples`` > 1) holds k verdicts per item and judge: every
reader here sees the judge's mean over its ``ok`` samples, so a judge is still one rater with one score per
item and criterion (with one sample, nothing changes). ``judge_scores_frame(..., samples=True)`` gives the
samples themselves, for :func:`medhelm_core.agreement.bias.self_consistency`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pandas as pd
from sqlalchemy import Text, type_coerce
from sqlmodel import Session, col, select

from medhelm_core.db.models import Item, JudgeVerdict, JuryRun, Study, VerdictStatus
from medhelm_core.frames.items import item_identity_frame
from medhelm_core.frames.rows import LONG_COLUMNS, json_values
from medhelm_core.frames.runs import study_jury_run

SCORE_COLUMNS = ["item_id", "judge", "status", "criterion", "score"]
#: :func:`judge_scores_frame` with ``texts=True``: the item's identity and what the judge said
VERDICT_COLUMNS = ["item_id", "benchmark", "instance_id", "model", "judge", "status", "criterion", "score",
                   "explanation", "error", "raw_response"]
ITEM_SCORE_COLUMNS = ["item_id", "benchmark", "instance_id", "model", "jury_score", "n_judges", "n_failed"]
MEAN_COLUMNS = ["item_id", "criterion", "score", "n_judges"]
OK = VerdictStatus.ok.value


def judge_scores_frame(
    session: Session,
    run_id: int,
    *,
    texts: bool = False,
    samples: bool = False,
    benchmarks: Collection[str] | None = None,
) -> pd.DataFrame:
    """Each verdict of a run, one row per criterion: ``item_id`` (an int), ``judge``, ``status``,
    ``criterion``, ``score``.

    A failed verdict (or one that holds no score) gives one row with no criterion and a NaN score. With
    ``texts``, the rows come in item and judge order with the item's ``benchmark``, ``instance_id`` and
    ``model`` and the judge's ``explanation`` (per criterion), ``error`` and ``raw_response``
    (:data:`VERDICT_COLUMNS`); without, only ids and scores are read (the dashboard's 60,000 verdicts).

    Repeated samples of a judge are averaged (:func:`mean_over_samples`); with ``samples`` every sample is a row
    of its own, with a ``sample`` column (0 .. k-1). With ``benchmarks`` (ids and scores only), the verdicts of
    those benchmarks' items only.

    Examples
    --------
    >>> frame = judge_scores_frame(session, run.id, texts=True)  # doctest: +SKIP
    >>> frame.query("status == 'ok'").groupby("judge").score.mean()  # doctest: +SKIP
    """
    columns = [JudgeVerdict.item_id, JudgeVerdict.judge, JudgeVerdict.status, type_coerce(JudgeVerdict.scores, Text)]
    statement = select(*columns, JudgeVerdict.sample).where(JudgeVerdict.jury_run_id == run_id)
    if benchmarks is not None and not texts:
        statement = statement.join(Item, Item.id == JudgeVerdict.item_id).where(
            col(Item.benchmark).in_(list(benchmarks)))
    if texts:
        statement = (
            select(*columns, type_coerce(JudgeVerdict.explanations, Text), JudgeVerdict.error,
                   JudgeVerdict.raw_response, Item.benchmark, Item.instance_id, Item.model, JudgeVerdict.sample)
            .join(Item, Item.id == JudgeVerdict.item_id)
            .where(JudgeVerdict.jury_run_id == run_id)
            .order_by(JudgeVerdict.item_id, JudgeVerdict.judge, JudgeVerdict.sample)
        )
    rows = session.connection().execute(statement).all()
    names = VERDICT_COLUMNS if texts else SCORE_COLUMNS
    if not rows:
        return pd.DataFrame([], columns=[*names, "sample"] if samples else names)
    flat: dict[str, list[Any]] = {c: [] for c in [*names, "sample"]}
    scores = json_values([r[3] for r in rows])
    explanations = json_values([r[4] for r in rows]) if texts else [None] * len(rows)
    for row, score_map, said in zip(rows, scores, explanations, strict=True):
        item_id, judge, status = row[0], row[1], row[2]
        pairs = score_map.items() if status == OK and score_map else [(None, float("nan"))]
        for criterion, score in pairs:
            flat["item_id"].append(item_id)
            flat["judge"].append(judge)
            flat["status"].append(status)
            flat["criterion"].append(criterion)
            flat["score"].append(float(score))
            flat["sample"].append(int(row[-1] or 0))
            if texts:
                flat["benchmark"].append(row[7])
                flat["instance_id"].append(row[8])
                flat["model"].append(row[9])
                flat["explanation"].append((said or {}).get(criterion, "") if criterion is not None else "")
                flat["error"].append(row[5])
                flat["raw_response"].append(row[6])
    frame = pd.DataFrame(flat)
    if samples:
        return frame[[*names, "sample"]]
    return mean_over_samples(frame)[names]


def mean_over_samples(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per item, judge and criterion: a judge's repeated samples (a ``sample`` column) averaged.

    The score is the mean over the judge's ``ok`` samples of the item (other columns: those of its first
    sample); a judge with no ``ok`` sample of an item keeps one failed row. A frame without ``sample`` or with
    one sample per judge and item is returned as it is (without the ``sample`` column).

    Examples
    --------
    >>> scores = pd.DataFrame({"item_id": [1, 1, 1, 2], "judge": ["a", "a", "a", "a"],
    ...                        "status": ["ok", "ok", "failed", "failed"], "criterion": ["acc", "acc", None, None],
    ...                        "score": [4.0, 3.0, float("nan"), float("nan")], "sample": [0, 1, 2, 0]})
    >>> mean_over_samples(scores)
       item_id judge  status criterion  score
    0        1     a      ok       acc    3.5
    1        2     a  failed      None    NaN
    """
    if "sample" not in scores.columns:
        return scores
    if scores.empty or not (scores["sample"] > 0).any():
        return scores.drop(columns="sample")
    ordered = scores.sort_values(["item_id", "judge", "sample"], kind="stable")
    ok = ordered[(ordered["status"] == OK) & ordered["criterion"].notna()]
    means = ok.groupby(["item_id", "judge", "criterion"], sort=False).agg(
        {c: ("mean" if c == "score" else "first") for c in ok.columns if c not in ("item_id", "judge", "criterion")}
    ).reset_index()
    judged = set(zip(ok["item_id"], ok["judge"], strict=True))
    failed = ordered[(ordered["status"] != OK) | ordered["criterion"].isna()]
    failed = failed[[(i, j) not in judged for i, j in zip(failed["item_id"], failed["judge"], strict=True)]]
    failed = failed.drop_duplicates(["item_id", "judge"])
    out = pd.concat([means[ordered.columns], failed], ignore_index=True)
    out = out.sort_values(["item_id", "judge"], kind="stable", ignore_index=True)
    out["criterion"] = out["criterion"].astype(object).where(out["criterion"].notna(), None)
    return out.drop(columns="sample")


def surviving(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of a :func:`judge_scores_frame` that count: ``ok`` verdicts' scores."""
    return scores[scores["status"] == OK].dropna(subset=["criterion"])


def jury_means(scores: pd.DataFrame) -> pd.DataFrame:
    """The jury mean per item and criterion over surviving judges, with ``n_judges``: :data:`MEAN_COLUMNS`.

    ``scores`` is a :func:`judge_scores_frame`; the rows are sorted by ``item_id`` (as its type sorts) and
    criterion.

    Examples
    --------
    >>> scores = pd.DataFrame({"item_id": [1, 1, 1], "judge": ["a", "b", "c"], "status": ["ok", "ok", "failed"],
    ...                        "criterion": ["accuracy", "accuracy", None], "score": [4.0, 3.0, float("nan")]})
    >>> jury_means(scores)
       item_id criterion  score  n_judges
    0        1  accuracy    3.5         2
    """
    return _means(surviving(mean_over_samples(scores)))


def _means(ok: pd.DataFrame) -> pd.DataFrame:
    if ok.empty:
        return pd.DataFrame(columns=MEAN_COLUMNS)
    grouped = ok.groupby(["item_id", "criterion"])
    means = grouped["score"].mean().reset_index()
    # One row per item, judge and criterion (repeated samples are averaged first), so a group's size is its
    # number of judges.
    means["n_judges"] = grouped.size().to_numpy()
    return means[MEAN_COLUMNS]


def jury_long(
    scores: pd.DataFrame, items: pd.DataFrame, *, judges: bool = False, several_judges: bool | None = None
) -> pd.DataFrame:
    """The jury in the long contract (``rater_kind='jury'``, with ``n_judges``), placed by ``items``.

    ``items`` gives each ``item_id`` its ``benchmark`` and ``model`` (ids of the same type as in
    ``scores``). With ``judges``, and when the run has several judges, each judge is added as a rater of
    kind ``judge`` (for "which judge to trust"); its rows have no ``n_judges``. ``several_judges`` says whether
    the run has several (default: told from ``scores``, which must then be the whole run's).
    """
    ok = surviving(scores)
    if ok.empty:
        return pd.DataFrame(columns=[*LONG_COLUMNS, "n_judges"])
    identity = items.set_index("item_id")
    jury = _means(ok)
    jury = jury.assign(
        benchmark=jury["item_id"].map(identity["benchmark"]),
        model=jury["item_id"].map(identity["model"]),
        rater_id="jury",
        rater_kind="jury",
    )[[*LONG_COLUMNS, "n_judges"]]
    if several_judges is None:
        several_judges = ok["judge"].nunique() >= 2
    if not judges or not several_judges:
        return jury
    placed = ok.merge(items[["item_id", "benchmark", "model"]], on="item_id", how="inner")
    each = placed.rename(columns={"judge": "rater_id"}).assign(rater_kind="judge")[LONG_COLUMNS]
    return pd.concat([jury, each], ignore_index=True)


def jury_long_frame(session: Session, study: Study, jury_run_id: int | None = None) -> pd.DataFrame:
    """Jury means per item and criterion (``rater_kind='jury'``, ``item_id`` an int), with ``n_judges``.

    Uses the given run (it must be the study's), else the study's newest run with any surviving verdict.
    """
    run = study_jury_run(session, study, jury_run_id)
    if run is None:
        return pd.DataFrame(columns=[*LONG_COLUMNS, "n_judges"])
    return jury_long(judge_scores_frame(session, run.id), item_identity_frame(session, study))


def item_jury_scores(session: Session, run: JuryRun) -> pd.DataFrame:
    """Per item of the run's study: the jury score over surviving judges and criteria, and how many judges.

    The score is the unweighted mean of every surviving judge's every criterion. Every item of the study
    is listed (:data:`ITEM_SCORE_COLUMNS`); one without a surviving judge has ``jury_score`` NaN and
    ``n_failed`` counts its failed verdicts.
    """
    items = item_identity_frame(session, session.get(Study, run.study_id)).sort_values("item_id", ignore_index=True)
    if items.empty:
        return pd.DataFrame([], columns=ITEM_SCORE_COLUMNS)
    scores = judge_scores_frame(session, run.id)
    ok = surviving(scores)
    per_item = ok.groupby("item_id").agg(jury_score=("score", "mean"), n_judges=("judge", "nunique"))
    failed = scores[scores["status"] != OK].groupby("item_id").size()
    return items.assign(
        jury_score=items["item_id"].map(per_item["jury_score"]).astype(float),
        n_judges=items["item_id"].map(per_item["n_judges"]).fillna(0).astype(int),
        n_failed=items["item_id"].map(failed).fillna(0).astype(int),
    )[ITEM_SCORE_COLUMNS]


def item_verdicts_frame(session: Session, run_id: int, item_id: int) -> pd.DataFrame:
    """One item's verdicts in a run, one row per judge (and sample, for a jury with repeated samples): ``judge``,
    ``status``, ``score_<criterion>`` ..., ``explanation_<criterion>`` ..., ``error`` (the dashboard's drill-down)."""
    verdicts = session.exec(
        select(JudgeVerdict)
        .where(JudgeVerdict.jury_run_id == run_id, JudgeVerdict.item_id == item_id)
        .order_by(JudgeVerdict.judge, JudgeVerdict.sample)
    ).all()
    return pd.DataFrame(
        [
            {
                "judge": v.judge,
                "status": v.status,
                **{f"score_{k}": s for k, s in v.scores.items()},
                **{f"explanation_{k}": e for k, e in v.explanations.items()},
                "error": v.error or "",
            }
            for v in verdicts
        ]
    )


def verdicts_frame(session: Session, study: Study) -> pd.DataFrame:
    """Every judge verdict of the study (failed ones included, with their raw text), one row per verdict,
    its scores in ``score_<criterion>`` columns and its ``sample`` (0 .. k-1 for a jury with repeated samples),
    what the exports hold."""
    rows = session.connection().execute(
        select(JudgeVerdict.jury_run_id, JuryRun.name, JuryRun.source, JudgeVerdict.item_id, JudgeVerdict.judge,
               JudgeVerdict.status, type_coerce(JudgeVerdict.scores, Text), JudgeVerdict.error,
               JudgeVerdict.raw_response, JudgeVerdict.sample)
        .join(JuryRun, JuryRun.id == JudgeVerdict.jury_run_id)
        .where(JuryRun.study_id == study.id)
        .order_by(JudgeVerdict.id)
    ).all()
    scores = json_values([r[6] for r in rows])
    keys = ("jury_run_id", "jury_run", "source", "item_id", "judge", "status")
    return pd.DataFrame(
        [
            {**dict(zip(keys, row[:6], strict=True)), **{f"score_{k}": v for k, v in said.items()},
             "error": row[7], "raw_response": row[8], "sample": row[9]}
            for row, said in zip(rows, scores, strict=True)
        ]
    )
