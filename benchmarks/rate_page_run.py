"""One Rate page run as pages/rate.py makes it, for benchmarks/rating.py and benchmarks/load.py: the session check
(:func:`pages.common.admit`, the page's own), the clinician's progress, the study, the rubric (kept per session,
as the page keeps it) and :func:`~medhelm_core.rating.queue.rate_view`; then, after a submission, the move to
the next open item (:func:`~medhelm_core.rating.queue.next_open_index`), as the page's ``move_on`` does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # pages.common

from medhelm_core.accounts.auth import Principal  # noqa: E402
from medhelm_core.rating import progress as rp  # noqa: E402
from medhelm_core.rating import queue as rq  # noqa: E402
from medhelm_core.rating import rater_item as ri  # noqa: E402
from medhelm_core.rubric import RubricSpec  # noqa: E402
from medhelm_core.studies import get_study_by_id  # noqa: E402
from pages.common import admit  # noqa: E402


def page_run(engine: Engine, token: str, state: dict, rubrics: dict[int, RubricSpec]) -> tuple[Principal, rq.RateView]:
    """One run for the clinician of ``token`` in their first study; ``state`` plays the page's session state
    (``position``, ``revising``), ``rubrics`` its per-session rubric cache."""
    who = admit("rate", token=token, eng=engine)
    with Session(engine) as s:
        chosen = rp.progress(s, who)[0]
        study = get_study_by_id(s, chosen.study_id)
        if study.rubric_id not in rubrics:
            rubrics[study.rubric_id] = ri.study_rubric(s, study)
        view = rq.rate_view(s, who, study, state.get("position"), revising=bool(state.get("revising")),
                            counts=chosen)
    state["position"], state["study_id"] = view.index, study.id
    if not view.all_done:
        state.pop("revising", None)
    return who, view


def move_on(engine: Engine, who: Principal, state: dict) -> None:
    """After a submission or a skip: the next open item, as the page's ``move_on``."""
    with Session(engine) as s:
        state["position"] = rq.next_open_index(s, who, get_study_by_id(s, state["study_id"]), state["position"])
