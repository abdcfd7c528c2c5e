"""How long a clinician waits, and how long assigning takes, in studies of 2,000 / 20,000 / 100,000 items with
50 clinicians (overlap 2), server side: p50 and p95 of one Rate page run, of a saved rating, and the assignment.

"Page run" is what pages/rate.py does on every run, through the same functions (benchmarks/rate_page_run.py):
the session check (:func:`pages.common.admit`, which reads the session and the account, in its own transaction,
and marks the session as seen once a minute), the clinician's progress over their studies (with the open count),
the study, and :func:`~medhelm_core.rating.queue.rate_view` (the place shown, its entry and item with the
clinician's own rating and skip, in one statement; the queue's length and open count come from the progress);
the rubric is kept per session, as the page keeps it. Two baselines run the same reads on the same database:

- **minimal SQL**: hand-written SQL for exactly those reads (the session check and its update when due, the
  progress counts, the study row, the entry by OFFSET/LIMIT 1, the item, the latest submission and the skip),
  each a statement of its own, no ORM: what a page that reads only what it shows costs at least, one query per
  thing read;
- **whole queue**: the former page run, which read the clinician's whole queue
  (:func:`~medhelm_core.rating.queue.queue`).

"Save" is one submission in one transaction. The assignment is timed once per size with
:func:`~medhelm_core.rating.assignment.assign_in_steps` (what the CLI and the Raters page run), while another
clinician, in a process of their own, submits ratings in a small study of their own: the longest of those
submissions is how long a clinician waited for the assignment.

    .venv/bin/python benchmarks/rating.py [--sizes 2000,20000,100000] [--prerated 0.5] [--database-url URL] [--json]

Without --database-url each size gets a fresh SQLite file; with one (PostgreSQL), the database must be empty or
disposable: the script adds studies named ``bench-<random>``, and runs VACUUM ANALYZE after the assignment (what
autovacuum does within a minute of a bulk insert; before it, PostgreSQL's plans read the table, not the index).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import DateTime, bindparam, insert, text
from sqlalchemy.engine import Engine
from sqlmodel import Session

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the session check is the page's own: pages.common.admit
sys.path.insert(0, str(REPO / "benchmarks"))

from rate_page_run import move_on, page_run  # noqa: E402

from medhelm_core.accounts import auth  # noqa: E402
from medhelm_core.accounts.auth import Principal  # noqa: E402
from medhelm_core.accounts.users import hash_password  # noqa: E402
from medhelm_core.db.engine import make_engine, transaction  # noqa: E402
from medhelm_core.db.migrate import upgrade_database  # noqa: E402
from medhelm_core.db.models import Item, User, utcnow  # noqa: E402
from medhelm_core.rating import progress as rp  # noqa: E402
from medhelm_core.rating import queue as rq  # noqa: E402
from medhelm_core.rating import rater_actions as ra  # noqa: E402
from medhelm_core.rating import rater_item as ri  # noqa: E402
from medhelm_core.rating.assignment import assign_balanced, assign_in_steps  # noqa: E402
from medhelm_core.studies import get_or_create_study, get_study_by_id  # noqa: E402
from pages.common import admit  # noqa: E402

PASSWORD = "bench-clinician-password-1"
CRITERIA = ("accuracy", "completeness", "clarity")


def seed(engine: Engine, n_items: int, n_clinicians: int, signed_in: int, prerated: float = 0.0) -> dict:
    """A study of ``n_items`` items and ``n_clinicians`` clinicians, assigned with overlap 2 (timed, with a
    clinician submitting meanwhile); the first ``signed_in`` clinicians signed in; each clinician's first
    ``prerated`` share of their queue submitted (:func:`prerate`)."""
    tag = uuid.uuid4().hex[:8]
    digest = hash_password(PASSWORD)  # once: argon2 takes most of a second
    body = "The patient asks about their medication and its side effects. " * 20
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, f"bench-{tag}")
        s.execute(insert(Item), [
            {"study_id": study.id, "benchmark": f"b{i % 4}", "instance_id": str(i), "model": f"m{i % 3}",
             "input_text": body, "output_text": body, "reference_text": body, "meta": {}, "created_at": utcnow()}
            for i in range(n_items)
        ])
        users = [User(username=f"bench-{tag}-{i:03d}", role="clinician", password_hash=digest)
                 for i in range(n_clinicians + 1)]
        s.add_all(users)
        s.flush()
        side, _ = get_or_create_study(s, f"bench-{tag}-side")  # the clinician who rates during the assignment
        s.execute(insert(Item), [
            {"study_id": side.id, "benchmark": "b", "instance_id": str(i), "model": "m", "input_text": body,
             "output_text": body, "reference_text": body, "meta": {}, "created_at": utcnow()} for i in range(400)
        ])
        assign_balanced(s, side, overlap=1, usernames=[users[-1].username])
        study_id, side_id = study.id, side.id
        names = [u.username for u in users[:-1]]
        side_rater = Principal(users[-1].id, users[-1].username, users[-1].username, "clinician")

    waits = _rate_meanwhile(engine, side_rater, side_id)
    began = time.perf_counter()
    plan = assign_in_steps(engine, study_id, overlap=2, usernames=names, actor="bench")
    assign_seconds = time.perf_counter() - began
    waited = waits()
    prerate(engine, study_id, prerated)
    tokens = []
    for name in names[:signed_in]:
        tokens.append(auth.sign_in(engine, name, PASSWORD).token)
    if engine.dialect.name == "postgresql":  # what autovacuum does within a minute of a bulk insert
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.exec_driver_sql("VACUUM ANALYZE assignment, item, ratingsubmission, authsession")
    return {"study_id": study_id, "tokens": tokens, "assigned": len(plan.new),
            "assign_s": round(assign_seconds, 2), "submissions_during_assignment": len(waited),
            "longest_submission_during_assignment_ms": round(max(waited, default=0) * 1000, 1)}


PRERATE = text(
    "INSERT INTO ratingsubmission (item_id, rater_id, revision, scores, comment, retest, submitted_at) "
    "SELECT item_id, user_id, 1, '{\"accuracy\": 3}', '', retest, :now FROM (SELECT item_id, user_id, retest, "
    "row_number() OVER (PARTITION BY user_id ORDER BY position, id) AS rank, count(*) OVER (PARTITION BY user_id) "
    "AS length FROM assignment WHERE study_id = :s) AS q WHERE rank <= :share * length"
).bindparams(bindparam("now", type_=DateTime(timezone=True)))


def prerate(engine: Engine, study_id: int, share: float) -> None:
    """A study part way through: each clinician's first ``share`` of their queue, in their order, submitted (one
    bulk insert of the submission rows the Rate page reads; the per-criterion rows are not needed for it). With
    no submissions, an EXISTS over them is free whatever its plan: half-way is where a plan that reads every
    clinician's submissions, or probes each handled item, shows."""
    if share > 0:
        with engine.begin() as c:
            c.execute(PRERATE, {"s": study_id, "share": share, "now": utcnow()})


def _rate_meanwhile(engine: Engine, who: Principal, study_id: int):  # noqa: ANN202 - a function to stop it
    """Start a clinician submitting a rating every 20 ms in a process of their own (as the app serves them apart
    from the CLI); the returned function stops them and gives how long each submission took."""
    context = multiprocessing.get_context("spawn")
    stop, times, ready = context.Event(), context.Queue(), context.Event()
    process = context.Process(target=_rater, args=(engine.url.render_as_string(hide_password=False), who, study_id,
                                                   stop, ready, times), daemon=True)
    process.start()
    ready.wait(60)

    def finish() -> list[float]:
        stop.set()
        waited = times.get(timeout=120)
        process.join(30)
        return waited

    return finish


def _rater(url: str, who: Principal, study_id: int, stop, ready, times) -> None:  # noqa: ANN001 - process handles
    engine = make_engine(url)
    rng, waited = random.Random(1), []
    with Session(engine) as s:
        entries = rq.queue(s, who, get_study_by_id(s, study_id))
    ready.set()
    for entry in entries:
        if stop.is_set():
            break
        began = time.perf_counter()
        save(engine, who, study_id, entry.item_id, rng)
        waited.append(time.perf_counter() - began)
        time.sleep(0.02)
    stop.wait()
    times.put(waited)


def whole_queue_run(engine: Engine, token: str, state: dict) -> int:
    """The former page run: the session check, progress, and the clinician's whole queue on every run."""
    who = admit("rate", token=token, eng=engine)
    with Session(engine) as s:
        studies = rp.progress(s, who)
        study = get_study_by_id(s, studies[0].study_id)
        entries = rq.queue(s, who, study)
        ri.study_rubric(s, study)
        position = state.get("position")
        if position is None or position >= len(entries):
            position = rq.first_open(entries)
        rq.all_done(entries)
        entry = entries[position]
        item = ri.load_item(s, who, study, entry.item_id, retest=entry.retest)
    state["position"] = position
    return item.item_id


MINIMAL = {
    "session": "SELECT s.id, s.revoked, s.expires_at, s.last_seen_at, u.id, u.username, u.display_name, u.role, "
               "u.is_active FROM authsession s JOIN \"user\" u ON u.id = s.user_id WHERE s.token_hash = :h",
    "seen": "UPDATE authsession SET last_seen_at = :now WHERE id = :id",  # when a minute old, as the page
    "progress": "SELECT st.id, st.name, st.title, count(*), count(r.item_id), count(k.item_id), "
                "sum(CASE WHEN r.item_id IS NULL AND k.item_id IS NULL THEN 1 ELSE 0 END) FROM assignment a "
                "JOIN study st ON st.id = a.study_id LEFT JOIN (SELECT DISTINCT item_id, retest FROM "
                "ratingsubmission WHERE rater_id = :u) r ON r.item_id = a.item_id AND r.retest = a.retest "
                "LEFT JOIN ratingskip k ON k.rater_id = :u AND k.item_id = a.item_id AND k.retest = a.retest "
                "WHERE a.user_id = :u GROUP BY st.id, st.name, st.title ORDER BY st.name",
    "study": "SELECT * FROM study WHERE id = :s",
    "entry": "SELECT a.item_id, a.retest FROM assignment a WHERE a.user_id = :u AND a.study_id = :s "
             "ORDER BY a.position, a.id LIMIT 1 OFFSET :i",
    "item": "SELECT id, benchmark, input_text, output_text, reference_text, meta FROM item WHERE id = :i",
    "latest": "SELECT scores, comment, flag, revision FROM ratingsubmission WHERE item_id = :i AND rater_id = :u "
              "AND retest = :r ORDER BY revision DESC LIMIT 1",
    "skip": "SELECT reason, note FROM ratingskip WHERE item_id = :i AND rater_id = :u AND retest = :r",
}


def minimal_run(engine: Engine, token: str, state: dict) -> int:
    """The same reads in hand-written SQL on one connection (the place kept in ``state`` as the page keeps it)."""
    with engine.begin() as c:  # the session check, with its update, as one transaction
        session_id, revoked, expires, seen, user_id, _, _, _, active = c.execute(
            text(MINIMAL["session"]).columns(expires_at=DateTime(timezone=True), last_seen_at=DateTime(timezone=True)),
            {"h": auth._hash(token)}).one()
        now = utcnow()
        if revoked or not active or _aware(expires) <= now or now - _aware(seen) > auth.IDLE_TIMEOUT:
            raise SystemExit("the minimal session check refused an open session")
        if now - _aware(seen) >= auth.SEEN_EVERY:
            c.execute(text(MINIMAL["seen"]), {"now": now, "id": session_id})
    with engine.connect() as c:
        study_id = c.execute(text(MINIMAL["progress"]), {"u": user_id}).all()[0][0]
        c.execute(text(MINIMAL["study"]), {"s": study_id}).one()
        item_id, retest = c.execute(text(MINIMAL["entry"]),
                                       {"u": user_id, "s": study_id, "i": state.get("position", 0)}).one()
        c.execute(text(MINIMAL["item"]), {"i": item_id}).one()
        c.execute(text(MINIMAL["latest"]), {"i": item_id, "u": user_id, "r": retest}).first()
        c.execute(text(MINIMAL["skip"]), {"i": item_id, "u": user_id, "r": retest}).first()
    return item_id


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def save(engine: Engine, who: Principal, study_id: int, item_id: int, rng: random.Random) -> None:
    with transaction(engine) as s:
        ra.submit(s, who, get_study_by_id(s, study_id), item_id, {c: rng.randint(1, 5) for c in CRITERIA})


def summary(samples: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in samples)
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
            "n": len(ms)}


def measure(engine: Engine, n_items: int, n_clinicians: int, rounds: int, signed_in: int, prerated: float) -> dict:
    """Seed one study and time, round after round over the signed-in clinicians: a page run, each baseline's run
    of the same reads, then a saved rating (so the queues fill up as they would)."""
    seeded = seed(engine, n_items, n_clinicians, signed_in, prerated)
    study_id, tokens = seeded["study_id"], seeded["tokens"]
    rng = random.Random(0)
    runs: dict[str, list[float]] = {"page_run": [], "minimal_sql": [], "whole_queue": [], "save_rating": []}
    states = [{} for _ in tokens]
    rubrics = [{} for _ in tokens]
    for r in range(rounds):
        k = r % len(tokens)
        token, state = tokens[k], states[k]
        began = time.perf_counter()
        who, view = page_run(engine, token, state, rubrics[k])
        runs["page_run"].append(time.perf_counter() - began)
        item_id = view.item.item_id
        for name, run in (("minimal_sql", minimal_run), ("whole_queue", whole_queue_run)):
            began = time.perf_counter()
            other = run(engine, token, dict(state))
            runs[name].append(time.perf_counter() - began)
            if other != item_id:
                raise SystemExit(f"{name} shows item {other} where the page shows {item_id}")
        began = time.perf_counter()
        save(engine, who, study_id, item_id, rng)
        runs["save_rating"].append(time.perf_counter() - began)
        move_on(engine, who, state)
    result = {"items": n_items, "clinicians": n_clinicians, "prerated": prerated, "assignments": seeded["assigned"],
              "assign_s": seeded["assign_s"],
              "submissions_during_assignment": seeded["submissions_during_assignment"],
              "longest_submission_during_assignment_ms": seeded["longest_submission_during_assignment_ms"]}
    result.update({name: summary(samples) for name, samples in runs.items()})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,20000,100000", help="items per study, comma separated")
    parser.add_argument("--clinicians", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--signed-in", type=int, default=5, help="clinicians taking turns in the timed rounds")
    parser.add_argument("--prerated", type=float, default=0.5,
                        help="share of each clinician's queue submitted before the timed rounds (0 to 1)")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file per size")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
        engine = make_engine(url)
        upgrade_database(engine)
        results.append({"database": engine.url.get_backend_name(),
                        **measure(engine, size, args.clinicians, args.rounds, args.signed_in, args.prerated)})
        engine.dispose()
        if not args.json:
            r = results[-1]
            print(f"{r['database']}: {size} items, {args.clinicians} clinicians, {r['assignments']} assignments "
                  f"({args.prerated:.0%} rated beforehand) "
                  f"in {r['assign_s']} s (a clinician's longest submission meanwhile: "
                  f"{r['longest_submission_during_assignment_ms']} ms of {r['submissions_during_assignment']})")
            for name in ("page_run", "minimal_sql", "whole_queue", "save_rating"):
                print(f"  {name:>12}: p50 {r[name]['p50_ms']} ms, p95 {r[name]['p95_ms']} ms")
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
