"""How long a clinician waits: render the next item and save a rating, in a study of 20,000 items and
50 clinicians (overlap 2), server side, median and p95. Target: under 150 ms median.

"Render next" is what pages/rate.py asks the database for on each run: the clinician's progress, their
queue, the rubric and the item with their own current rating. "Save" is one submission in one transaction.

    .venv/bin/python benchmarks/rating.py [--items 20000] [--clinicians 50] [--database-url URL] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert
from sqlmodel import Session

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.migrate import upgrade_database
from medhelm_core.db.models import Item, User, utcnow
from medhelm_core.rating import queue as rq
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.studies import get_or_create_study, get_study_by_id


def seed(engine, n_items: int, n_clinicians: int) -> tuple[int, list[Principal]]:
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, f"bench-{n_items}")
        body = "The patient asks about their medication and its side effects. " * 20
        s.execute(insert(Item), [
            {"study_id": study.id, "benchmark": f"b{i % 4}", "instance_id": str(i), "model": f"m{i % 3}",
             "input_text": body, "output_text": body, "reference_text": body, "meta": {}, "created_at": utcnow()}
            for i in range(n_items)
        ])
        users = [User(username=f"bench{i:03d}", role="clinician") for i in range(n_clinicians)]
        s.add_all(users)
        s.flush()
        t = time.perf_counter()
        plan = assign_balanced(s, study, overlap=2, usernames=[u.username for u in users])
        print(f"assigned {len(plan.new)} in {time.perf_counter() - t:.1f} s")
        return study.id, [Principal(u.id, u.username, u.username, "clinician") for u in users]


def render_next(engine, who: Principal, study_id: int) -> int:
    with Session(engine) as s:
        study = get_study_by_id(s, study_id)
        rq.progress(s, who)
        entries = rq.queue(s, who, study)
        rq.study_rubric(s, study)
        item = rq.load_item(s, who, study, entries[rq.first_open(entries)].item_id)
    return item.item_id


def save(engine, who: Principal, study_id: int, item_id: int, rng: random.Random) -> None:
    with transaction(engine) as s:
        rq.submit(s, who, get_study_by_id(s, study_id), item_id,
                  {"accuracy": rng.randint(1, 5), "completeness": rng.randint(1, 5), "clarity": rng.randint(1, 5)})


def summary(samples: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in samples)
    return {"median_ms": round(statistics.median(ms), 2), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
            "n": len(ms)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--clinicians", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    engine = make_engine(url)
    upgrade_database(engine)
    study_id, clinicians = seed(engine, args.items, args.clinicians)
    rng = random.Random(0)
    renders, saves = [], []
    for r in range(args.rounds):
        who = clinicians[r % len(clinicians)]
        t = time.perf_counter()
        item_id = render_next(engine, who, study_id)
        renders.append(time.perf_counter() - t)
        t = time.perf_counter()
        save(engine, who, study_id, item_id, rng)
        saves.append(time.perf_counter() - t)
    result = {"database": engine.url.get_backend_name(), "items": args.items, "clinicians": args.clinicians,
              "render_next": summary(renders), "save_rating": summary(saves)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    render, saving = result["render_next"], result["save_rating"]
    print(f"{result['database']}: {args.items} items, {args.clinicians} clinicians")
    print(f"  render next item: median {render['median_ms']} ms, p95 {render['p95_ms']} ms")
    print(f"  save a rating:    median {saving['median_ms']} ms, p95 {saving['p95_ms']} ms")


if __name__ == "__main__":
    main()
