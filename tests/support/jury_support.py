"""What the jury tests share: a study whose items script the fake server, and a fast-retrying config."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, JudgeVerdict, JuryRun
from medhelm_core.jury.config import JuryConfig, build_config
from medhelm_core.jury.parse import _spans
from medhelm_core.rubric import default_rubric
from medhelm_core.studies import get_or_create_study

PRICED = "openai/gpt-4o-2024-05-13"  # in litellm's offline cost map: $5 / $15 per million tokens
LOCAL_A, LOCAL_B = "openai/local-judge-a", "openai/local-judge-b"  # not in the map: no price


def make_study(engine: Engine, scenarios: list[str], name: str = "s", benchmark: str = "medi_qa") -> str:
    """A study with one item per scenario; the scenario word in the output tells the fake server what to do."""
    with transaction(engine) as session:
        study, _ = get_or_create_study(session, name)
        for i, scenario in enumerate(scenarios):
            session.add(Item(study_id=study.id, benchmark=benchmark, instance_id=f"i{i}", model="model-x",
                             input_text=f"Question {i}: can I take ibuprofen with food?",
                             output_text=f"Yes, with food. SCENARIO={scenario}",
                             reference_text="Yes; take it with food to spare the stomach."))
    return name


def fast_config(base_url: str, judges: tuple[str, ...] = (LOCAL_A,), **settings) -> JuryConfig:
    """The jury at the loopback server, with back-off in milliseconds so retry tests stay quick."""
    config = build_config(default_rubric(), list(judges), api_base=base_url,
                          **{"timeout": 5.0, "concurrency": 4, **settings})
    return replace(config, retry_base_seconds=0.01, retry_max_seconds=0.05, max_retries=3)


def verdicts(engine: Engine) -> list[JudgeVerdict]:
    with Session(engine) as session:
        return list(session.exec(select(JudgeVerdict).order_by(JudgeVerdict.item_id, JudgeVerdict.judge)).all())


def the_run(engine: Engine, run_id: int) -> JuryRun:
    with Session(engine) as session:
        return session.get(JuryRun, run_id)


def by_scenario(engine: Engine) -> dict[str, list[JudgeVerdict]]:
    with Session(engine) as session:
        outputs = {i.id: i.output_text.split("SCENARIO=")[1] for i in session.exec(select(Item)).all()}
    result: dict[str, list[JudgeVerdict]] = {}
    for v in verdicts(engine):
        result.setdefault(outputs[v.item_id], []).append(v)
    return result


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every complete top-level JSON object in ``text``, in order (nested objects stay inside theirs): what the
    verdict parser's brace scanner finds, for the tests that check it on its own.

    >>> json_objects('a {"x": 1} b {"y": {"z": 2}} c {broken')
    [{'x': 1}, {'y': {'z': 2}}]
    """
    return [obj for _, obj in _spans(text)]
