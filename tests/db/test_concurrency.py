"""Twenty clinicians submitting at once: no rating lost, none doubled (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, Rating, RatingSubmission, User
from medhelm_core.errors import DatabaseError
from medhelm_core.rating import queue as rq
from medhelm_core.rating import rater_actions as ra
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.studies import get_or_create_study

N_CLINICIANS = 20
N_ITEMS = 30


def test_twenty_clinicians_submitting_at_once_lose_and_double_nothing(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "busy")
        for i in range(N_ITEMS):
            s.add(Item(study_id=study.id, benchmark="b", instance_id=str(i), model="m", input_text="q",
                       output_text="a"))
        users = [add_user(s, f"c{i:02d}", "clinician", None) for i in range(N_CLINICIANS)]
        s.flush()
        assign_balanced(s, study, overlap=4)
    principals = [Principal(u.id, u.username, u.username, "clinician") for u in users]
    start = threading.Barrier(N_CLINICIANS)

    def work(who: Principal) -> int:
        with Session(engine) as s:
            entries = rq.queue(s, who, study)
        start.wait()
        written = 0
        for n, entry in enumerate(entries):
            for _attempt in range(2):  # the same request twice, as a double click would send it
                for retry in range(5):
                    try:
                        with transaction(engine) as s:
                            written += ra.submit(s, who, study, entry.item_id,
                                                 {"accuracy": 1 + n % 5, "completeness": 3, "clarity": 4},
                                                 request_id=f"{who.username}-{entry.item_id}")
                        break
                    except DatabaseError:  # SQLite "database is locked" under contention: resubmit
                        if retry == 4:
                            raise
        return written

    with ThreadPoolExecutor(N_CLINICIANS) as pool:
        written = list(pool.map(work, principals))
    expected = N_ITEMS * 4
    assert sum(written) == expected
    with Session(engine) as s:
        assert s.exec(select(func.count(RatingSubmission.id))).one() == expected
        assert s.exec(select(func.count(Rating.id))).one() == expected * 3
        per_user = s.exec(
            select(User.username, func.count(RatingSubmission.id)).join(RatingSubmission).group_by(User.username)
        ).all()
        queued = sorted(len(rq.queue(s, p, study)) for p in principals)
    assert sorted(n for _, n in per_user) == queued
