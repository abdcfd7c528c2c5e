"""The bundled demo: written-for-the-project items, real MedHELM ratings, accounts; seeding is idempotent."""

from __future__ import annotations

import json

from sqlmodel import Session, select
from support.helpers import table_counts

from medhelm_core.accounts.users import verify_credentials
from medhelm_core.db.engine import make_engine
from medhelm_core.db.models import Assignment, JudgeVerdict, JuryRun
from medhelm_core.demo import DEMO_ACCOUNTS, DEMO_ITEMS, DEMO_ORDER_SEED, DEMO_STUDY, MEDHELM_STUDY, seed_demo
from medhelm_core.studies import get_study, summarise_study


def test_demo_items_cover_several_benchmarks_and_models_with_references():
    rows = [json.loads(line) for line in DEMO_ITEMS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 40
    assert len({r["benchmark"] for r in rows}) >= 3 and len({r["model"] for r in rows}) >= 3
    assert all(r["reference"].strip() and r["output"].strip() and r["input"].strip() for r in rows)


def test_seed_demo_is_idempotent(engine):
    first = seed_demo(engine)
    assert sorted(first.accounts_created) == sorted(a[0] for a in DEMO_ACCOUNTS)
    before = table_counts(engine)
    second = seed_demo(engine)
    assert second.accounts_created == []
    assert second.studies[DEMO_STUDY].items_created == 0
    assert table_counts(engine) == before
    with Session(engine) as s:
        demo = summarise_study(s, get_study(s, DEMO_STUDY))
        medhelm = summarise_study(s, get_study(s, MEDHELM_STUDY))
        demo_id = get_study(s, DEMO_STUDY).id
        demo_runs = s.exec(select(JuryRun).where(JuryRun.study_id == demo_id)).all()
        recorded = s.exec(select(JuryRun).where(JuryRun.source == "recorded")).all()
        assert s.exec(select(JudgeVerdict)).all()  # only the recorded MedHELM jury means
        for username, _, password in DEMO_ACCOUNTS:
            assert verify_credentials(s, username, password) is not None
    assert demo.items >= 40 and demo.ratings == 0 and demo.verdicts == 0
    assert demo_runs == []  # no judge verdicts are invented for the demo study
    assert medhelm.items == 74 and medhelm.ratings == 396 and medhelm.raters == 17
    assert [r.study_id for r in recorded] != [demo_id]


def test_the_demo_gives_the_same_assignments_and_queues_on_every_machine(tmp_path):
    """A demo (and every test built on it) is the same each time it is seeded: its study's seed is fixed."""
    seen = []
    for n in range(2):
        engine = make_engine(f"sqlite:///{tmp_path / f'demo{n}.db'}")
        seed_demo(engine)
        with Session(engine) as s:
            demo = get_study(s, DEMO_STUDY)
            assert demo.order_seed == DEMO_ORDER_SEED
            rows = s.exec(select(Assignment.item_id, Assignment.user_id, Assignment.position)
                          .where(Assignment.study_id == demo.id).order_by(Assignment.id)).all()
        engine.dispose()
        seen.append([tuple(r) for r in rows])
    assert seen[0] and seen[0] == seen[1]
