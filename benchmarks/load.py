"""Load: many clinicians rating at once while the jury writes verdicts, against one database.

Each simulated clinician is a thread that does what pages/rate.py does on each run (progress, queue, the
item with its current rating) and then submits a rating in its own transaction, with a fresh request id;
every fifth submission is sent twice (a double click) and must not write again. Revisions happen because
each clinician goes round their queue more than once. Meanwhile a jury thread inserts JudgeVerdict rows in
small transactions. At the end the database is checked against what the clients were told: no rating lost
or doubled, revisions 1..n without gaps, current scores equal to the latest revision, every verdict there.

    .venv/bin/python benchmarks/load.py --database-url postgresql://postgres@127.0.0.1:5432/test \
        [--clinicians 50] [--seconds 120] [--json]

The database must be empty or disposable: the script creates a study named ``load-<random>``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field

from sqlalchemy import func, insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.migrate import upgrade_database
from medhelm_core.db.models import Item, JudgeVerdict, JuryRun, Rating, RatingSubmission, User, utcnow
from medhelm_core.errors import DatabaseError
from medhelm_core.rating import queue as rq
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.studies import get_or_create_study, get_study_by_id

CRITERIA = ("accuracy", "completeness", "clarity")


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
    write_p50_ms: float = 0.0
    write_p95_ms: float = 0.0
    write_max_ms: float = 0.0
    verdict_batch_p95_ms: float = 0.0
    stuck_threads: int = 0
    problems: list[str] = field(default_factory=list)


def seed(engine: Engine, n_items: int, n_clinicians: int, overlap: int) -> tuple[int, list[Principal], int]:
    """A study with ``n_items`` items, ``n_clinicians`` clinicians assigned with ``overlap``, a jury run."""
    tag = uuid.uuid4().hex[:8]
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, f"load-{tag}")
        body = "The patient asks whether the new tablets can be taken with their blood thinner. " * 8
        s.execute(insert(Item), [
            {"study_id": study.id, "benchmark": f"b{i % 3}", "instance_id": str(i), "model": f"m{i % 2}",
             "input_text": body, "output_text": body, "reference_text": body, "meta": {}, "created_at": utcnow()}
            for i in range(n_items)
        ])
        users = [User(username=f"load-{tag}-{i:02d}", role="clinician") for i in range(n_clinicians)]
        s.add_all(users)
        s.flush()
        assign_balanced(s, study, overlap=overlap, usernames=[u.username for u in users], actor="load")
        run = JuryRun(study_id=study.id, name="load jury", status="running")
        s.add(run)
        s.flush()
        return study.id, [Principal(u.id, u.username, u.username, "clinician") for u in users], run.id


def run_load(engine: Engine, clinicians: int = 50, seconds: float = 120.0, items: int = 300, overlap: int = 3,
             think_seconds: float = 0.05, seed_value: int = 0) -> LoadResult:
    """Run the simulation for ``seconds`` and check the database afterwards (see the module docstring)."""
    study_id, principals, run_id = seed(engine, items, clinicians, overlap)
    result = LoadResult(clinicians=clinicians, seconds=seconds, items=items)
    told: Counter[tuple[int, int]] = Counter()  # (rater, item) -> submissions the client was told were written
    last_scores: dict[tuple[int, int], dict[str, int]] = {}
    latencies: list[float] = []
    verdict_latencies: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()
    start = threading.Barrier(clinicians + 2)

    def clinician(who: Principal, rng: random.Random) -> None:
        start.wait()
        n = 0
        while not stop.is_set():
            try:
                with Session(engine) as s:  # one page run: what pages/rate.py reads
                    study = get_study_by_id(s, study_id)
                    rq.progress(s, who)
                    entries = rq.queue(s, who, study)
                    rq.study_rubric(s, study)
                    entry = entries[n % len(entries)]
                    rq.load_item(s, who, study, entry.item_id)
                scores = {c: rng.randint(1, 5) for c in CRITERIA}
                request_id = uuid.uuid4().hex
                began = time.perf_counter()
                with transaction(engine) as s:
                    written = rq.submit(s, who, get_study_by_id(s, study_id), entry.item_id, scores,
                                        request_id=request_id,
                                        elapsed_seconds=1.0)
                took = time.perf_counter() - began
                repeat = False
                if n % 5 == 0:  # a double click sends the same request again
                    with transaction(engine) as s:
                        repeat = rq.submit(s, who, get_study_by_id(s, study_id), entry.item_id, scores,
                                           request_id=request_id)
                with lock:
                    result.page_runs += 1
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
                    result.problems.append(f"{who.username}: {exc}")
            n += 1
            if think_seconds:
                time.sleep(rng.uniform(0, 2 * think_seconds))

    def jury(rng: random.Random) -> None:
        start.wait()
        item_ids = _item_ids(engine, study_id)
        k = 0
        while not stop.is_set():
            batch = [(item_ids[(k + j) % len(item_ids)], f"judge-{(k + j) // len(item_ids)}") for j in range(5)]
            k += 5
            began = time.perf_counter()
            try:
                with transaction(engine) as s:
                    s.add_all([
                        JudgeVerdict(jury_run_id=run_id, item_id=item_id, judge=judge, status="ok",
                                     scores={c: float(rng.randint(1, 5)) for c in CRITERIA},
                                     explanations={c: "ok" for c in CRITERIA}, raw_response="{}", prompt="p")
                        for item_id, judge in batch
                    ])
                    run = s.get(JuryRun, run_id)
                    run.calls_done += len(batch)  # the progress counter every jury batch updates
                    s.add(run)
            except DatabaseError as exc:
                with lock:
                    result.database_errors += 1
                    result.problems.append(f"jury: {exc}")
                continue
            with lock:
                verdict_latencies.append(time.perf_counter() - began)
                result.verdicts_written += len(batch)
            time.sleep(0.01)

    threads = [threading.Thread(target=clinician, args=(p, random.Random(seed_value + i)), daemon=True)
               for i, p in enumerate(principals)]
    threads.append(threading.Thread(target=jury, args=(random.Random(seed_value - 1),), daemon=True))
    for t in threads:
        t.start()
    start.wait()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    result.stuck_threads = sum(t.is_alive() for t in threads)
    if result.stuck_threads:
        result.problems.append(f"{result.stuck_threads} threads still running 60 s after the stop: deadlock?")

    _check(engine, study_id, run_id, told, last_scores, result)
    if latencies:
        ordered = sorted(latencies)
        result.write_p50_ms = round(statistics.median(ordered) * 1000, 1)
        result.write_p95_ms = round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 1)
        result.write_max_ms = round(ordered[-1] * 1000, 1)
    if verdict_latencies:
        ordered = sorted(verdict_latencies)
        result.verdict_batch_p95_ms = round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 1)
    return result


def _item_ids(engine: Engine, study_id: int) -> list[int]:
    with Session(engine) as s:
        return list(s.exec(select(Item.id).where(Item.study_id == study_id).order_by(Item.id)).all())


def _check(engine: Engine, study_id: int, run_id: int, told: Counter, last_scores: dict, result: LoadResult) -> None:
    """Compare the database with what every client was told."""
    items = select(Item.id).where(Item.study_id == study_id)
    with Session(engine) as s:
        subs = s.exec(select(RatingSubmission).where(RatingSubmission.item_id.in_(items))).all()
        current = s.exec(select(Rating).where(Rating.item_id.in_(items))).all()
        verdicts = s.exec(select(func.count(JudgeVerdict.id)).where(JudgeVerdict.jury_run_id == run_id)).one()
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
    if verdicts != result.verdicts_written or calls_done != result.verdicts_written:
        result.problems.append(f"verdicts: {verdicts} stored, counter {calls_done}, {result.verdicts_written} sent")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--clinicians", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--think", type=float, default=0.05, help="mean think time between page runs (s)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    engine = make_engine(args.database_url)
    upgrade_database(engine)
    result = run_load(engine, args.clinicians, args.seconds, args.items, think_seconds=args.think)
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
