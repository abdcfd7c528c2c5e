"""Seed the bundled demo: a demo study of written-for-the-project items, demo accounts, and the real
MedHELM validation ratings as a second study. Seeding is idempotent: running it again changes nothing.

No judge verdicts are invented for the demo study; its jury runs when a researcher configures a judge.
The MedHELM study carries the paper's recorded jury means, labelled as recorded, and the items' texts (the
prompts and the model outputs the clinicians rated; the public release has no reference answers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import select

from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.migrate import upgrade_database
from medhelm_core.db.models import User
from medhelm_core.importers import ImportReport, import_paths
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.studies import get_or_create_study, update_settings

ANNOTATIONS = Path(__file__).resolve().parent.parent / "annotations"
DEMO_ITEMS = ANNOTATIONS / "demo" / "items.jsonl"
MEDHELM_RATINGS = ANNOTATIONS / "medhelm_validation" / "ratings.csv"
MEDHELM_TEXTS = ANNOTATIONS / "medhelm_validation" / "item_texts.csv"
DEMO_STUDY = "demo"
MEDHELM_STUDY = "medhelm-validation"
MEDHELM_DESCRIPTION = (
    "The clinician ratings behind the MedHELM paper's jury validation (arXiv 2505.23802), with the jury's "
    "recorded mean scores and the items' texts (the prompts and the model outputs rated). The public release "
    "has no reference answers, so ROUGE-L and BERTScore cannot be computed for these items."
)
#: the description seeded before the texts were bundled, brought up to date by the next seeding
_OLD_MEDHELM_DESCRIPTION = (
    "The clinician ratings behind the MedHELM paper's jury validation (arXiv 2505.23802), with the jury's "
    "recorded mean scores. Item texts are not included in the public data."
)
#: the paper's choice for its jury-clinician ICC (0.474): the MedHELM protocol over aci_bench and medi_qa pooled
MEDHELM_PAPER_BENCHMARKS = ("aci_bench", "medi_qa")

#: the demo study's seed of the clinicians' queues and of the assignment (a real study draws its own at random)
DEMO_ORDER_SEED = 20250529

#: Local demo accounts (username, role, password). For a demo on your own machine only.
DEMO_ACCOUNTS = (
    ("admin", "admin", "admin-demo"),
    ("researcher", "researcher", "researcher-demo"),
    ("clinician1", "clinician", "clinician1-demo"),
    ("clinician2", "clinician", "clinician2-demo"),
    ("clinician3", "clinician", "clinician3-demo"),
)


@dataclass
class DemoReport:
    """What seeding did, and the accounts to print."""

    accounts_created: list[str] = field(default_factory=list)
    assignments_added: int = 0
    studies: dict[str, ImportReport] = field(default_factory=dict)


def seed_demo(engine: Engine) -> DemoReport:
    """Bring the database to the latest schema and seed the demo studies and accounts."""
    upgrade_database(engine)
    report = DemoReport()
    with transaction(engine) as session:
        for username, role, password in DEMO_ACCOUNTS:
            if session.exec(select(User).where(User.username == username)).first() is None:
                add_user(session, username, role, password, display_name=username.capitalize())
                report.accounts_created.append(username)
        demo, new_demo = get_or_create_study(
            session,
            DEMO_STUDY,
            title="Demo: clinical answers from three models",
            description="Written for this project (no real patient data): patient questions, visit notes, "
            "treatment plans and medication questions, each answered by three models.",
        )
        if new_demo:  # the same queues and assignments on every machine, so demos and the tests on them repeat
            demo.order_seed = DEMO_ORDER_SEED
            session.add(demo)
        report.studies[DEMO_STUDY] = import_paths(session, demo, [DEMO_ITEMS], "jsonl")
        # Each demo item goes to two of the three demo clinicians, so they can start rating at once.
        demo_clinicians = [name for name, role, _ in DEMO_ACCOUNTS if role == "clinician"]
        report.assignments_added = len(assign_balanced(session, demo, 2, demo_clinicians).new)
        medhelm, new_medhelm = get_or_create_study(
            session,
            MEDHELM_STUDY,
            title="MedHELM validation study (real clinician ratings)",
            description=MEDHELM_DESCRIPTION,
        )
        if medhelm.description == _OLD_MEDHELM_DESCRIPTION:
            medhelm.description = MEDHELM_DESCRIPTION
            session.add(medhelm)
        report.studies[MEDHELM_STUDY] = import_paths(session, medhelm, [MEDHELM_RATINGS], "medhelm-ratings",
                                                     texts=MEDHELM_TEXTS)
        if new_medhelm:  # opens on the paper's figures; a researcher's later choice is never reset
            update_settings(session, medhelm, agreement_protocol="medhelm",
                            agreement_benchmarks=list(MEDHELM_PAPER_BENCHMARKS))
    return report
