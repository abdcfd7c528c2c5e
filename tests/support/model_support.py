"""The model figures' tests share: the demo study partly rated through the clinicians' queues (so the rated items
are a random sample, as the app makes them) and a jury whose scores follow each item's hidden quality, lenient
on one model.

The jury is either inserted as verdicts (fast) or called through the loopback judge server with the same
:func:`judge` (the Models page's browser check).
"""

from __future__ import annotations

import hashlib
import random

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, JudgeVerdict, JuryRun, User, utcnow
from medhelm_core.demo import DEMO_STUDY
from medhelm_core.rating import queue as rq
from medhelm_core.rating import rater_actions as ra
from medhelm_core.studies import get_study, get_study_by_id

CLINICIANS = ("clinician1", "clinician2", "clinician3")
CRITERIA = ("accuracy", "completeness", "clarity")
#: the model the jury scores a point above what the clinicians see
LENIENT_ON = "meta/llama-3.3-70b-instruct"


def quality_of(text: str) -> float:
    """An output's hidden quality on 1-5, from its text: what the clinicians and the judges both see."""
    return 1.5 + 3 * (int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF)


def clip(value: float) -> int:
    return int(min(5, max(1, round(value))))


def judge(model: str, prompt: str) -> dict[str, int]:
    """The loopback judge: reads the response out of the prompt; lenient by a point on one model's outputs
    (the prompt never names the model, so the test marks those outputs by their text: see :func:`lenient`)."""
    fence = prompt.index("<response_")
    body = prompt[prompt.index(">", fence) + 2: prompt.index("</response_", fence) - 1].replace("&lt;", "<")
    return judge_scores(model, body)


def judge_scores(model: str, output_text: str, lenient_item: bool | None = None) -> dict[str, int]:
    truth = quality_of(output_text)
    noise = (int(hashlib.sha256((model + output_text).encode()).hexdigest()[:4], 16) / 0xFFFF - 0.5) * 1.2
    bump = 1.0 if (lenient_item if lenient_item is not None else output_text.endswith(" ")) else 0.0
    return {c: clip(truth + noise + bump) for c in CRITERIA}


def mark_lenient_outputs(engine: Engine) -> None:
    """End the lenient model's outputs with a space, the mark the loopback judge is lenient on."""
    with transaction(engine) as s:
        study = get_study(s, DEMO_STUDY)
        for item in s.exec(select(Item).where(Item.study_id == study.id, Item.model == LENIENT_ON)).all():
            if not item.output_text.endswith(" "):
                item.output_text += " "
                s.add(item)


def rate_first(engine: Engine, per_clinician: int, seed: int = 5) -> int:
    """Each demo clinician rates the first ``per_clinician`` items of their queue (random order), as the Rate page
    submits; returns how many ratings were made."""
    rng = random.Random(seed)
    made = 0
    with Session(engine) as s:
        study_id = get_study(s, DEMO_STUDY).id
        users = {u.username: u for u in s.exec(select(User).where(User.username.in_(CLINICIANS))).all()}
        texts = {i.id: i.output_text for i in s.exec(select(Item).where(Item.study_id == study_id)).all()}
    for name in CLINICIANS:
        who = Principal(users[name].id, name, name, "clinician")
        with Session(engine) as s:
            entries = rq.queue(s, who, get_study_by_id(s, study_id))
        for entry in [e for e in entries if not e.rated][:per_clinician]:
            scores = {c: clip(quality_of(texts[entry.item_id]) + rng.gauss(0, 0.5)) for c in CRITERIA}
            with transaction(engine) as s:
                ra.submit(s, who, get_study_by_id(s, study_id), entry.item_id, scores, retest=entry.retest,
                          elapsed_seconds=60.0)
            made += 1
    return made


def insert_jury(engine: Engine, judges: tuple[str, ...] = ("openai/judge-a", "anthropic/judge-b")) -> int:
    """A jury run of ``judges`` written as verdicts (no judge is called), scoring as :func:`judge` does."""
    with transaction(engine) as s:
        study = get_study(s, DEMO_STUDY)
        run = JuryRun(study_id=study.id, name="test jury (inserted by the tests)", source="litellm",
                      config={"name": "test jury", "judges": [{"model": j} for j in judges]},
                      config_hash="ef" * 32, status="done", finished_at=utcnow())
        s.add(run)
        s.flush()
        for item in s.exec(select(Item).where(Item.study_id == study.id)).all():
            for name in judges:
                scores = judge_scores(name, item.output_text, lenient_item=item.model == LENIENT_ON)
                s.add(JudgeVerdict(jury_run_id=run.id, item_id=item.id, judge=name, status="ok", scores=scores,
                                   explanations={c: "test" for c in scores}, prompt="prompt", raw_response="{}"))
        return run.id
