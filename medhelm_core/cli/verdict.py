"""``medhelm verdict``: fix a study's acceptance protocol (``--set``) and read its verdict and judge bias panel."""

from __future__ import annotations

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction
from medhelm_core.errors import ValidationError
from medhelm_core.studies import get_study


def _settings(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"--set takes KEY=VALUE (e.g. epsilon=0.2), got {pair!r}")
        out[key.strip()] = value.strip()
    return out


@app.command("verdict")
def verdict_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    settings: list[str] = typer.Option(
        [], "--set", help="Fix the protocol before looking: KEY=VALUE, repeatable; keys tests (alt_test,equivalence), "
        "epsilon, delta, alpha, min_items, min_clinicians, min_shared_items, criterion. Recorded in the audit trail."
    ),
    jury_run: int | None = typer.Option(None, "--jury-run", help="Jury run id (default: the newest with verdicts)."),
    as_json: bool = JsonOption,
) -> None:
    """May the jury stand in for a clinician? PASS / FAIL / NOT ENOUGH DATA under the study's protocol.

    With --set, only fixes the protocol (no results are shown, so the protocol stays pre-registered);
    without, computes the Alternative Annotator Test, the equivalence test and the judge bias panel, and
    records that the results were viewed.
    """
    from medhelm_core.verdict import fix_protocol, study_verdict

    with transaction(engine_for(ctx)) as session:
        target = get_study(session, study)
        if settings:
            protocol = fix_protocol(session, target, _settings(settings), actor="cli")
            viewed = target.verdict_viewed_at is not None
            note = " (changed after results were viewed: flagged in the report)" if viewed else ""
            emit({"study": study, "protocol": protocol.to_dict(), "changed_after_viewing": viewed}, as_json,
                 f"study {study}: protocol fixed{note}: {protocol.describe()}")
            return
        result = study_verdict(session, target, jury_run, actor="cli")
    lines = [f"study {study}: verdict under protocol {result.protocol.describe()}"]
    lines += [f"! {flag}" for flag in result.flags]
    lines += ["", "Verdict:", *(f"- {s}" for s in result.sentences)]
    lines += ["", "What this design can decide:", *(f"- {s}" for s in result.design)]
    lines += ["", "Judge bias panel:", *(f"- {s}" for s in result.bias_words)]
    emit(result.to_dict(), as_json, "\n".join(lines))
