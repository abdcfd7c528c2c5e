"""Exporting a calibration report is recorded in the audit trail (who, when, which study and options)."""

from __future__ import annotations

from sqlmodel import Session, select

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import AuditEvent
from medhelm_core.demo import MEDHELM_STUDY
from medhelm_core.report import ReportOptions, write_report
from medhelm_core.studies import get_study


def test_a_report_export_is_audited(sqlite_demo_engine, tmp_path):
    with transaction(sqlite_demo_engine) as s:
        study = get_study(s, MEDHELM_STUDY)
        write_report(s, study, tmp_path / "report", ReportOptions(benchmarks=("aci_bench", "medi_qa")),
                     actor="researcher")
    with Session(sqlite_demo_engine) as s:
        event = s.exec(select(AuditEvent).where(AuditEvent.action == "report.export")).one()
    assert event.actor == "researcher" and event.study_id == study.id
    assert event.details["benchmarks"] == ["aci_bench", "medi_qa"]
    assert (tmp_path / "report" / "report.html").is_file()
