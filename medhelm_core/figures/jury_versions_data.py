"""What per-version agreement reads from the database: the clinicians, and every jury run with its versions.

Each jury run of a study that holds a surviving verdict (judges called here, or recorded scores) becomes
one version to compare: its jury score per item and criterion is the mean over its surviving (``ok``)
judges, :func:`medhelm_core.frames.jury_means` (what every other reader of the jury uses), and its label says what it
used (judges, rubric version, prompt template version). :func:`study_version_agreement` hands both to
:func:`medhelm_core.agreement.jury_versions.version_agreement`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
from sqlmodel import Session

from medhelm_core.agreement.jury_versions import version_agreement
from medhelm_core.db.models import Study
from medhelm_core.errors import NotFoundError
from medhelm_core.frames import clinician_ratings_frame, comparable_runs, judge_scores_frame, jury_means, without_items
from medhelm_core.jury.run_versions import RunVersions, run_versions
from medhelm_core.rating.gold import gold_item_ids

JURY_COLUMNS = ["run_id", "item_id", "criterion", "score", "label"]
#: what each row of the per-version table adds about its run
RUN_COLUMNS = ["source", "judges", "rubric_version", "prompt_name", "prompt_version", "short_label"]


@dataclass(frozen=True)
class VersionInputs:
    """A study's clinicians and jury runs, ready for :func:`~medhelm_core.agreement.jury_versions.version_agreement`
    (picklable, so a page can cache it)."""

    study_id: int
    study_name: str
    clinicians: pd.DataFrame = field(hash=False, compare=False)
    juries: pd.DataFrame = field(hash=False, compare=False)
    runs: tuple[RunVersions, ...] = ()


def load_version_inputs(session: Session, study: Study, run_ids: Sequence[int] | None = None) -> VersionInputs:
    """Load the clinicians' ratings and each jury run's mean per item and criterion, with the run's versions.

    Parameters
    ----------
    session : Session
        An open session (read only).
    study : Study
        The study.
    run_ids : sequence of int, optional
        Only these runs (default every run with a surviving verdict); each must be one of the study's.

    Returns
    -------
    VersionInputs
        ``clinicians`` in the long contract, ``juries`` with columns ``run_id``, ``item_id``,
        ``criterion``, ``score`` (mean over surviving judges) and ``label``, and ``runs`` (what each used).

    Examples
    --------
    >>> inputs = load_version_inputs(session, study)  # doctest: +SKIP
    >>> [r.label for r in inputs.runs]  # doctest: +SKIP
    ['run 1: openai/a; rubric medhelm v1; prompt medhelm v1', 'run 2: openai/a; rubric medhelm v1; prompt medhelm v2']
    """
    runs = comparable_runs(session, study)
    if run_ids is not None:
        known = {r.id: r for r in runs}
        missing = [i for i in run_ids if i not in known]
        if missing:
            listed = ", ".join(str(i) for i in known) or "none"
            raise NotFoundError(
                f"study {study.name!r} has no jury run {missing[0]} with verdicts (runs with verdicts: {listed})"
            )
        runs = [known[i] for i in dict.fromkeys(run_ids)]
    infos = tuple(run_versions(r, session) for r in runs)
    parts = []
    for run, info in zip(runs, infos, strict=True):
        scores = judge_scores_frame(session, run.id)
        means = jury_means(scores.assign(item_id=scores["item_id"].astype(str)))
        parts.append(means.assign(run_id=int(run.id), label=info.label))
    juries = pd.concat(parts, ignore_index=True)[JURY_COLUMNS] if parts else pd.DataFrame(columns=JURY_COLUMNS)
    clinicians = clinician_ratings_frame(session, study)
    clinicians["item_id"] = clinicians["item_id"].astype(str)
    gold = gold_item_ids(session, study)  # they measure the clinicians, not the jury
    return VersionInputs(int(study.id), study.name, without_items(clinicians, gold), without_items(juries, gold),
                         infos)


def version_table(inputs: VersionInputs, **options: object) -> pd.DataFrame:
    """:func:`~medhelm_core.agreement.jury_versions.version_agreement` on loaded inputs, with each run's
    ``source``, ``judges`` (tuple), ``rubric_version``, ``prompt_name``, ``prompt_version`` and ``short_label``
    (an axis label) added.

    ``options`` are those of ``version_agreement`` (``baseline``, ``by_criterion``, ``criteria``,
    ``benchmarks``, ``bootstrap``, ``n_resamples``, ``seed``, ``confidence``).
    """
    table = version_agreement(inputs.clinicians, inputs.juries, **options)
    info = pd.DataFrame(
        [{"run_id": r.run_id, "source": r.source, "judges": r.judges, "rubric_version": r.rubric_version,
          "prompt_name": r.prompt_name, "prompt_version": r.prompt_version, "short_label": r.short_label}
         for r in inputs.runs],
        columns=["run_id", *RUN_COLUMNS],
    )
    return table.merge(info, on="run_id", how="left")


def study_version_agreement(
    session: Session, study: Study, run_ids: Sequence[int] | None = None, **options: object
) -> pd.DataFrame:
    """Per-version jury-clinician agreement of a study's jury runs, in one call (see :func:`version_table`).

    Examples
    --------
    >>> table = study_version_agreement(session, study, baseline=1, n_resamples=2000)  # doctest: +SKIP
    >>> table[["label", "estimate", "diff", "diff_ci_low", "diff_ci_high", "change"]]  # doctest: +SKIP
    """
    return version_table(load_version_inputs(session, study, run_ids), **options)
