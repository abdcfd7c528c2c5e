"""A jury run's provider batches in the database (:class:`~medhelm_core.db.models.JuryBatch`).

The order of writes is what keeps a batch run from paying twice: a batch's row (its input file id, the cache keys it
carries and its token) is committed *before* the batch is created at the provider, and its batch id right after.
A crash in between leaves a row without a batch id, which the next invocation resolves by asking the provider for a
batch with that token or input file (:func:`medhelm_core.jury.batch.find_submitted`) before creating one.
A crash before the row is committed leaves at most an uploaded file that no batch uses: files are not billed.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import BatchStatus, JuryBatch, utcnow
from medhelm_core.errors import ValidationError


def open_batches(session: Session, run_id: int) -> list[JuryBatch]:
    """The run's batches whose results are not stored yet, oldest first."""
    return list(session.exec(
        select(JuryBatch).where(JuryBatch.jury_run_id == run_id, JuryBatch.status != BatchStatus.collected.value)
        .order_by(JuryBatch.id)
    ).all())


def refuse_live_run_with_open_batches(session: Session, run_id: int) -> None:
    """Refuse to call the judges live for a run whose calls wait in provider batches: they would be paid twice.

    Raises
    ------
    ValidationError
        Naming how many calls wait and how to collect them.
    """
    waiting = open_batches(session, run_id)
    if waiting:
        calls = sum(len(b.custom_ids) for b in waiting)
        raise ValidationError(
            f"jury run {run_id} has {calls} calls waiting in {len(waiting)} provider batch(es); run it again in batch "
            "mode (medhelm jury run ... --batch, or Batch API on the Jury page) to collect them"
        )


def record_upload(engine: Engine, run_id: int, judge: str, token: str, custom_ids: list[str],
                  input_file_id: str) -> int:
    """Store a batch's input file before the batch is created; returns the row's id."""
    with transaction(engine) as session:
        row = JuryBatch(jury_run_id=run_id, judge=judge, token=token, custom_ids=list(custom_ids),
                        input_file_id=input_file_id)
        session.add(row)
        session.flush()
        return int(row.id)


def record_submitted(engine: Engine, row_id: int, batch_id: str, provider_status: str | None) -> None:
    """The provider accepted the batch: store its id (results are awaited from now on)."""
    with transaction(engine) as session:
        row = session.get(JuryBatch, row_id)
        row.batch_id, row.status, row.provider_status = batch_id, BatchStatus.submitted.value, provider_status
        session.add(row)


def record_provider_status(engine: Engine, row_id: int, provider_status: str) -> None:
    """What the provider said at the last poll (shown by ``medhelm jury status``)."""
    with transaction(engine) as session:
        row = session.get(JuryBatch, row_id)
        if row.provider_status != provider_status:
            row.provider_status = provider_status
            session.add(row)


def mark_collected(engine: Engine, row_id: int, provider_status: str, error: str | None = None) -> None:
    """Every result of the batch is stored (as a verdict, ok or failed): nothing more to wait for."""
    with transaction(engine) as session:
        row = session.get(JuryBatch, row_id)
        row.status, row.provider_status, row.error = BatchStatus.collected.value, provider_status, error
        row.collected_at = utcnow()
        session.add(row)
