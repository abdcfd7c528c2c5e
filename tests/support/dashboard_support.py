"""Data for the dashboard and report tests: the demo study with clinician ratings, a three-judge jury run
(one verdict failed) and ROUGE-L/BERTScore scores, written straight into the tables.

The scores are seeded noise around a per-item truth, so agreement is positive but imperfect. No judge is
called: the verdicts are test data inserted into JudgeVerdict, as the brief allows for tests.
"""

from __future__ import annotations

import atexit
import random
import shutil
import tempfile
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Assignment, Item, JudgeVerdict, JuryRun, MetricScore, Study, User, utcnow
from medhelm_core.demo import DEMO_STUDY, seed_demo
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_study

JUDGES = ("openai/judge-a", "anthropic/judge-b", "meta/judge-c")
CRITERIA = ("accuracy", "completeness", "clarity")
HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\"> **not bold**"
PROMPT_HASH = "ab" * 32


def _clip(value: float) -> int:
    return int(min(5, max(1, round(value))))


def rate_demo(engine: Engine, *, hostile_item: bool = True, lenient: str = "clinician3") -> dict[str, int]:
    """Seed the demo and fill it: every assignment rated, a jury run of three judges, metric scores.

    ``lenient`` scores one point above the others; with ``hostile_item``, the item the jury and
    clinicians disagree on most gets a hostile output and model name (to test escaping).
    """
    seed_demo(engine)
    rng = random.Random(7)
    with transaction(engine) as s:
        study = get_study(s, DEMO_STUDY)
        rubric = rubric_spec(s, study.rubric_id)
        items = s.exec(select(Item).where(Item.study_id == study.id).order_by(Item.id)).all()
        truth = {i.id: rng.uniform(1.5, 4.5) for i in items}
        rows = s.exec(
            select(Assignment, User).join(User, User.id == Assignment.user_id).where(Assignment.study_id == study.id)
            .order_by(Assignment.id)  # the scores are drawn in this order: the same data in every test process
        ).all()
        for assignment, user in rows:
            item = s.get(Item, assignment.item_id)
            bump = 1.0 if user.username == lenient else 0.0
            scores = {c: _clip(truth[item.id] + bump + rng.gauss(0, 0.7)) for c in CRITERIA}
            record_rating(s, item=item, rater=user, rubric=rubric, scores=scores,
                          comment=f"comment by {user.username} on {item.id}")
        run = JuryRun(study_id=study.id, name="test jury (inserted by the tests)", source="litellm",
                      config={"name": "test jury", "prompt_template_hash": PROMPT_HASH,
                              "judges": [{"model": j} for j in JUDGES]},
                      config_hash="cd" * 32, status="done", finished_at=utcnow())
        s.add(run)
        s.flush()
        worst = items[0]
        for n, item in enumerate(items):
            for j, judge in enumerate(JUDGES):
                if n == 1 and j == 2:
                    s.add(JudgeVerdict(jury_run_id=run.id, item_id=item.id, judge=judge, status="failed",
                                       raw_response="not json", error="no JSON object in the answer"))
                    continue
                noise = 0.4 + 0.4 * j
                scores = {c: _clip(truth[item.id] + rng.gauss(0, noise)) for c in CRITERIA}
                if item.id == worst.id:
                    scores = {c: 5 for c in CRITERIA} if truth[item.id] < 3 else {c: 1 for c in CRITERIA}
                s.add(JudgeVerdict(jury_run_id=run.id, item_id=item.id, judge=judge, status="ok", scores=scores,
                                   explanations={c: f"{judge} says {c} is {v}" for c, v in scores.items()},
                                   prompt="prompt", raw_response="{}"))
            base = (truth[item.id] - 1) / 4
            s.add(MetricScore(item_id=item.id, metric="rougeL_f", value=min(1, max(0, base + rng.gauss(0, 0.2))),
                              settings={"family": "rougeL", "use_stemmer": True}, settings_hash="r1"))
            s.add(MetricScore(item_id=item.id, metric="bertscore_f1", value=min(1, max(0, base + rng.gauss(0, 0.1))),
                              settings={"family": "bertscore", "model": "test"}, settings_hash="b1"))
        if hostile_item:
            worst.output_text = f"Take 500 mg. {HOSTILE}"
            worst.model = "model<b>x</b>"
            s.add(worst)
        return {"study_id": study.id, "run_id": run.id, "hostile_item": worst.id, "failed_item": items[1].id}


_SHARED: dict[str, Path] = {}


def rated_database(kind: str = "rated") -> Path:
    """An SQLite file seeded once per test session (``rated``: :func:`rate_demo`; ``seeded``: the demo only).

    Tests that only read share it; a test that writes takes :func:`copy_of` instead.
    """
    if kind not in _SHARED:
        folder = Path(tempfile.mkdtemp(prefix=f"medhelm-{kind}-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / f"{kind}.db"
        engine = make_engine(f"sqlite:///{path}")
        if kind == "rated":
            rate_demo(engine)
        else:
            seed_demo(engine)
        engine.dispose()  # the last connection closing checkpoints the WAL into the file
        _SHARED[kind] = path
    return _SHARED[kind]


def copy_of(kind: str, folder: Path) -> str:
    """A private copy of a shared database, as a URL."""
    target = folder / f"{kind}-copy.db"
    shutil.copyfile(rated_database(kind), target)
    return f"sqlite:///{target}"


def facts_of(session: Session, study: Study) -> dict[str, int]:
    """The demo items :func:`rate_demo` made special: the hostile one (the first), the one with a failed verdict."""
    ids = session.exec(select(Item.id).where(Item.study_id == study.id).order_by(Item.id)).all()
    return {"hostile_item": ids[0], "failed_item": ids[1]}


_TABLES: dict[str, tuple] = {}


def rated_figures() -> tuple:
    """The shared rated demo's dashboard data and agreement table, computed once per test session."""
    if "rated" not in _TABLES:
        from medhelm_core.figures import compute_agreement, load_dashboard_data

        engine = make_engine(f"sqlite:///{rated_database('rated')}")
        with Session(engine) as s:
            data = load_dashboard_data(s, get_study(s, DEMO_STUDY))
        engine.dispose()
        _TABLES["rated"] = (data, compute_agreement(data.long))
    return _TABLES["rated"]


def add_small_study(url: str, name: str = "a-small-study") -> None:
    """Add a study of six items rated by two clinicians (no jury): cheap to recompute, first in the study list."""
    from medhelm_core.studies import get_or_create_study

    engine = make_engine(url)
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, name)
        rubric = rubric_spec(s, study.rubric_id)
        users = [s.exec(select(User).where(User.username == n)).one() for n in ("clinician1", "clinician2")]
        for i in range(6):
            item = Item(study_id=study.id, benchmark="medi_qa", instance_id=str(i), model="m", input_text="q",
                        output_text="a", reference_text="r")
            s.add(item)
            s.flush()
            for k, user in enumerate(users):
                score = 1 + (i + k * (i % 2)) % 5
                record_rating(s, item=item, rater=user, rubric=rubric,
                              scores={"accuracy": score, "completeness": score, "clarity": 1 + i % 5})
    engine.dispose()
