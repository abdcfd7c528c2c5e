"""Per-study, per-benchmark version counters, bumped in the transaction of every write that can change a figure.

The Agreement page asks on every run whether its cached figures are current. Fingerprinting the study's rows
(counts and maxima over ratings, verdicts and scores) costs eight aggregate scans, half a second at 100,000
items; a counter costs one primary-key read. The counters live in :class:`~medhelm_core.db.models.DataVersion`,
one row per study and scope (a benchmark, or ``"*"`` for the whole study), and are kept here, in one place, so
that no writer can forget them:

- ORM writes (``session.add``, attribute changes, ``session.delete``) of the models in :data:`TRACKED` are
  noted after each flush;
- Core statements run through a session (``session.execute(insert(Rating), rows)``, an ``update(...)``) are
  noted as they execute: an insert by the item ids or study ids of its rows, an update or delete by a where
  clause as "some study" (every study's figures are recomputed: rare, and never stale);
- a write of a benchmark's scores other than the clinicians' ratings (verdicts, metric scores, gold ranges) also
  bumps that benchmark's :func:`others_scope`: a reload after a rating, which leaves it as it was, reads the
  clinicians' rows of the benchmark again and keeps the rest;
- at commit, the noted items are resolved to their study and benchmark and every touched counter is bumped, in
  key order (no deadlock between two committers), just before the commit: the row lock a bump takes on
  PostgreSQL is held for the commit only, never while a long import or assignment runs.

A write on a bare connection (``engine.begin()``: the jury's verdict writer) bypasses the session: it calls
:func:`bump_items` (or :func:`bump`) itself, in its own transaction.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Table, event, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import ORMExecuteState, SessionTransaction, UOWTransaction
from sqlalchemy.orm import Session as OrmSession

from medhelm_core.db.models import (
    DataVersion,
    GoldRange,
    Item,
    JudgeVerdict,
    JuryRun,
    MetricScore,
    Rating,
    RatingSubmission,
    Study,
)

#: the scope of a write that concerns the whole study (its settings, its jury runs, its items)
WHOLE_STUDY = "*"
#: the study of a write whose study could not be told (an update or delete by a where clause)
ANY_STUDY = 0
#: tables whose rows hang off an item: a write is located by ``item_id``
ITEM_TABLES = frozenset(m.__tablename__ for m in (Rating, RatingSubmission, JudgeVerdict, MetricScore, GoldRange))
#: tables of the clinicians' own ratings: a write there leaves a benchmark's :func:`others_scope` as it is
CLINICIAN_TABLES = frozenset(m.__tablename__ for m in (Rating, RatingSubmission))
#: tables located by ``study_id`` (or, for the study itself, ``id``): a write concerns the whole study
STUDY_TABLES = frozenset(m.__tablename__ for m in (Item, JuryRun, Study))
#: every model whose writes can change a figure
TRACKED = (Item, Rating, RatingSubmission, JudgeVerdict, JuryRun, MetricScore, GoldRange, Study)
#: ids per ``IN`` list when locating items (under SQLite's and PostgreSQL's parameter limits)
_CHUNK = 5000
_PENDING = "medhelm_data_versions"
#: what joins a benchmark's name to its others scope (led by a control character, unlikely in a benchmark's name;
#: a benchmark whose name ends with it is still read again when it changes: ``changed_benchmarks`` keeps the scope
#: itself as well as the benchmark it names)
_OTHERS = "\x1fothers"

Key = tuple[int, str]


def bump(session_or_connection: OrmSession | Connection, study_id: int, scope: str = WHOLE_STUDY) -> None:
    """Bump the counter of ``study_id`` and ``scope`` (a benchmark, or ``"*"``) now, in the caller's transaction.

    For writers on a bare connection; a session's writes are counted by themselves (see the module's docstring).

    Examples
    --------
    >>> with engine.begin() as conn:  # doctest: +SKIP
    ...     conn.execute(insert(JudgeVerdict.__table__), rows)
    ...     bump(conn, study.id, "medi_qa")
    """
    _bump(session_or_connection, [(int(study_id), str(scope))])


def bump_items(session_or_connection: OrmSession | Connection, item_ids: Iterable[int]) -> None:
    """Bump the counters of the studies and benchmarks of ``item_ids`` now, in the caller's transaction, as a write
    of scores other than the clinicians' ratings (the jury's verdicts): their benchmarks' others scopes too."""
    _bump(session_or_connection, _locate(session_or_connection, set(item_ids), others=True))


def others_scope(benchmark: str) -> str:
    """The scope counting a benchmark's writes other than the clinicians' ratings (verdicts, metric scores, gold
    ranges): when it has not changed, neither have the benchmark's jury and metric scores.

    Examples
    --------
    >>> from medhelm_core.db.data_versions import others_scope, scope_benchmark
    >>> scope_benchmark(others_scope("medi_qa")), scope_benchmark("medi_qa")
    ('medi_qa', 'medi_qa')
    """
    return f"{benchmark}{_OTHERS}"


def scope_benchmark(scope: str) -> str:
    """The benchmark a counter's scope belongs to (itself, or the benchmark of an :func:`others_scope`)."""
    return scope[: -len(_OTHERS)] if scope.endswith(_OTHERS) else scope


def renew_tokens(connection: Connection) -> None:
    """Give every counter a new token, after a restore put older counters back.

    A restored counter goes back to the version it had at the backup, and the writes after the restore count up
    again through versions the figures cache has already seen for other data; with a new token none of them
    is taken for the figures of before.
    """
    connection.execute(DataVersion.__table__.update().values(token=secrets.token_hex(8)))


def study_versions(session: OrmSession, study_id: int) -> tuple[tuple[str, int, str], ...]:
    """``(scope, version, token)`` of every counter of the study, and of the "any study" counter (scope ``"?"``).

    One primary-key range read, whatever the study's size. A session with writes of its own not committed yet
    (it reads them, others do not) gets one more entry, ``("~", n, token)``, that changes with each of them.
    """
    rows = session.execute(
        select(DataVersion.study_id, DataVersion.scope, DataVersion.version, DataVersion.token).where(
            DataVersion.study_id.in_([int(study_id), ANY_STUDY])
        )
    ).all()
    found = tuple(sorted((scope if sid else "?", int(version), token) for sid, scope, version, token in rows))
    pending = session.info.get(_PENDING)
    if pending:  # this session's own writes, not committed yet: what it reads is not what the counters say
        found += (("~", pending["seq"], pending["token"]),)
    return found


def scope_version(versions: Iterable[tuple[str, int, str]], benchmark: str) -> tuple[tuple[str, int, str], ...]:
    """The part of :func:`study_versions` that one benchmark's figures depend on: its own counter, the whole
    study's and the "any study" one."""
    return tuple(v for v in versions if v[0] in (benchmark, WHOLE_STUDY, "?"))


# -- noting writes ---------------------------------------------------------------------------------------------


def _pending(session: OrmSession) -> dict[str, Any]:
    """The writes noted in the session's open transaction; ``seq`` counts the notes (see :func:`study_versions`)."""
    pending = session.info.setdefault(_PENDING, {"keys": set(), "items": set(), "other_items": set(), "seq": 0,
                                                 "token": secrets.token_hex(8)})
    pending["seq"] += 1
    return pending


def _note_object(pending: dict[str, set], obj: Any) -> None:
    if isinstance(obj, Study):
        pending["keys"].add((int(obj.id) if obj.id is not None else ANY_STUDY, WHOLE_STUDY))
    elif isinstance(obj, (Item, JuryRun)):
        pending["keys"].add((int(obj.study_id) if obj.study_id is not None else ANY_STUDY, WHOLE_STUDY))
    elif obj.item_id is not None:
        pending[_items_of(obj.__tablename__)].add(int(obj.item_id))
    else:
        pending["keys"].add((ANY_STUDY, WHOLE_STUDY))


@event.listens_for(OrmSession, "after_flush")
def _after_flush(session: OrmSession, _flush: UOWTransaction) -> None:
    """Note the tracked objects this flush wrote (new, changed or deleted)."""
    touched = [o for o in session.new if isinstance(o, TRACKED)]
    touched += [o for o in session.deleted if isinstance(o, TRACKED)]
    touched += [o for o in session.dirty
                if isinstance(o, TRACKED) and session.is_modified(o, include_collections=False)]
    if touched:
        pending = _pending(session)
        for obj in touched:
            _note_object(pending, obj)


@event.listens_for(OrmSession, "do_orm_execute")
def _on_execute(state: ORMExecuteState) -> None:
    """Note a Core insert, update or delete of a tracked table run through the session."""
    if not (state.is_insert or state.is_update or state.is_delete):
        return
    table = getattr(state.statement, "table", None)
    name = getattr(table, "name", None)
    if name not in ITEM_TABLES and name not in STUDY_TABLES:
        return
    pending = _pending(state.session)
    rows = _rows(state)
    if state.is_insert and rows is not None:
        field = "item_id" if name in ITEM_TABLES else ("id" if name == Study.__tablename__ else "study_id")
        found = [row.get(field) for row in rows]
        if all(v is not None for v in found):
            if name in ITEM_TABLES:
                pending[_items_of(name)].update(int(v) for v in found)
            else:
                pending["keys"].update((int(v), WHOLE_STUDY) for v in found)
            return
    pending["keys"].add((ANY_STUDY, WHOLE_STUDY))


def _items_of(table: str) -> str:
    """Where a write of ``table`` notes its items: with the clinicians' ratings, or with the other scores."""
    return "items" if table in CLINICIAN_TABLES else "other_items"


def _rows(state: ORMExecuteState) -> list[Mapping[str, Any]] | None:
    """The rows an insert writes, as dicts keyed by column name, when they are all given as parameters."""
    params = state.parameters
    if isinstance(params, Mapping):
        params = [params]
    values = getattr(state.statement, "_values", None) or getattr(state.statement, "_multi_values", None)
    if values:
        return None  # values() inside the statement: not read here (counted as "some study")
    if not params:
        return None
    return [{getattr(k, "key", k): v for k, v in p.items()} for p in params]


@event.listens_for(OrmSession, "before_commit")
def _before_commit(session: OrmSession) -> None:
    """Flush, then bump every counter the transaction's writes touched, just before it commits."""
    session.flush()
    pending = session.info.pop(_PENDING, None)
    if not pending or not (pending["keys"] or pending["items"] or pending["other_items"]):
        return
    keys = set(pending["keys"]) | _locate(session, pending["items"]) | _locate(session, pending["other_items"],
                                                                              others=True)
    _bump(session, keys)


@event.listens_for(OrmSession, "after_transaction_end")
def _after_transaction_end(session: OrmSession, transaction: SessionTransaction) -> None:
    """A rolled back (or closed) transaction's writes are gone: so are its notes."""
    if transaction.parent is None:
        session.info.pop(_PENDING, None)


# -- writing ---------------------------------------------------------------------------------------------------


def _locate(session_or_connection: OrmSession | Connection, item_ids: set[int], others: bool = False) -> set[Key]:
    """The (study, benchmark) of each item, and with ``others`` the benchmark's :func:`others_scope` too; an item id
    with no row (deleted) counts as "some study"."""
    found: set[Key] = set()
    ids = sorted(item_ids)
    seen = 0
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        rows = session_or_connection.execute(
            select(Item.study_id, Item.benchmark, Item.id).where(Item.id.in_(chunk))
        ).all()
        seen += len(rows)
        found.update((int(study), str(bench)) for study, bench, _ in rows)
        if others:
            found.update((int(study), others_scope(str(bench))) for study, bench, _ in rows)
    if seen < len(ids):
        found.add((ANY_STUDY, WHOLE_STUDY))
    return found


def _bump(session_or_connection: OrmSession | Connection, keys: Iterable[Key]) -> None:
    table: Table = DataVersion.__table__  # type: ignore[assignment]
    ordered = sorted(set(keys))
    if not ordered:
        return
    bind = session_or_connection.get_bind() if isinstance(session_or_connection, OrmSession) else session_or_connection
    dialect = bind.dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    for study_id, scope in ordered:  # one statement per key, in key order: concurrent committers never deadlock
        statement = insert(table).values(study_id=study_id, scope=scope, version=1, token=secrets.token_hex(8))
        statement = statement.on_conflict_do_update(
            index_elements=[table.c.study_id, table.c.scope], set_={"version": table.c.version + 1}
        )
        session_or_connection.execute(statement)
