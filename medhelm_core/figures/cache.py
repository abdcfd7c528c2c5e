"""The Agreement page's figures for a study and a choice of filters, kept current without making the page wait.

Three process-wide :class:`~medhelm_core.figures.refresh.RefreshStore` s hold what the page draws: the
study's scores (:class:`~medhelm_core.figures.data.DashboardData`, per database, study and jury-run
choice), the figures computed from them (:class:`AgreementFigures`, per those and the protocol, benchmark
and model filters) and the extra tables whose bootstrap takes seconds (:func:`extra_figures`, refreshed on
their own so that the headline figures never wait for them), each with the
:func:`~medhelm_core.frames.data_version` it was computed at.

A page run passes the current data version. Figures of that version are drawn as they are; older figures
are drawn at once, with :func:`freshness_note` saying how old they are, while the current ones are computed
in a background thread (the page polls :func:`figures_updating` and reruns itself); with no figures at all,
the run computes them and waits. A report export uses :func:`fresh_figures`, never stale ones.

The figures are shared between sessions: callers must not modify their frames.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import pandas as pd
from sqlalchemy.engine import Engine
from sqlmodel import Session

from medhelm_core.agreement import COMPOSITE, POOLED, rater_scores, validate_long
from medhelm_core.db.data_versions import WHOLE_STUDY, others_scope, scope_benchmark, scope_version
from medhelm_core.db.models import Study
from medhelm_core.errors import MedhelmError
from medhelm_core.figures.data import DashboardData, load_dashboard_data, reload_dashboard_data
from medhelm_core.figures.jury_versions import VERSION_STORE
from medhelm_core.figures.refresh import Lookup, RefreshStore
from medhelm_core.figures.tables import (
    bland_altman,
    clinician_leniency,
    compute_agreement,
    filter_long,
    headline_table,
    item_means,
    judge_subset_table,
    judge_table,
    largest_disagreements,
    robust_agreement,
    score_distribution,
)
from medhelm_core.frames import data_version
from medhelm_core.studies import get_study_by_id
from medhelm_core.tuning import tune_process


class ScopeRows(MutableMapping[Hashable, list]):
    """One choice of filters' rows of one table per benchmark scope and criterion, keyed by the scope's data
    version (see :func:`~medhelm_core.agreement.agreement_table`): after a rating on one benchmark only that
    benchmark's scopes and the pooled ones are computed again. :meth:`keep_only_used` then drops the rows of
    older versions, so what is kept is one table's worth (the rows are shared with the table itself).
    Thread-safe: a page run computing an extra table and a background update may use the same rows."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[Hashable, list] = {}
        self._used: set[Hashable] = set()

    def __getitem__(self, key: Hashable) -> list:
        with self._lock:
            found = self._rows[key]
            self._used.add(key)
            return found

    def __setitem__(self, key: Hashable, rows: list) -> None:
        with self._lock:
            self._rows[key] = rows
            self._used.add(key)

    def __delitem__(self, key: Hashable) -> None:
        with self._lock:
            del self._rows[key]

    def __iter__(self) -> Iterator[Hashable]:
        with self._lock:
            return iter(list(self._rows))

    def __len__(self) -> int:
        return len(self._rows)

    def keep_only_used(self) -> None:
        """Forget the rows no computation read or wrote since the last call (those of older versions)."""
        with self._lock:
            self._rows = {k: v for k, v in self._rows.items() if k in self._used}
            self._used = set()


class ScopeCache:
    """:class:`ScopeRows` per figure key (database, study, jury run and filters), the least recently used first
    to go. One computation runs per figure key at a time (:class:`RefreshStore`), so a key's rows are never
    written by two threads at once."""

    def __init__(self, max_keys: int = 16) -> None:
        self.max_keys = max_keys
        self._lock = threading.Lock()
        self._keys: OrderedDict[Hashable, ScopeRows] = OrderedDict()

    def rows(self, key: Hashable) -> ScopeRows:
        """The rows kept for ``key`` (created empty)."""
        with self._lock:
            found = self._keys.get(key)
            if found is None:
                found = self._keys[key] = ScopeRows()
            self._keys.move_to_end(key)
            while len(self._keys) > self.max_keys:
                self._keys.popitem(last=False)
            return found

    def clear(self) -> None:
        """Forget every key's rows."""
        with self._lock:
            self._keys.clear()


# The stores below live as long as the app's process, hold tens of MB per study and are recomputed in background
# threads beside the page runs.
tune_process()

#: the rows per figure key, table (the agreement table, the robust one, the judge subsets) and scope: as many
#: figure keys as the figure store keeps
SCOPE_CACHE = ScopeCache(max_keys=3 * 16)
#: the study's scores: a handful of studies and jury-run choices are open at once; each is tens of MB
DATA_STORE: RefreshStore[DashboardData] = RefreshStore(max_keys=4, name="study scores")
#: the figures per choice of filters (they share their study's scores)
FIGURE_STORE: RefreshStore[AgreementFigures] = RefreshStore(max_keys=16, name="agreement figures")
#: the extra tables (:data:`EXTRAS`) per choice of filters and table, each refreshed on its own: their bootstrap
#: takes seconds, and the headline figures must not wait for it to be current
EXTRA_STORE: RefreshStore[pd.DataFrame] = RefreshStore(max_keys=32, name="agreement extras")


@dataclass(frozen=True)
class FigureKey:
    """What a set of figures depends on besides the data: the database, the study and the page's choices.

    ``jury_run`` is the choice (None: the study's default run, resolved when the scores are loaded).
    """

    database: str
    study_id: int
    jury_run: int | None = None
    protocol: str = "medhelm"
    benchmarks: tuple[str, ...] = ()
    models: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        engine: Engine,
        study: Study,
        jury_run: int | None = None,
        protocol: str = "medhelm",
        benchmarks: Sequence[str] = (),
        models: Sequence[str] = (),
    ) -> FigureKey:
        """The key of these choices on ``engine``'s database (its URL without the password)."""
        return cls(engine.url.render_as_string(hide_password=True), int(study.id), jury_run, protocol,
                   tuple(benchmarks), tuple(models))

    @property
    def data_key(self) -> tuple[str, int, int | None]:
        """The key of the scores these figures are computed from."""
        return (self.database, self.study_id, self.jury_run)


@dataclass(frozen=True)
class CriterionViews:
    """The descriptive tables the page charts for one criterion (or the composite)."""

    means: pd.DataFrame
    limits: dict[str, float]
    leniency: pd.DataFrame
    distribution: pd.DataFrame
    disagreements: pd.DataFrame


T = TypeVar("T")

@dataclass(frozen=True, eq=False)
class AgreementFigures:
    """Everything the Agreement page draws for one choice of filters, from one version of the study's scores.

    The agreement table and its headline and per-judge views are computed up front; the per-criterion views
    and the extra tables on first use (and kept), since most criteria are never looked at. The page reads the
    extra tables through :func:`extra_figures`, which keeps them current on their own.
    """

    data: DashboardData
    protocol: str
    benchmarks: tuple[str, ...]
    models: tuple[str, ...]
    table: pd.DataFrame
    headline: pd.DataFrame
    judges: pd.DataFrame
    #: what the extra tables reuse of earlier versions (see :func:`scope_versions`): the scopes' versions and the
    #: rows kept per table ("robust", "judge subsets"); None: computed whole
    scope_versions: Mapping[str, Hashable] | None = field(default=None, repr=False)
    scope_rows: Callable[[str], ScopeRows] | None = field(default=None, repr=False)
    _views: dict[str, CriterionViews] = field(default_factory=dict, repr=False)
    _extras: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def robust(self) -> pd.DataFrame:
        """Gwet's AC2 and the weighted kappa with bootstrap intervals beside the ICC
        (:func:`~medhelm_core.agreement.robust.robust_table`), computed once."""
        return self._extra("robust")

    def judge_subsets(self) -> pd.DataFrame:
        """Each judge alone, the whole jury and every jury without one judge against the clinicians, with the
        clinicians' own ceiling (:func:`~medhelm_core.agreement.judge_subset_agreement`, composite), computed
        once; empty when the jury run has fewer than two judges."""
        return self._extra("judge_subsets")

    def _once(self, kept: dict[str, T], name: str, compute: Callable[[], T]) -> T:
        """``kept[name]``, computed on first use; two sessions asking at once may both compute it (the lock is
        not held while computing), and the first result is kept: the figures are the same."""
        with self._lock:
            found = kept.get(name)
        if found is None:
            found = compute()
            with self._lock:
                found = kept.setdefault(name, found)
        return found

    def _extra(self, name: str) -> pd.DataFrame:
        return self._once(self._extras, name, lambda: EXTRAS[name](self))

    def views(self, criterion: str = COMPOSITE) -> CriterionViews:
        """The descriptive tables of ``criterion``, computed once."""
        return self._once(self._views, criterion,
                          lambda: criterion_views(self.data, self.benchmarks, self.models, criterion))

    @property
    def criteria_viewed(self) -> tuple[str, ...]:
        """The criteria whose views have been computed (the next version computes them up front)."""
        with self._lock:
            return tuple(self._views)


def criterion_views(
    data: DashboardData, benchmarks: Sequence[str] = (), models: Sequence[str] = (), criterion: str = COMPOSITE
) -> CriterionViews:
    """Item means, Bland-Altman limits, clinician leniency, score distribution and the largest disagreements."""
    long = filter_long(data.long, benchmarks, models)
    scores = rater_scores(validate_long(long), criterion, data.criteria)  # once, for the means and the leniency
    means = item_means(long, criterion, data.criteria, scores)
    return CriterionViews(
        means=means,
        limits=bland_altman(means),
        leniency=clinician_leniency(long, criterion, data.criteria, scores),
        distribution=score_distribution(long, data.criteria),
        disagreements=largest_disagreements(means, data.items, 10),
    )


#: the tables computed on first use, by name
def _reused(figures: AgreementFigures, table: str, compute: Callable[..., pd.DataFrame]) -> pd.DataFrame:
    """``compute(scope_versions=..., scope_cache=...)`` reusing the rows kept for ``table`` where the figures
    have scope versions, then dropping the older versions' rows."""
    if figures.scope_rows is None or figures.scope_versions is None:
        return compute()
    rows = figures.scope_rows(table)
    out = compute(scope_versions=figures.scope_versions, scope_cache=rows)
    rows.keep_only_used()
    return out


EXTRAS: dict[str, Callable[[AgreementFigures], pd.DataFrame]] = {
    "robust": lambda f: _reused(f, "robust", lambda **reuse: robust_agreement(f.data, f.benchmarks, f.models,
                                                                              **reuse)),
    "judge_subsets": lambda f: _reused(f, "judge subsets", lambda **reuse: judge_subset_table(
        filter_long(f.data.long, f.benchmarks, f.models), **reuse)),
}


def compute_figures(
    data: DashboardData,
    protocol: str = "medhelm",
    benchmarks: Sequence[str] = (),
    models: Sequence[str] = (),
    criteria: Sequence[str] = (COMPOSITE,),
    scope_versions: Mapping[str, Hashable] | None = None,
    scope_rows: Callable[[str], ScopeRows] | None = None,
) -> AgreementFigures:
    """The agreement table of the chosen benchmarks and models, its headline and per-judge tables, and the
    views of ``criteria``.

    With ``scope_versions`` (:func:`scope_versions`) and ``scope_rows`` (the rows :data:`SCOPE_CACHE` keeps for
    the figure key, per table), the scopes whose version is kept are taken from it and only the others computed.

    Raises :class:`~medhelm_core.figures.NotEnoughRatingsError` when the data cannot support any figure.

    Examples
    --------
    >>> figures = compute_figures(data, "medhelm", ["aci_bench", "medi_qa"])  # doctest: +SKIP
    >>> figures.headline.query("benchmark == 'pooled'")  # doctest: +SKIP
    """
    reuse = scope_rows("agreement") if scope_rows is not None and scope_versions is not None else None
    table = compute_agreement(data.long, protocol, benchmarks, models, scope_versions=scope_versions,
                              scope_cache=reuse)
    if reuse is not None:
        reuse.keep_only_used()
    figures = AgreementFigures(
        data=data,
        protocol=protocol,
        benchmarks=tuple(benchmarks),
        models=tuple(models),
        table=table,
        headline=headline_table(table, protocol),
        judges=judge_table(table, protocol),
        scope_versions=scope_versions,
        scope_rows=scope_rows,
    )
    for criterion in criteria:
        figures.views(criterion)
    return figures


def scope_versions(key: FigureKey, data: DashboardData, version: Hashable) -> dict[str, Hashable] | None:
    """What each benchmark scope (and the pooled one) of ``key``'s agreement table depends on, from the study's
    :func:`~medhelm_core.frames.data_version` ``version``: the database, study, jury run and model filter, and
    the scope's counters (its benchmark's, the whole study's); the pooled scope, every counter. None when
    ``version`` is not a data version (nothing is reused then)."""
    if not (isinstance(version, tuple) and len(version) == 3 and isinstance(version[2], tuple)):
        return None
    counters = version[2]
    base = (key.database, key.study_id, data.jury_run.id if data.jury_run else None, key.models)
    out: dict[str, Hashable] = {b: (base, scope_version(counters, b)) for b in data.items["benchmark"].unique()}
    out[POOLED] = (base, counters)
    return out


def _load_data(engine: Engine, key: FigureKey, version: Hashable) -> DashboardData:
    """The study's scores at ``version`` or later, in a session of its own (what a background refresh runs): the
    benchmarks whose counters changed since the kept scores read again (:func:`reload_dashboard_data`), or all of
    them (:func:`load_dashboard_data`) when nothing is kept or the change concerns the whole study."""
    previous = DATA_STORE.latest(key.data_key)
    changed = changed_benchmarks(previous.version, version) if previous is not None else None
    with Session(engine) as session:
        study = get_study_by_id(session, key.study_id)
        if previous is None or previous.value is None or changed is None:
            return load_dashboard_data(session, study, key.jury_run)
        return reload_dashboard_data(session, study, previous.value, changed, key.jury_run,
                                     clinicians_only(previous.version, version, changed))


def changed_benchmarks(before: Hashable, after: Hashable) -> set[str] | None:
    """The benchmarks whose counters differ between two :func:`~medhelm_core.frames.data_version` s; None when the
    whole study's counter (or the study's settings, or a write not located) differs, or either is no data version.

    Examples
    --------
    >>> old = (1, 60.0, (("*", 3, "t"), ("a", 5, "t"), ("b", 2, "t")))
    >>> changed_benchmarks(old, (1, 60.0, (("*", 3, "t"), ("a", 6, "t"), ("b", 2, "t"))))
    {'a'}
    >>> changed_benchmarks(old, (1, 60.0, (("*", 4, "t"), ("a", 5, "t"), ("b", 2, "t")))) is None
    True
    """
    if not all(isinstance(v, tuple) and len(v) == 3 and isinstance(v[2], tuple) for v in (before, after)):
        return None
    if before[:2] != after[:2]:  # type: ignore[index]
        return None
    differ = set(before[2]) ^ set(after[2])  # type: ignore[index]
    scopes = {scope for scope, _, _ in differ}
    if scopes & {WHOLE_STUDY, "?", "~"}:
        return None
    # A benchmark's others scope names its benchmark (the scope itself is kept too: a reload ignores names that
    # are no benchmark of the study).
    return scopes | {scope_benchmark(scope) for scope in scopes}


def clinicians_only(before: Hashable, after: Hashable, benchmarks: Collection[str]) -> set[str]:
    """Of ``benchmarks`` (changed between two :func:`~medhelm_core.frames.data_version` s), those whose other
    scores' counter (:func:`~medhelm_core.db.data_versions.others_scope`) is the same in both: only their clinicians'
    ratings changed.

    Examples
    --------
    >>> from medhelm_core.db.data_versions import others_scope
    >>> old = (1, 60.0, (("*", 3, "t"), ("a", 5, "t"), ("b", 2, "t"), (others_scope("b"), 1, "t")))
    >>> new = (1, 60.0, (("*", 3, "t"), ("a", 6, "t"), ("b", 3, "t"), (others_scope("b"), 2, "t")))
    >>> sorted(clinicians_only(old, new, {"a", "b"}))
    ['a']
    """
    def counters(version: Hashable) -> dict[str, tuple[int, str]]:
        return {scope: (n, token) for scope, n, token in version[2]}  # type: ignore[index]

    old, new = counters(before), counters(after)
    return {b for b in benchmarks if old.get(others_scope(b)) == new.get(others_scope(b))}


def study_data(engine: Engine, key: FigureKey, version: Hashable) -> Lookup[DashboardData]:
    """The study's scores for ``key`` at ``version``: current, or older ones while the current load runs."""
    return DATA_STORE.lookup(key.data_key, version, lambda: _load_data(engine, key, version))


def agreement_figures(engine: Engine, key: FigureKey, version: Hashable) -> Lookup[AgreementFigures]:
    """The figures for ``key`` at ``version``: current, or older ones (marked stale) while the current ones are
    computed in the background; computed here (the caller waits) when there are none yet.

    Examples
    --------
    >>> with Session(engine) as session:  # doctest: +SKIP
    ...     version = data_version(session, study)
    >>> seen = agreement_figures(engine, FigureKey.of(engine, study), version)  # doctest: +SKIP
    >>> seen.value.headline, seen.stale, freshness_note(seen)  # doctest: +SKIP
    """
    return FIGURE_STORE.lookup(key, version, lambda: _compute(engine, key, version))


def fresh_figures(engine: Engine, key: FigureKey) -> AgreementFigures:
    """The figures for the data as it is now (what a report exports): waits for them, never returns stale ones."""
    with Session(engine) as session:
        version = data_version(session, get_study_by_id(session, key.study_id))
    return FIGURE_STORE.fresh(key, version, lambda: _compute(engine, key, version))


def extra_figures(
    engine: Engine, key: FigureKey, version: Hashable, name: str, *, wait: bool = True
) -> Lookup[pd.DataFrame]:
    """The extra table ``name`` (one of :data:`EXTRAS`) for ``key`` at ``version``: current, or an older one while
    the current one is computed in the background (from the current figures, which it waits for there); computed
    here when there is none yet, or, with ``wait=False``, in the background too (the lookup has no figures then:
    the page shows the rest and polls :func:`extra_updating`).

    Examples
    --------
    >>> seen = extra_figures(engine, key, version, "robust")  # doctest: +SKIP
    >>> seen.value, freshness_note(seen)  # doctest: +SKIP
    """
    if name not in EXTRAS:
        raise ValueError(f"no extra table {name!r}; one of {', '.join(EXTRAS)}")

    def compute() -> pd.DataFrame:
        current = FIGURE_STORE.fresh(key, version, lambda: _compute(engine, key, version))
        return current._extra(name)

    return EXTRA_STORE.lookup((key, name), version, compute, wait=wait)


def figures_updating(key: FigureKey) -> bool:
    """True while newer figures for ``key`` are being computed (its extra tables: :func:`extra_updating`)."""
    return FIGURE_STORE.updating(key)


def extra_updating(key: FigureKey, name: str) -> bool:
    """True while a newer extra table ``name`` for ``key`` is being computed: a page polls each of the three on
    its own, so that what is current is drawn at once rather than when the slowest is done."""
    return EXTRA_STORE.updating((key, name))


def retry_figures(key: FigureKey) -> None:
    """Forget a failed update of ``key`` (its scores, figures and extra tables), so that the next page run tries
    again."""
    DATA_STORE.retry(key.data_key)
    FIGURE_STORE.retry(key)
    for name in EXTRAS:
        EXTRA_STORE.retry((key, name))


def wait_for_updates(timeout: float | None = None) -> bool:
    """Wait until no background update is running, the jury-version comparisons' included (tests and benchmarks);
    False when ``timeout`` ran out."""
    stores = (EXTRA_STORE, FIGURE_STORE, DATA_STORE, VERSION_STORE)
    return all(store.wait_all(timeout) for store in stores)


def freshness_note(seen: Lookup, what: str = "figures") -> str | None:
    """What the page says above figures that are not current (None when they are): how old they are, and
    whether newer ones are coming or failed. ``what`` names them: "figures" (the page's), or "table" (one of the
    extra tables, which are current on their own)."""
    if seen.figures is None or seen.current:
        return None
    as_of = seen.figures.started_at.astimezone().strftime("%H:%M:%S %Z")
    these = "The figures below are" if what == "figures" else f"This {what} is"
    if seen.error is not None:
        return (f"Updating the {what} failed: {failure_reason(seen.error)}. {these} as of {as_of}, before the "
                "study's latest ratings, verdicts or scores.")
    if what != "figures":
        return f"{these} as of {as_of}: an updated one is being computed; the page refreshes by itself."
    return (f"Figures as of {as_of}: the study's ratings, verdicts or scores have changed since. Updating in the "
            "background; the page refreshes by itself.")


def failure_reason(error: BaseException) -> str:
    """One line for a failed computation: our own errors say what to do; others name their type (the server
    log has the traceback)."""
    return str(error) if isinstance(error, MedhelmError) else f"{type(error).__name__}: {error}"


def _compute(engine: Engine, key: FigureKey, version: Hashable) -> AgreementFigures:
    data = DATA_STORE.fresh(key.data_key, version, lambda: _load_data(engine, key, version))
    previous = FIGURE_STORE.latest(key)
    seen = previous.value if previous is not None and previous.value is not None else None
    criteria = seen.criteria_viewed if seen is not None else ()
    return compute_figures(data, key.protocol, key.benchmarks, key.models, criteria or (COMPOSITE,),
                           scope_versions(key, data, version), lambda table: SCOPE_CACHE.rows((key, table)))
