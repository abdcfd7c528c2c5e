"""The verdict's protocol is pre-registered: fixed with its time, every change audited, and a change made after
the results were viewed flagged; on the MedHELM validation study the verdict says what two clinicians per item
cannot decide."""

from __future__ import annotations

import json
from types import SimpleNamespace

from sqlmodel import Session, select
from support.helpers import run_cli

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import AuditEvent
from medhelm_core.demo import MEDHELM_STUDY
from medhelm_core.report.content import ReportContent
from medhelm_core.studies import get_study
from medhelm_core.verdict import fix_protocol, study_verdict


def events(engine, action: str) -> list[dict]:
    with Session(engine) as s:
        return [e.details for e in s.exec(select(AuditEvent).where(AuditEvent.action == action)
                                          .order_by(AuditEvent.id)).all()]


def test_protocol_change_after_viewing_is_audited_and_flagged(demo_engine):
    with transaction(demo_engine) as s:
        study = get_study(s, MEDHELM_STUDY)
        fix_protocol(s, study, {"epsilon": 0.15, "min_items": 40}, actor="cli")
    with transaction(demo_engine) as s:
        first = study_verdict(s, get_study(s, MEDHELM_STUDY), actor="cli")
    assert first.pre_registered and not first.changed_after_viewing and first.flags == []
    assert first.protocol.epsilon == 0.15
    with transaction(demo_engine) as s:
        fix_protocol(s, get_study(s, MEDHELM_STUDY), {"delta": 0.5}, actor="cli")
    with transaction(demo_engine) as s:
        again = study_verdict(s, get_study(s, MEDHELM_STUDY), actor="cli")
    assert again.changed_after_viewing
    assert "Protocol changed after results were viewed (see the audit trail)." in again.flags
    changes = events(demo_engine, "study.verdict_protocol")
    assert [c["after_results_viewed"] for c in changes] == [False, True]
    assert changes[1]["previous"]["delta"] == 0.25 and changes[1]["protocol"]["delta"] == 0.5
    assert len(events(demo_engine, "verdict.viewed")) == 1  # the first viewing is the one that counts
    opening = ReportContent.verdict_lines.fget(SimpleNamespace(verdict=again))  # what the report opens with
    assert opening[0][1][0] == "Protocol changed after results were viewed (see the audit trail)."


def test_cli_fixes_the_protocol_and_gives_an_honest_verdict_on_medhelm(demo_engine, capsys):
    url = demo_engine.url.render_as_string(hide_password=False)
    bad = run_cli(capsys, url, "verdict", MEDHELM_STUDY, "--set", "epsilon=2")
    assert bad.returncode == 1 and "epsilon" in bad.stderr and "Traceback" not in bad.stderr
    fixed = run_cli(capsys, url, "verdict", MEDHELM_STUDY, "--set", "epsilon=0.2", "--set", "min_shared_items=30")
    assert fixed.returncode == 0 and "protocol fixed" in fixed.stdout
    shown = run_cli(capsys, url, "verdict", MEDHELM_STUDY, "--json")
    assert shown.returncode == 0, shown.stderr
    result = json.loads(shown.stdout)
    alt = [r for r in result["verdict"] if r["test"] == "alt_test" and r["benchmark"] == "pooled"]
    assert [r["verdict"] for r in alt] == ["NOT ENOUGH DATA"]  # recorded jury means: no judge to test alone
    assert "cannot run the Alternative Annotator Test" in " ".join(result["design"])
    assert result["flags"] == [] and result["bias"][0]["effect"] == "leniency"
    text = run_cli(capsys, url, "verdict", MEDHELM_STUDY)
    assert "Judge bias panel:" in text.stdout and "lenient" in text.stdout
