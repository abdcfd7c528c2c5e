"""The Agreement page's comparison of jury versions, kept current without making the page wait.

Every jury run of a study is a version (its judges, rubric wording and prompt template); the table of
:func:`~medhelm_core.figures.jury_versions_data.version_table` sets their jury-clinician agreement side by side,
on the items every run scored, with the paired bootstrap interval of each run's difference from a baseline.
Beside it stands the clinicians' own ceiling: each clinician against the mean of the others
(:func:`~medhelm_core.agreement.leave_one_clinician_out`), summarised by its median and range, so that a
version is judged against what humans reach, not only against the previous version.

The table is kept in its own :class:`~medhelm_core.figures.refresh.RefreshStore`, per study, benchmark
filter and baseline, with the data version it was computed at, as the page's other figures are.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import pandas as pd
from sqlalchemy.engine import Engine
from sqlmodel import Session

from medhelm_core.agreement import COMPOSITE, clinician_ceiling, leave_one_clinician_out
from medhelm_core.agreement.jury_versions import VERSION_COLUMNS
from medhelm_core.db.models import Study
from medhelm_core.figures.jury_versions_data import RUN_COLUMNS, load_version_inputs, version_table
from medhelm_core.figures.refresh import Lookup, RefreshStore
from medhelm_core.studies import get_study_by_id


@dataclass(frozen=True)
class VersionKey:
    """What a comparison of versions depends on besides the data."""

    database: str
    study_id: int
    benchmarks: tuple[str, ...] = ()
    baseline: int | None = None

    @classmethod
    def of(
        cls, engine: Engine, study: Study, benchmarks: Sequence[str] = (), baseline: int | None = None
    ) -> VersionKey:
        """The key of these choices on ``engine``'s database (its URL without the password)."""
        return cls(engine.url.render_as_string(hide_password=True), int(study.id), tuple(benchmarks), baseline)


@dataclass(frozen=True)
class VersionFigures:
    """Jury-clinician agreement per jury run, and the clinicians' ceiling it is read against."""

    table: pd.DataFrame = field(hash=False, compare=False)
    #: median ICC(3,k) of each clinician against the mean of the others (NaN without enough overlap)
    ceiling: float = float("nan")
    ceiling_low: float = float("nan")
    ceiling_high: float = float("nan")
    ceiling_clinicians: int = 0

    @property
    def runs(self) -> list[int]:
        """The runs compared, in their order (the baseline's first unless another was chosen)."""
        return [int(r) for r in dict.fromkeys(self.table["run_id"])] if not self.table.empty else []


VERSION_STORE: RefreshStore[VersionFigures] = RefreshStore(max_keys=8, name="version agreement")


def compute_version_figures(
    session: Session, study: Study, benchmarks: Sequence[str] = (), baseline: int | None = None,
    n_resamples: int = 2000,
) -> VersionFigures:
    """Per-version agreement of every jury run of ``study`` with verdicts, and the clinicians' ceiling.

    Examples
    --------
    >>> figures = compute_version_figures(session, study, baseline=1)  # doctest: +SKIP
    >>> figures.table[["label", "estimate", "diff", "change"]], figures.ceiling  # doctest: +SKIP
    """
    inputs = load_version_inputs(session, study)
    empty = pd.DataFrame(columns=[*VERSION_COLUMNS, *RUN_COLUMNS])
    clinicians = inputs.clinicians
    if benchmarks:
        clinicians = clinicians[clinicians["benchmark"].isin(list(benchmarks))]
    if clinicians.empty:
        return VersionFigures(empty)
    found = clinician_ceiling(leave_one_clinician_out(clinicians, COMPOSITE))
    ceiling = {"ceiling": found.estimate, "ceiling_low": found.low, "ceiling_high": found.high,
               "ceiling_clinicians": found.clinicians}
    if inputs.juries.empty:
        return VersionFigures(empty, **ceiling)
    known = [r.run_id for r in inputs.runs]
    table = version_table(inputs, baseline=baseline if baseline in known else None,
                          benchmarks=list(benchmarks) or None, n_resamples=n_resamples)
    return VersionFigures(table, **ceiling)


def _compute(engine: Engine, key: VersionKey) -> VersionFigures:
    with Session(engine) as session:
        return compute_version_figures(session, get_study_by_id(session, key.study_id), key.benchmarks, key.baseline)


def version_figures(
    engine: Engine, key: VersionKey, version: Hashable, *, wait: bool = True
) -> Lookup[VersionFigures]:
    """The comparison of versions for ``key`` at data ``version``: current, or the previous one (marked stale)
    while the current one is computed in the background; with none yet, computed here, or with ``wait=False`` in
    the background as well (see :meth:`~medhelm_core.figures.refresh.RefreshStore.lookup`)."""
    return VERSION_STORE.lookup(key, version, lambda: _compute(engine, key), wait=wait)


def versions_updating(key: VersionKey) -> bool:
    """True while a newer comparison of versions for ``key`` is being computed."""
    return VERSION_STORE.updating(key)
