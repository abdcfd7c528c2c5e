"""A study keeps how its figures open (protocol and benchmarks) and what its clinicians read (instructions), each
change checked and in the audit trail; the MedHELM validation study opens on the paper's choice."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import AuditEvent, Item
from medhelm_core.demo import MEDHELM_PAPER_BENCHMARKS, MEDHELM_STUDY
from medhelm_core.errors import ValidationError
from medhelm_core.studies import get_or_create_study, get_study, update_settings


@pytest.fixture
def study_db(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        for benchmark in ("aci_bench", "medi_qa", "mtsamples"):
            s.add(Item(study_id=study.id, benchmark=benchmark, instance_id="1", model="m", input_text="q",
                       output_text="a"))
    return engine


def test_the_view_and_the_instructions_are_kept_and_audited(study_db):
    with transaction(study_db) as s:
        study = get_study(s, "s")
        assert (study.agreement_protocol, study.agreement_benchmarks, study.instructions) == ("medhelm", [], "")
        update_settings(s, study, agreement_protocol="full", agreement_benchmarks=["medi_qa", "aci_bench", "medi_qa"],
                        instructions="  Rate as the treating physician.  ", actor="cli")
    with Session(study_db) as s:
        study = get_study(s, "s")
        assert (study.agreement_protocol, study.agreement_benchmarks) == ("full", ["aci_bench", "medi_qa"])
        assert study.instructions == "Rate as the treating physician."
        actions = {e.action: e.details for e in s.exec(select(AuditEvent)).all()}
    assert actions["study.agreement_defaults"]["benchmarks"] == ["aci_bench", "medi_qa"]
    assert actions["study.instructions"]["characters"] == len("Rate as the treating physician.")


@pytest.mark.parametrize(("fields", "message"), [
    ({"agreement_protocol": "paper"}, "protocol 'paper' unknown"),
    ({"agreement_benchmarks": ["medi_qa", "pubmed_qa"]}, "has no benchmark pubmed_qa"),
    ({"agreement_benchmarks": "medi_qa"}, "must be a list of names"),
    ({"instructions": "x" * 20_001}, "at most 20000 are kept"),
])
def test_a_bad_setting_changes_nothing(study_db, fields, message):
    with pytest.raises(ValidationError, match=message), transaction(study_db) as s:
        update_settings(s, get_study(s, "s"), **{"instructions": "kept only if all is well", **fields})
    with Session(study_db) as s:
        study = get_study(s, "s")
        assert (study.agreement_protocol, study.agreement_benchmarks, study.instructions) == ("medhelm", [], "")


def test_the_medhelm_validation_study_opens_on_the_papers_benchmarks(sqlite_demo_engine):
    with Session(sqlite_demo_engine) as s:
        study = get_study(s, MEDHELM_STUDY)
    assert (study.agreement_protocol, tuple(study.agreement_benchmarks)) == ("medhelm", MEDHELM_PAPER_BENCHMARKS)
