"""The whole judge-alignment loop on the demo study with a loopback judge: plan, rate, see rater quality,
adjudicate, change the prompt, re-run the jury, and compare the two versions' agreement on one page.

The judge is the test suite's OpenAI-compatible server on loopback. It reads the prompt it is sent: under
the bundled prompt (v1) it scores each response from its hidden quality plus a large, fixed per-item error;
under v2 (the researcher's stricter wording) the error is small. So a better prompt really does agree better
with the clinicians, and the page has to show it.
"""

from __future__ import annotations

import hashlib
import random

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest
from support.fake_openai_server import FakeOpenAI

from medhelm_core.accounts import auth
from medhelm_core.accounts.auth import Principal
from medhelm_core.agreement.planning import items_needed
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Item, User
from medhelm_core.demo import ANNOTATIONS, DEMO_STUDY, seed_demo
from medhelm_core.figures import wait_for_updates
from medhelm_core.figures.jury_versions_data import study_version_agreement
from medhelm_core.jury import run_jury
from medhelm_core.jury.config import build_config
from medhelm_core.jury.prompt import DEFAULT_TEMPLATE
from medhelm_core.jury.templates import save_template_version
from medhelm_core.rating import adjudication as adj
from medhelm_core.rating import queue as rq
from medhelm_core.rating import rater_actions as ra
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.rating.gold import import_gold
from medhelm_core.rating.quality import study_rater_quality
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_study, get_study_by_id, update_settings
from pages.common import TOKEN_KEY

CLINICIANS = ("clinician1", "clinician2", "clinician3")
STRICT = DEFAULT_TEMPLATE + "\nBe strict: a single unsafe statement caps accuracy at 2.\n"
JUDGES = ("openai/judge-a", "openai/judge-b")


def quality_of(text: str) -> float:
    """The hidden quality of a response, from its text (the clinicians and the judge both see the text)."""
    return 1.5 + 3 * (int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF)


def clip(value: float) -> int:
    return int(min(5, max(1, round(value))))


def judge(model: str, prompt: str) -> dict[str, int]:
    """The loopback judge: reads the response out of the prompt; v2's wording makes it careful."""
    fence = prompt.index("<response_")
    body = prompt[prompt.index(">", fence) + 2: prompt.index("</response_", fence) - 1]
    truth = quality_of(body.replace("&lt;", "<"))
    error = (int(hashlib.sha256((model + body).encode()).hexdigest()[:4], 16) / 0xFFFF - 0.5) * 4
    shift = error / 8 if "Be strict" in prompt else error
    return {c: clip(truth + shift) for c in ("accuracy", "completeness", "clarity")}


@pytest.fixture
def loop_url(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'loop.db'}"
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "loopback-test-key")
    return url


def test_the_whole_loop_on_the_demo_study_with_a_loopback_judge(loop_url):
    engine = make_engine(loop_url)
    seed_demo(engine)
    # Plan: how many items for a 95% CI no wider than 0.2, kept with the study; set the checks; gold items.
    with transaction(engine) as s:
        study = get_study(s, DEMO_STUDY)
        update_settings(s, study, plan=items_needed(0.75, 2, width=0.2, assurance=0.8), actor="researcher")
        update_settings(s, study, speed_threshold_seconds=20, retest_share=0.25, retest_gap=3,
                        adjudication_threshold=2, actor="researcher")
        import_gold(s, study, ANNOTATIONS / "demo" / "gold.csv", actor="researcher")
        assign_balanced(s, study, 2, list(CLINICIANS), actor="researcher")
        sid = study.id
        users = {u.username: u for u in s.exec(select(User).where(User.username.in_(CLINICIANS))).all()}
        texts = {i.id: i.output_text for i in s.exec(select(Item).where(Item.study_id == sid)).all()}
    assert get_plan_items(engine) == 98

    # Rate: every clinician works through their queue as the Rate page does; clinician3 rushes.
    rng = random.Random(3)
    for name in CLINICIANS:
        who = Principal(users[name].id, name, name, "clinician")
        with Session(engine) as s:
            entries = rq.queue(s, who, get_study_by_id(s, sid))
        index = rq.first_open(entries)
        while not all(e.rated for e in entries):
            entry = entries[index]
            truth = quality_of(texts[entry.item_id])
            noise = 1.4 if name == "clinician3" else 0.4
            scores = {c: clip(truth + rng.gauss(0, noise)) for c in ("accuracy", "completeness", "clarity")}
            with transaction(engine) as s:
                ra.submit(s, who, get_study_by_id(s, sid), entry.item_id, scores, retest=entry.retest,
                          elapsed_seconds=4.0 if name == "clinician3" else 60.0 + rng.random() * 60)
            with Session(engine) as s:
                entries = rq.queue(s, who, get_study_by_id(s, sid))
            index = rq.next_open(entries, index)

    # Rater quality: the rushed clinician is flagged; gold accuracy and test-retest are measured.
    with Session(engine) as s:
        quality = study_rater_quality(s, get_study(s, DEMO_STUDY))
    speed = quality.speed.set_index("rater_id")
    assert speed.loc["clinician3", "share_fast"] == 1.0 and speed.loc["clinician1", "n_fast"] == 0
    assert quality.n_gold_items == 3 and set(quality.gold["rater_id"]) == set(CLINICIANS)
    assert quality.n_retest_pairs > 0 and "all clinicians" in set(quality.retest["clinician"])

    # Adjudicate the first disputed item.
    adjudicator = Principal(users["clinician1"].id, "researcher", "Researcher", "researcher")
    with Session(engine) as s:
        cases = adj.adjudication_queue(s, adjudicator, get_study_by_id(s, sid))
    assert cases, "noisy clinicians must disagree by 2 points somewhere"
    with transaction(engine) as s:
        written = adj.submit_adjudication(s, adjudicator, get_study_by_id(s, sid), cases[0].item_id,
                                          {c: 3 for c in cases[0].spreads}, "agreed at the panel")
    assert written

    # Jury v1 with the bundled prompt, then a stricter prompt as v2, re-run on the same items.
    with FakeOpenAI(judge=judge) as server, Session(engine) as s:
        rubric = rubric_spec(s, get_study(s, DEMO_STUDY).rubric_id)
        first = run_jury(engine, get_study(s, DEMO_STUDY), build_config(rubric, list(JUDGES), api_base=server.base_url))
        with transaction(engine) as t:
            strict, created = save_template_version(t, "medhelm", STRICT, note="be strict on safety",
                                                    actor="researcher")
        second = run_jury(engine, get_study(s, DEMO_STUDY), build_config(rubric, list(JUDGES), api_base=server.base_url,
                                                           template=strict))
    assert created and first.run_id != second.run_id
    with Session(engine) as s:
        table = study_version_agreement(s, get_study(s, DEMO_STUDY), baseline=first.run_id, n_resamples=1000)
    rows = table.set_index("run_id")
    assert rows.loc[second.run_id, "prompt_version"] == 2 and rows.loc[first.run_id, "prompt_version"] == 1
    assert rows.loc[second.run_id, "diff"] > 0 and rows.loc[second.run_id, "change"] == "higher"
    assert rows.loc[second.run_id, "n_items"] == 45  # the 48 demo items without the 3 gold ones

    # Compare the two versions on one page.
    with transaction(engine) as s:
        token = auth.sign_in(s, "researcher", "researcher-demo").token
    at = AppTest.from_file(str(REPO / "pages" / "agreement.py"), default_timeout=120)
    at.session_state[TOKEN_KEY] = token
    at = at.run()
    assert not at.exception, at.exception
    assert wait_for_updates(timeout=120)  # the comparison of versions is computed in the background, then shown
    at = at.run()
    assert "Jury versions" in [h.value for h in at.subheader]
    shown = next(d.value for d in at.dataframe if "vs baseline" in d.value.columns).set_index("version")
    assert len(shown) == 2 and "higher" in set(shown["change"])
    assert any("prompt medhelm v2" in label for label in shown.index)
    clinicians = next(d.value for d in at.dataframe if "fast first ratings" in d.value.columns)
    assert clinicians.set_index("clinician").loc["clinician3", "fast first ratings"].startswith(
        str(int(speed.loc["clinician3", "n_timed"])))
    engine.dispose()


def get_plan_items(engine) -> int:
    with Session(engine) as s:
        return get_study(s, DEMO_STUDY).plan["items"]
