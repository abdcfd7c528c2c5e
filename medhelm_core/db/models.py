"""The table models: one module, the whole schema.

Every change here comes with an alembic migration in ``medhelm_core/db/engine/migrations/versions``; ``medhelm init``
brings any database to the latest revision. Times are stored in UTC (timezone-aware).

Ratings are never updated in place without history: each submission a clinician makes is appended to
:class:`RatingSubmission` (who, when, every score, comment and flag), and :class:`Rating` holds only the
current score per item, rater and criterion, pointing at the submission it came from.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, LargeBinary, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    """Now, in UTC, timezone-aware (sqlmodel refuses naive datetimes)."""
    return datetime.now(UTC)


def _when(**kwargs: Any) -> Any:
    return Field(default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False, **kwargs))


def _json(nullable: bool = False) -> Any:
    return Field(default_factory=dict, sa_column=Column(JSON, nullable=nullable))


def _text(nullable: bool = False) -> Any:
    return Field(default=None if nullable else "", sa_column=Column(Text, nullable=nullable))


class Role(StrEnum):
    """What an account may do. Checked on the server side by every page and command."""

    admin = "admin"
    researcher = "researcher"
    clinician = "clinician"
    adjudicator = "adjudicator"


class RatingFlag(StrEnum):
    """Why a clinician could not rate an output normally."""

    unsafe = "unsafe"
    unreadable = "unreadable"
    cannot_judge = "cannot_judge"


class SkipReason(StrEnum):
    """Why a clinician skipped an item instead of rating it (``other`` needs a note)."""

    outside_expertise = "outside_expertise"
    needs_context = "needs_context"
    text_unusable = "text_unusable"
    conflict_of_interest = "conflict_of_interest"
    other = "other"


class VerdictStatus(StrEnum):
    """A judge's answer either parsed into scores or failed; failures are kept, never counted."""

    ok = "ok"
    failed = "failed"


class RunStatus(StrEnum):
    """Where a jury run stands. ``interrupted`` is never stored: it is how a ``running`` run whose worker
    stopped writing heartbeats reads (:func:`medhelm_core.jury.store.effective_status`)."""

    pending = "pending"
    running = "running"
    stopping = "stopping"
    stopped = "stopped"
    finished = "finished"
    failed = "failed"
    #: the status of a run of imported scores, which no worker ever runs
    recorded = "recorded"
    interrupted = "interrupted"


class RunSource(StrEnum):
    """Where a jury run's verdicts come from: judges we called, or scores imported from elsewhere."""

    litellm = "litellm"
    recorded = "recorded"


class JobKind(StrEnum):
    """What a queued job does (``Job.kind``); :mod:`medhelm_core.jobs.handlers` holds one handler per kind."""

    jury_run = "jury_run"
    metrics = "metrics"
    report = "report"


class JobStatus(StrEnum):
    """Where a queued job stands. A ``running`` job whose lease has expired is claimable again: its worker died."""

    queued = "queued"
    running = "running"
    finished = "finished"
    failed = "failed"
    cancelled = "cancelled"


class AuditAction(StrEnum):
    """What an audit event records (``AuditEvent.action``), as ``noun.verb``; the audit export filters on these."""

    adjudication_submit = "adjudication.submit"
    adjudication_threshold = "adjudication.threshold"
    assignment_balanced = "assignment.balanced"
    assignment_drawn = "assignment.drawn"
    assignment_moved = "assignment.moved"
    export = "export"
    gold_clear = "gold.clear"
    gold_import = "gold.import"
    import_ = "import"
    jury_run = "jury.run"
    prompt_template_saved = "prompt_template.saved"
    rating_skipped = "rating.skipped"
    rating_submitted = "rating.submitted"
    report_export = "report.export"
    rubric_version_saved = "rubric.version_saved"
    study_agreement_defaults = "study.agreement_defaults"
    study_instructions = "study.instructions"
    study_plan = "study.plan"
    study_retest = "study.retest"
    study_speed_threshold = "study.speed_threshold"
    study_verdict_protocol = "study.verdict_protocol"
    user_added = "user.added"
    user_disabled = "user.disabled"
    user_enabled = "user.enabled"
    user_password_changed = "user.password_changed"
    user_role_changed = "user.role_changed"
    verdict_viewed = "verdict.viewed"


class Rubric(SQLModel, table=True):
    """A named, versioned set of criteria that clinicians and judges score."""

    __table_args__ = (UniqueConstraint("name", "version", name="uq_rubric_name_version"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    version: int = Field(default=1)
    title: str = Field(default="", max_length=300)
    description: str = _text()
    created_at: datetime = _when()


class Criterion(SQLModel, table=True):
    """One criterion of a rubric with its integer scale and a short anchor text per level."""

    __table_args__ = (UniqueConstraint("rubric_id", "name", name="uq_criterion_rubric_name"),)

    id: int | None = Field(default=None, primary_key=True)
    rubric_id: int = Field(foreign_key="rubric.id", index=True, ondelete="CASCADE")
    name: str = Field(max_length=100)
    label: str = Field(default="", max_length=200)
    description: str = _text()
    scale_min: int = 1
    scale_max: int = 5
    position: int = 0
    #: level (as a string, JSON keys are strings) -> anchor text shown to raters and judges
    anchors: dict[str, str] = _json()


class Study(SQLModel, table=True):
    """A calibration study: items to rate, the rubric they are rated on, and who rates them."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200, unique=True)
    title: str = Field(default="", max_length=300)
    description: str = _text()
    rubric_id: int = Field(foreign_key="rubric.id", index=True)
    show_reference: bool = True
    overlap: int = 2
    #: seed for the per-clinician randomised order, stored so an order can be reproduced
    order_seed: int = 0
    #: items whose clinicians differ by at least this many points on a criterion go to adjudication
    #: (None: adjudication is off)
    adjudication_threshold: int | None = None
    #: a first rating submitted faster than this many seconds is flagged on the dashboards
    speed_threshold_seconds: float = 20.0
    #: share of each clinician's rated items shown to them again later, unannounced (0: no test-retest)
    retest_share: float = 0.0
    #: at least this many other unrated items come between a rated item and its repeat
    retest_gap: int = 10
    #: the study-size plan chosen when the study was designed (planning.PlanResult as plain data), if any
    plan: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    #: what clinicians read before rating (the Rate page's "Instructions"); empty: the description is shown
    instructions: str = _text()
    #: how the Agreement page and the report open: "medhelm" (the paper's protocol) or "full"
    agreement_protocol: str = Field(default="medhelm", max_length=20)
    #: the benchmarks the Agreement page pools by default (empty: all of them)
    agreement_benchmarks: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    #: the pre-registered acceptance protocol of the verdict (agreement.verdict.VerdictProtocol as plain data)
    verdict_protocol: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    #: when that protocol was last fixed, and when the verdict's results were first viewed (a protocol fixed
    #: after that is flagged as changed after the results were seen)
    verdict_protocol_fixed_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    verdict_viewed_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    created_at: datetime = _when()


class Item(SQLModel, table=True):
    """One model's output for one benchmark instance. The model's name is never shown to raters."""

    __table_args__ = (
        UniqueConstraint("study_id", "benchmark", "instance_id", "model", name="uq_item_identity"),
    )

    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="study.id", index=True, ondelete="CASCADE")
    benchmark: str = Field(max_length=200, index=True)
    instance_id: str = Field(max_length=300)
    model: str = Field(max_length=300)
    input_text: str = _text()
    output_text: str = _text()
    reference_text: str | None = _text(nullable=True)
    #: importer-specific extras (source file, HELM run, split, original ids ...)
    meta: dict[str, Any] = _json()
    created_at: datetime = _when()


#: ``User.meta`` key of the clinician accounts a ratings import created (raters of a recorded study, such as
#: MedHELM's validation): kept out of assignment unless named
RECORDED_RATER = "recorded_rater"


class User(SQLModel, table=True):
    """An account. Clinicians imported from a ratings file have no password until one is set."""

    id: int | None = Field(default=None, primary_key=True)
    username: str = Field(max_length=150, unique=True)
    display_name: str = Field(default="", max_length=300)
    role: str = Field(default=Role.clinician.value, max_length=30)
    password_hash: str | None = Field(default=None, max_length=500)
    is_active: bool = True
    meta: dict[str, Any] = _json()
    created_at: datetime = _when()
    #: consecutive failed sign-ins; reset by a successful one
    failed_logins: int = 0
    #: no sign-in is accepted before this time (back-off after repeated failures)
    locked_until: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))


class AuthSession(SQLModel, table=True):
    """A signed-in browser session, kept in the database so it expires and can be revoked on the server
    and works the same across several app processes. Only a hash of the token is stored.
    """

    id: int | None = Field(default=None, primary_key=True)
    token_hash: str = Field(max_length=64, unique=True)
    user_id: int = Field(foreign_key="user.id", index=True, ondelete="CASCADE")
    created_at: datetime = _when()
    expires_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    last_seen_at: datetime = _when()
    revoked: bool = False


class Assignment(SQLModel, table=True):
    """An item given to a clinician to rate; ``position`` is its place in that clinician's queue.

    A clinician has at most one ordinary assignment of an item and, when the study runs test-retest, at
    most one ``retest`` assignment of it: the same item shown again later in their queue, unannounced,
    whose rating is kept apart (it never counts as a second rater).
    """

    __table_args__ = (
        UniqueConstraint("item_id", "user_id", "retest", name="uq_assignment_item_user"),
        # one clinician's queue in one study, in order, read from the index alone (the Rate page; migration 0013)
        Index("ix_assignment_queue", "user_id", "study_id", "position", "id", "item_id", "retest"),
    )

    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="study.id", index=True, ondelete="CASCADE")
    item_id: int = Field(foreign_key="item.id", index=True, ondelete="CASCADE")
    user_id: int = Field(foreign_key="user.id", index=True)
    position: int = 0
    retest: bool = False
    #: the probability with which the "rate these next" mode drew this item among its model and benchmark's
    #: unrated items (None: a balanced assignment, which gives every item); it keeps the estimates valid
    draw_probability: float | None = None
    created_at: datetime = _when()


class RatingSubmission(SQLModel, table=True):
    """One submission of a clinician's rating of an item, kept forever (the revision history).

    ``request_id`` is chosen by the client for each press of Submit, so a double click or a rerun that
    repeats the same request is recognised and never writes twice.
    """

    __table_args__ = (
        UniqueConstraint("item_id", "rater_id", "retest", "revision", name="uq_submission_revision"),
        Index("ix_submission_item_rater", "item_id", "rater_id"),
        Index("ix_submission_rater_item", "rater_id", "item_id", "retest"),  # "submitted yet?" (migration 0013)
    )

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", ondelete="CASCADE")
    rater_id: int = Field(foreign_key="user.id", index=True)
    revision: int = 1
    #: criterion name -> integer score
    scores: dict[str, int] = _json()
    comment: str = _text()
    flag: str | None = Field(default=None, max_length=30)
    request_id: str | None = Field(default=None, max_length=100, unique=True)
    elapsed_seconds: float | None = None
    #: a test-retest repeat: kept for intra-rater agreement, never a current rating (see Assignment)
    retest: bool = False
    submitted_at: datetime = _when()


class RatingSkip(SQLModel, table=True):
    """A clinician's skip of an assigned item, with the reason they gave: not a rating (no scores, never in the
    agreement figures), but the item leaves their open queue and researchers see the reason. Rating the item
    later removes the skip; the audit trail keeps both.
    """

    __table_args__ = (UniqueConstraint("item_id", "rater_id", "retest", name="uq_skip_item_rater"),)

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True, ondelete="CASCADE")
    rater_id: int = Field(foreign_key="user.id", index=True)
    #: a :class:`SkipReason`
    reason: str = Field(max_length=30)
    note: str = _text()
    retest: bool = False
    skipped_at: datetime = _when()


class Rating(SQLModel, table=True):
    """The current score of one rater for one item on one criterion."""

    __table_args__ = (
        UniqueConstraint("item_id", "rater_id", "criterion", name="uq_rating_current"),
    )

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True, ondelete="CASCADE")
    rater_id: int = Field(foreign_key="user.id", index=True)
    criterion: str = Field(max_length=100)
    score: int
    submission_id: int = Field(foreign_key="ratingsubmission.id")
    updated_at: datetime = _when()


class Adjudication(SQLModel, table=True):
    """An adjudicator's score for one criterion of a disputed item, stored apart from the clinicians' raw
    ratings (which it never changes). Every submission is a new revision; the highest revision of an
    (item, criterion) is the current adjudicated score.
    """

    __table_args__ = (
        UniqueConstraint("item_id", "criterion", "revision", name="uq_adjudication_revision"),
    )

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True, ondelete="CASCADE")
    adjudicator_id: int = Field(foreign_key="user.id", index=True)
    criterion: str = Field(max_length=100)
    score: int
    comment: str = _text()
    revision: int = 1
    created_at: datetime = _when()


class GoldRange(SQLModel, table=True):
    """A gold item's expected score range on one criterion, set by the researchers (never shown to raters).

    A clinician's score on a gold item is correct when it lies within ``low`` to ``high`` inclusive.
    """

    __table_args__ = (UniqueConstraint("item_id", "criterion", name="uq_gold_item_criterion"),)

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True, ondelete="CASCADE")
    criterion: str = Field(max_length=100)
    low: int
    high: int
    note: str = _text()
    created_at: datetime = _when()


class PromptTemplate(SQLModel, table=True):
    """A judge prompt template, versioned: a stored version never changes, an edit is a new version.

    ``text_hash`` (SHA-256 of the text) is what a jury run's config hash uses, so two versions with the
    same text share their cached verdicts.
    """

    __table_args__ = (UniqueConstraint("name", "version", name="uq_prompt_template_name_version"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    version: int = 1
    text: str = _text()
    text_hash: str = Field(max_length=64, index=True)
    note: str = _text()
    created_by: str = Field(default="system", max_length=150)
    created_at: datetime = _when()


#: the runs a worker holds; the partial unique index on JuryRun (and its migration, 0006) says it in SQL
ACTIVE_RUN_CLAUSE = "source = 'litellm' AND status IN ('running', 'stopping')"


class JuryRun(SQLModel, table=True):
    """One run of a jury over a study's items.

    ``config`` is the frozen jury configuration (judges, prompt template, rubric, temperature) whose hash
    keys the verdict cache. ``source`` is ``litellm`` for judges we called, or ``recorded`` for scores
    imported from elsewhere (such as MedHELM's published jury means), which the UI labels as such.

    At most one run per (study, config hash) is active (``running`` or ``stopping``): the database refuses a
    second, so the same configuration started twice at once cannot pay for every call twice.
    """

    __table_args__ = (
        Index("uq_juryrun_one_active_per_config", "study_id", "config_hash", unique=True,
              sqlite_where=text(ACTIVE_RUN_CLAUSE), postgresql_where=text(ACTIVE_RUN_CLAUSE)),
    )

    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="study.id", index=True, ondelete="CASCADE")
    name: str = Field(max_length=200)
    source: str = Field(default=RunSource.litellm.value, max_length=30)
    config: dict[str, Any] = _json()
    config_hash: str = Field(default="", max_length=64, index=True)
    status: str = Field(default=RunStatus.pending.value, max_length=30)
    calls_done: int = 0
    calls_failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    started_at: datetime = _when()
    finished_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))


class JudgeVerdict(SQLModel, table=True):
    """One judge's answer for one item: the prompt and raw text are kept as evidence.

    A failed verdict (no parseable JSON, a score off the scale, an API error) is stored with
    ``status='failed'`` and its raw text, and never counted as a score.
    """

    __table_args__ = (
        UniqueConstraint("jury_run_id", "item_id", "judge", "sample", name="uq_verdict_run_item_judge_sample"),
        Index("ix_verdict_cache_key", "cache_key"),
    )

    id: int | None = Field(default=None, primary_key=True)
    jury_run_id: int = Field(foreign_key="juryrun.id", index=True, ondelete="CASCADE")
    item_id: int = Field(foreign_key="item.id", index=True, ondelete="CASCADE")
    judge: str = Field(max_length=300)
    #: which of the judge's repeated samples of this item (``JuryConfig.samples``); 0 for a one-sample jury
    sample: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    cache_key: str = Field(default="", max_length=64)
    status: str = Field(default=VerdictStatus.ok.value, max_length=20)
    #: criterion name -> score (integers from a judge; recorded jury means may be fractional)
    scores: dict[str, float] = _json()
    #: criterion name -> the judge's one-sentence explanation
    explanations: dict[str, str] = _json()
    prompt: str = _text()
    raw_response: str = _text()
    error: str | None = _text(nullable=True)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_seconds: float | None = None
    created_at: datetime = _when()


class BatchStatus(StrEnum):
    """Where one provider batch of a jury run stands on our side (the provider's own status is kept beside)."""

    #: its input file is uploaded and its id stored; the batch may or may not exist at the provider yet
    uploaded = "uploaded"
    #: the provider accepted it and its id is stored: results are awaited
    submitted = "submitted"
    #: its results (and failures) are stored as verdicts
    collected = "collected"


class JuryBatch(SQLModel, table=True):
    """One batch of judge calls sent through a provider's batch API (``medhelm jury run --batch``).

    The input file's id is stored before the batch is created, and ``token`` goes with it as the batch's metadata,
    so a run resumed after a crash finds a batch the provider accepted but whose id was never stored, instead of
    submitting its calls again (:mod:`medhelm_core.jury.batch`). ``custom_ids`` are the verdict cache keys.
    """

    __table_args__ = (UniqueConstraint("token", name="uq_jurybatch_token"),)

    id: int | None = Field(default=None, primary_key=True)
    jury_run_id: int = Field(foreign_key="juryrun.id", index=True, ondelete="CASCADE")
    judge: str = Field(max_length=300)
    token: str = Field(max_length=64)
    custom_ids: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    input_file_id: str = Field(max_length=200)
    batch_id: str | None = Field(default=None, max_length=200)
    status: str = Field(default=BatchStatus.uploaded.value, max_length=20)
    provider_status: str | None = Field(default=None, max_length=30)
    error: str | None = _text(nullable=True)
    created_at: datetime = _when()
    collected_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))


class MetricScore(SQLModel, table=True):
    """An automated metric (ROUGE-L, BERTScore ...) of an item's output against its reference.

    ``settings`` records how it was computed (stemmer, model, layer, idf); ``settings_hash`` keys it so
    scores computed with different settings live side by side.
    """

    __table_args__ = (
        UniqueConstraint("item_id", "metric", "settings_hash", name="uq_metric_item_metric_settings"),
    )

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True, ondelete="CASCADE")
    metric: str = Field(max_length=100, index=True)
    value: float
    settings: dict[str, Any] = _json()
    settings_hash: str = Field(default="", max_length=64)
    computed_at: datetime = _when()


class AuditEvent(SQLModel, table=True):
    """Who did what, when: one row per rating revision, assignment change, import, export, jury run and
    account change, written in the same transaction as the change itself (so neither exists without the
    other).

    ``user_id`` and ``study_id`` carry no foreign keys on purpose: the audit trail must outlive the rows it
    talks about, and must never block or cascade with them. ``actor`` keeps the name as it was then.
    """

    __table_args__ = (Index("ix_auditevent_at", "at"),)

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _when()
    user_id: int | None = Field(default=None, index=True)
    actor: str = Field(default="system", max_length=150)
    action: str = Field(max_length=100, index=True)
    study_id: int | None = Field(default=None, index=True)
    details: dict[str, Any] = _json()


#: the jobs a worker holds or may take; the partial unique index on Job (and its migration, 0011) says it in SQL
LIVE_JOB_CLAUSE = "status IN ('queued', 'running')"


class Job(SQLModel, table=True):
    """A piece of work for a ``medhelm worker`` process: a jury run, a metric batch, a report build.

    Workers claim the oldest claimable job (``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL) and hold it by a
    lease they renew; a worker that dies stops renewing, and once ``lease_until`` has passed another worker
    claims the job again (``attempts`` counts the claims). ``progress`` and ``result`` are what the pages show;
    ``output`` holds a file a job made (a report's zip), so any app replica can hand it out.

    At most one live (queued or running) job per jury run: the database refuses a second.
    """

    __table_args__ = (
        Index("ix_job_status_id", "status", "id"),
        Index("uq_job_one_live_per_jury_run", "jury_run_id", unique=True,
              sqlite_where=text(LIVE_JOB_CLAUSE), postgresql_where=text(LIVE_JOB_CLAUSE)),
    )

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=50)
    status: str = Field(default=JobStatus.queued.value, max_length=20)
    payload: dict[str, Any] = _json()
    study_id: int | None = Field(default=None, index=True)
    #: the jury run a ``jury_run`` job works on (created, pending, when the job is queued)
    jury_run_id: int | None = Field(default=None)
    created_by: str = Field(default="system", max_length=150)
    created_at: datetime = _when()
    #: who holds (or last held) the job: ``host:pid:n`` of a worker
    worker: str | None = Field(default=None, max_length=200)
    lease_until: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    attempts: int = 0
    cancel_requested: bool = False
    claimed_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    finished_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    progress: dict[str, Any] = _json()
    result: dict[str, Any] = _json()
    error: str | None = _text(nullable=True)
    output: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))


class DataVersion(SQLModel, table=True):
    """How many committed writes have changed a study's figures, per scope: a benchmark's name, ``"*"`` for the
    whole study (its settings, its jury runs, an item) and, under study 0, ``"*"`` for a write whose study was not
    known (a bulk update by a where clause). Bumped at commit by :mod:`medhelm_core.db.data_versions`, so a page
    learns whether its cached figures are current from one primary-key read instead of scanning the study.

    ``token`` is drawn when the row is created: a database rebuilt under a running app never repeats a version.
    """

    study_id: int = Field(primary_key=True)
    scope: str = Field(primary_key=True, max_length=200)
    version: int = 1
    token: str = Field(max_length=32)
