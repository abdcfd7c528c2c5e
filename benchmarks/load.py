"""Load: many clinicians rating at once while the jury writes verdicts through its real path, against one database.

Each simulated clinician is a thread signed in with a password (a real session) that makes the Rate page's own run
(benchmarks/rate_page_run.py: the session check, progress, the study, the place and its item) and then submits a
rating in its own transaction, with a fresh request id, and moves on as the page does; every fifth submission is
sent twice (a double click) and must not write again; every fourth round first steps back one item (the Previous
button) so that ratings get revised, and a clinician whose queue is done goes on revising from the top. Meanwhile
the jury (:func:`medhelm_core.jury.run_jury`, prompts, litellm, parsing and its own transactions) judges the study
against the test suite's OpenAI-compatible server (tests/support/fake_openai_server.py, a process of its own on
loopback) until the time is up. At the end the database is checked against what the clients were told: no rating
lost or doubled, revisions 1..n without gaps, current scores equal to the latest revision, and every verdict the
jury reported stored once.

    .venv/bin/python benchmarks/load.py --database-url postgresql://postgres@127.0.0.1:5432/test \
        [--clinicians 50] [--items 20000] [--seconds 120] [--json]

The database must be empty or disposable: the script creates a study named ``load-<random>``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from sqlalchemy import insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from rate_page_run import move_on, page_run  # noqa: E402

from medhelm_core.accounts import auth  # noqa: E402
from medhelm_core.accounts.users import hash_password  # noqa: E402
from medhelm_core.db.engine import make_engine, transaction  # noqa: E402
from medhelm_core.db.migrate import upgrade_database  # noqa: E402
from medhelm_core.db.models import Item, JudgeVerdict, JuryRun, Rating, RatingSubmission, User, utcnow  # noqa: E402
from medhelm_core.errors import DatabaseError  # noqa: E402
from medhelm_core.jury import build_config, run_jury  # noqa: E402
from medhelm_core.rating import rater_actions as ra  # noqa: E402
from medhelm_core.rating.assignment import assign_in_steps  # noqa: E402
from medhelm_core.rubric import default_rubric  # noqa: E402
from medhelm_core.studies import get_or_create_study, get_study_by_id  # noqa: E402

CRITERIA = ("accuracy", "completeness", "clarity")
PASSWORD = "load-clinician-password-1"
JUDGE = "openai/load-judge"


@dataclass
class LoadResult:
    """What the run did and how the database held up."""

    clinicians: int
    seconds: float
    items: int
    page_runs: int = 0
    submissions_written: int = 0
    double_clicks_refused: int = 0
    database_errors: int = 0
    verdicts_written: int = 0
    jury_failed: int = 0
    page_run_p50_ms: float = 0.0
    page_run_p95_ms: float = 0.0
    write_p50_ms: float = 0.0
    write_p95_ms: float = 0.0
    write_max_ms: float = 0.0
    stuck_threads: int = 0
    problems: list[str] = field(default_factory=list)


def seed(engine: Engine, n_items: int, n_clinicians: int, overlap: int) -> tuple[int, list[str]]:
    """A study of ``n_items`` items and ``n_clinicians`` clinicians assigned with ``overlap``; their session tokens."""
    tag = uuid.uuid4().hex[:8]
    body = "The patient asks whether the new tablets can be taken with their blood thinner. " * 8
    digest = hash_password(PASSWORD)  # once: argon2 takes most of a second
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, f"load-{tag}")
        s.execute(insert(Item), [
            {"study_id": study.id, "benchmark": f"b{i % 3}", "instance_id": str(i), "model": f"m{i % 2}",
             "input_text": body, "output_text": body, "reference_text": body, "meta": {}, "created_at": utcnow()}
            for i in range(n_items)
        ])
        users = [User(username=f"load-{tag}-{i:02d}", role="clinician", password_hash=digest)
                 for i in range(n_clinicians)]
        s.add_all(users)
        s.flush()
        study_id, names = study.id, [u.username for u in users]
    assign_in_steps(engine, study_id, overlap=overlap, usernames=names, actor="load")
    return study_id, [auth.sign_in(engine, name, PASSWORD).token for name in names]


def start_judge_server(latency: float) -> tuple[subprocess.Popen, str]:
    """The test suite's OpenAI-compatible server in a process of its own; its base URL."""
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "support" / "fake_openai_server.py"),
                             "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def run_load(engine: Engine, clinicians: int = 50, seconds: float = 120.0, items: int = 20_000, overlap: int = 2,
             think_seconds: float = 0.05, seed_value: int = 0, judge_latency: float = 0.05,
             jury_concurrency: int = 8) -> LoadResult:
    """Run the simulation for ``seconds`` and check the database afterwards (see the module docstring)."""
    study_id, tokens = seed(engine, items, clinicians, overlap)
    result = LoadResult(clinicians=clinicians, seconds=seconds, items=items)
    told: Counter[tuple[int, int]] = Counter()  # (rater, item) -> submissions the client was told were written
    last_scores: dict[tuple[int, int], dict[str, int]] = {}
    latencies: list[float] = []
    page_runs: list[float] = []
    jury_done: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()
    start = threading.Barrier(clinicians + 2)

    def clinician(token: str, rng: random.Random) -> None:
        start.wait()
        state: dict = {}
        rubrics: dict = {}
        n = 0
        while not stop.is_set():
            try:
                if n % 4 == 3 and state.get("position"):  # the Previous button: revise the item before
                    state["position"] -= 1
                began = time.perf_counter()
                who, view = page_run(engine, token, state, rubrics)
                ran = time.perf_counter() - began
                if view.entry is None:  # all done: look over and revise from the top, as the page offers
                    state.update(revising=True, position=0)
                    continue
                entry = view.entry
                scores = {c: rng.randint(1, 5) for c in CRITERIA}
                request_id = uuid.uuid4().hex
                began = time.perf_counter()
                with transaction(engine) as s:
                    written = ra.submit(s, who, get_study_by_id(s, study_id), entry.item_id, scores,
                                        request_id=request_id, elapsed_seconds=1.0, retest=entry.retest)
                took = time.perf_counter() - began
                repeat = False
                if n % 5 == 0:  # a double click sends the same request again
                    with transaction(engine) as s:
                        repeat = ra.submit(s, who, get_study_by_id(s, study_id), entry.item_id, scores,
                                           request_id=request_id, retest=entry.retest)
                move_on(engine, who, state)
                with lock:
                    result.page_runs += 1
                    page_runs.append(ran)
                    latencies.append(took)
                    key = (who.user_id, entry.item_id)
                    if written:
                        told[key] += 1
                        last_scores[key] = scores
                        result.submissions_written += 1
                    elif last_scores.get(key) != scores:
                        result.problems.append(f"{who.username} item {entry.item_id}: changed rating not written")
                    if n % 5 == 0:
                        if repeat:
                            result.problems.append(f"{who.username}: a repeated request wrote again")
                        else:
                            result.double_clicks_refused += 1
            except DatabaseError as exc:  # the clinician would see "please resubmit"; count it
                with lock:
                    result.database_errors += 1
                    result.problems.append(f"clinician: {exc}")
            n += 1
            if think_seconds:
                time.sleep(rng.uniform(0, 2 * think_seconds))

    server, base = start_judge_server(judge_latency)
    os.environ.setdefault("OPENAI_API_KEY", "load-test")  # the fake server takes any key; nothing leaves loopback
    config = replace(build_config(default_rubric(), [JUDGE], api_base=base, concurrency=jury_concurrency,
                                  timeout=30), retry_base_seconds=0.05)

    def jury() -> None:
        start.wait()
        try:
            with Session(engine) as s:
                study = get_study_by_id(s, study_id)
            summary = run_jury(engine, study, config, stop=stop)
            with lock:
                jury_done.append(summary.run_id)
                result.verdicts_written, result.jury_failed = summary.done, summary.failed
        except Exception as exc:  # noqa: BLE001 - reported as a problem of the run
            with lock:
                result.problems.append(f"jury: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=clinician, args=(t, random.Random(seed_value + i)), daemon=True)
               for i, t in enumerate(tokens)]
    threads.append(threading.Thread(target=jury, daemon=True))
    try:
        for t in threads:
            t.start()
        start.wait()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join(timeout=60)
    finally:
        server.terminate()
        server.wait(10)
    result.stuck_threads = sum(t.is_alive() for t in threads)
    if result.stuck_threads:
        result.problems.append(f"{result.stuck_threads} threads still running 60 s after the stop: deadlock?")

    _check(engine, study_id, jury_done[0] if jury_done else None, told, last_scores, result)
    result.page_run_p50_ms, result.page_run_p95_ms, _ = _percentiles(page_runs)
    result.write_p50_ms, result.write_p95_ms, result.write_max_ms = _percentiles(latencies)
    return result


def _percentiles(samples: list[float]) -> tuple[float, float, float]:
    """(p50, p95, max) in milliseconds."""
    if not samples:
        return 0.0, 0.0, 0.0
    ordered = sorted(samples)
    return (round(statistics.median(ordered) * 1000, 1), round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 1),
            round(ordered[-1] * 1000, 1))


def _item_ids(engine: Engine, study_id: int) -> list[int]:
    with Session(engine) as s:
        return list(s.exec(select(Item.id).where(Item.study_id == study_id).order_by(Item.id)).all())


def _check(engine: Engine, study_id: int, run_id: int | None, told: Counter, last_scores: dict,
           result: LoadResult) -> None:
    """Compare the database with what every client (and the jury) was told."""
    items = select(Item.id).where(Item.study_id == study_id)
    with Session(engine) as s:
        subs = s.exec(select(RatingSubmission).where(RatingSubmission.item_id.in_(items))).all()
        current = s.exec(select(Rating).where(Rating.item_id.in_(items))).all()
        if run_id is not None:
            verdicts = s.exec(select(JudgeVerdict.item_id, JudgeVerdict.judge, JudgeVerdict.status)
                              .where(JudgeVerdict.jury_run_id == run_id)).all()
            calls_done = s.get(JuryRun, run_id).calls_done
    revisions: dict[tuple[int, int], list[int]] = {}
    latest: dict[tuple[int, int], RatingSubmission] = {}
    for sub in subs:
        key = (sub.rater_id, sub.item_id)
        revisions.setdefault(key, []).append(sub.revision)
        if key not in latest or sub.revision > latest[key].revision:
            latest[key] = sub
    stored = Counter({k: len(v) for k, v in revisions.items()})
    if stored != told:
        lost = sum((told - stored).values())
        doubled = sum((stored - told).values())
        result.problems.append(f"submissions: {lost} lost, {doubled} extra")
    gaps = [k for k, v in revisions.items() if sorted(v) != list(range(1, len(v) + 1))]
    if gaps:
        result.problems.append(f"{len(gaps)} (rater, item) pairs have gaps or repeats in their revisions")
    now = {}
    for row in current:
        now.setdefault((row.rater_id, row.item_id), {})[row.criterion] = row.score
    if now != {k: dict(v.scores) for k, v in latest.items()} or now != last_scores:
        result.problems.append("current scores differ from the latest revision the clients sent")
    if run_id is None:
        result.problems.append("the jury reported no run")
        return
    ok = [(item, judge) for item, judge, status in verdicts if status == "ok"]
    if len(set(ok)) != len(ok):
        result.problems.append(f"verdicts: {len(ok) - len(set(ok))} (item, judge) pairs stored twice")
    if len(ok) != result.verdicts_written or calls_done < result.verdicts_written:
        result.problems.append(f"verdicts: {len(ok)} stored, counter {calls_done}, the jury reported "
                               f"{result.verdicts_written}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--clinicians", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--overlap", type=int, default=2)
    parser.add_argument("--think", type=float, default=0.05, help="mean think time between page runs (s)")
    parser.add_argument("--judge-latency", type=float, default=0.05, help="the fake judge's answer time (s)")
    parser.add_argument("--jury-concurrency", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    engine = make_engine(args.database_url)
    upgrade_database(engine)
    result = run_load(engine, args.clinicians, args.seconds, args.items, args.overlap, think_seconds=args.think,
                      judge_latency=args.judge_latency, jury_concurrency=args.jury_concurrency)
    engine.dispose()
    if args.json:
        print(json.dumps(asdict(result), indent=2))
    else:
        for key, value in asdict(result).items():
            if key != "problems":
                print(f"{key:>24}: {value}")
        print("problems: " + ("none" if not result.problems else "\n  " + "\n  ".join(result.problems[:20])))
    raise SystemExit(1 if result.problems else 0)


if __name__ == "__main__":
    main()
